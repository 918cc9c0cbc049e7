"""Names, checked against an independent truth: does a bare name find the line that declares it?

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. Unlike ``benchmarks/symbols.py``,
which takes the definitions from localidx's own chunks, this one takes them from Universal Ctags (Debian
``universal-ctags``), so a chunk that localidx marks as a definition but that does not hold the declaration line (a
class part holding only its Javadoc, a constructor taken for its class) counts as the miss it is.

For each repository of a set (``--set dev``: the generated set's repositories, ``benchmarks/eval/shortq/devset.py``,
in the half ``--split`` names; ``--set shortq``: the semble benchmark's tuning repositories, the folder it indexes),
the tree and the localidx index are the short-question run's (``benchmarks/eval/shortq/run.py``; the same ``--work``
reuses them). The names: ctags definitions in source files (no tests, examples, vendored code:
``ctags.is_source``) of class-like kinds, functions and methods, and types, and shell functions, with C and C++
prototypes and Python stub files as declarations of the same names (a header's prototype answers a name as well as
its definition does); a name qualifies when ctags finds at most two of these (three when one is a prototype; a Java
or C# constructor counts as its class, not as a definition of its own), it is an identifier, not an anonymous
struct, and has at least four characters. ``--per-repo`` names are sampled per repository with a fixed digest, half
class-like and half the rest where there are enough.

Each name is asked bare, as ``localidx search -k 10 NAME`` asks it (hybrid; ``--mode bm25`` too). A hit at rank r:
the r-th match is in the defining file and its lines hold a declaration line of the name. Printed: hit@1 and hit@3
by language, by kind (class-like, function, type) and by repository, for localidx and, with ``--semble-python``, for
semble with the same vectors; ``--misses`` lists each miss with what came first.

    .venv/bin/python benchmarks/names.py --work /work/scratch/W --set dev --split tuning
    .venv/bin/python benchmarks/names.py --work /work/scratch/W --set shortq --semble-bench /work/data/shortq/semble
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "eval" / "shortq"))

import ctags  # noqa: E402
import run as shortq  # noqa: E402

SALT = "localidx-names-1"
KIND_GROUP = {**{k: "class" for k in ctags.CONTAINER_KINDS}, **{k: "type" for k in ctags.TYPE_KINDS},
              **{k: "function" for k in ctags.FUNCTION_KINDS}, "prototype": "function"}
MIN_LENGTH = 4
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LUA_QUALIFIED = re.compile(r"[A-Za-z_][\w.]*[:.]([A-Za-z_]\w*)")


def _group(tag: ctags.Tag) -> str | None:
    if tag.kind == "member" and not tag.path.endswith(".py"):
        return None  # a field outside Python
    if tag.kind == "macro":
        return None  # preprocessor names: not what a name question asks for here
    if tag.kind == "module" and tag.path.endswith(".rs"):
        return None  # `mod x;` declares a file; its contents are elsewhere
    if tag.name.startswith(("__anon", "AnonymousFunction")) or not _IDENTIFIER.fullmatch(tag.name):
        return None  # ctags' names for anonymous structs and functions
    return KIND_GROUP.get(tag.kind)


def _own_name(tag: ctags.Tag) -> ctags.Tag:
    """ctags names a Lua method or module function with its table (``M:help``, ``M.setup``): it defines ``help`` and
    ``setup`` as much as a table field ``help = function()`` does, so it counts as a definition of the bare name."""
    if tag.language == "Lua" and (found := _LUA_QUALIFIED.fullmatch(tag.name)):
        return dataclasses.replace(tag, name=found.group(1))
    return tag


def _is_constructor(tag: ctags.Tag) -> bool:
    """A method named as its enclosing class (Java, C#, C++, PHP's __construct aside): it is the class's, not a
    definition of the name of its own."""
    return tag.kind in ("method", "function") and tag.scope.split(".")[-1].split("::")[-1] == tag.name


def sample_names(root: Path, repo: str, per_repo: int) -> list[dict]:
    """The names asked in the tree at ``root``: ``{"query", "group", "targets": [{path, line}]}``."""
    sources = [p for p in ctags.tracked_files(root) if ctags.is_source(p)
               or p.endswith((".pyi", ".sh")) and ctags.is_source(p[:-1] if p.endswith(".pyi") else p[:-2] + "py")]
    by_name: dict[str, list[ctags.Tag]] = defaultdict(list)
    for tag in ctags.definitions(root, sources, declarations=True):
        tag = _own_name(tag)
        if _group(tag) is None or _is_constructor(tag):
            continue
        by_name[tag.name].append(tag)
    candidates = []
    for name, tags in by_name.items():
        limit = 3 if any(t.kind == "prototype" for t in tags) else 2
        if len(tags) > limit or len(name) < MIN_LENGTH or name.startswith("operator"):
            continue
        groups = {_group(t) for t in tags}
        group = "class" if "class" in groups else sorted(groups)[0]
        candidates.append({"query": name, "group": group,
                           "targets": [{"path": t.path, "line": t.line} for t in tags]})
    order = sorted(candidates, key=lambda c: hashlib.sha256(f"{SALT}:{repo}:{c['query']}".encode()).hexdigest())
    classes = [c for c in order if c["group"] == "class"]
    others = [c for c in order if c["group"] != "class"]
    half = per_repo // 2
    chosen = classes[:max(half, per_repo - len(others))] + others[:max(per_repo - half, per_repo - len(classes))]
    return sorted(chosen[:per_repo], key=lambda c: c["query"])


def hit_rank(ranked: list[list], targets: list[dict], prefix: str) -> int | None:
    """The first rank whose match holds a declaration line of the name, or None."""
    for rank, (path, start, end) in enumerate(ranked, 1):
        for t in targets:
            if path == prefix + t["path"] and start <= t["line"] <= end:
                return rank
    return None


def _rate(values: list[int | None], k: int) -> float:
    return sum(1 for v in values if v is not None and v <= k) / len(values) if values else float("nan")


def print_table(title: str, rows: list[dict], key: str, retrievers: list[str]) -> None:
    print(f"\n### {title}\n")
    print("| " + key + " | names | " + " | ".join(f"{r} hit@1 | {r} hit@3" for r in retrievers) + " |")
    print("|---|---:" + "|---:|---:" * len(retrievers) + "|")
    groups = sorted({r[key] for r in rows})
    for g in groups + ["**all**"]:
        part = [r for r in rows if g == "**all**" or r[key] == g]
        n = len({(r["repo"], r["query"]) for r in part})
        cells = []
        for name in retrievers:
            ranks = [r["rank"] for r in part if r["retriever"] == name]
            cells.append(f"{_rate(ranks, 1):.3f} | {_rate(ranks, 3):.3f}")
        print(f"| {g} | {n} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="the short-question run's work folder (reused)")
    parser.add_argument("--set", choices=("dev", "shortq"), default="dev")
    parser.add_argument("--split", choices=("tuning", "heldout", "all"), default="tuning")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--semble-bench", type=Path, default=None, help="for --set shortq: the benchmark's folder")
    parser.add_argument("--checkouts", type=Path, default=Path("/work/data/shortq/repos"))
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--language", action="append", default=[])
    parser.add_argument("--per-repo", type=int, default=30)
    parser.add_argument("--mode", action="append", choices=shortq.MODES, default=None,
                        help="localidx search mode (repeatable; default hybrid)")
    parser.add_argument("--model", default=None)
    parser.add_argument("--reindex", action="store_true")
    parser.add_argument("--semble-python", default=None, help="also ask semble (same vectors), as run.py does")
    parser.add_argument("--misses", action="store_true", help="list every miss of localidx's default search")
    parser.add_argument("--out", type=Path, default=None, help="per-name JSONL (default WORK/names-SET.jsonl)")
    args = parser.parse_args(argv)
    args.mode = args.mode or ["hybrid"]
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING)
    ctags.require_ctags()
    if args.set == "dev":
        jobs = shortq.dev_jobs(args)
    else:
        if args.semble_bench is None:
            raise SystemExit("--set shortq needs --semble-bench (its repos.json and annotations name the folders)")
        import scoring

        args.repos_json, args.annotations = args.semble_bench / "repos.json", args.semble_bench / "annotations"
        jobs = shortq.shortq_jobs(scoring.load_upstream(args.semble_bench), args)
    localidx = shortq.LocalidxRunner(args.work, args.model, args.reindex)
    semble = shortq.SembleRunner(args.work, args.semble_python) if args.semble_python else None
    rows: list[dict] = []
    try:
        for job in jobs:
            tree = shortq.prepare_tree(job, args.work / "trees" / job.set / job.name)
            names = sample_names(tree, job.full_name or job.name, args.per_repo)
            job.tasks = [{"query": n["query"]} for n in names]
            answers: dict[str, list[dict]] = {}
            for mode in args.mode:
                name = "localidx" if mode == "hybrid" else f"localidx-{mode}"
                path = args.work / "names" / name / localidx.answer_fp / job.set / \
                    f"{job.name}-{job.questions_key}.jsonl"
                answers[name] = shortq._load(path, len(job.tasks)) if not args.reindex else None
                if answers[name] is None:
                    answers[name] = localidx.answer(job, tree, mode, False)
                    shortq._store(path, answers[name])
            if semble:
                path = args.work / "names" / "semble" / semble.fp / job.set / f"{job.name}-{job.questions_key}.jsonl"
                answers["semble"] = shortq._load(path, len(job.tasks))
                if answers["semble"] is None:
                    answers["semble"] = semble.answer(job, tree, ["semble"])["semble"]
                    shortq._store(path, answers["semble"])
            localidx.close()
            for retriever, answered in answers.items():
                for n, answer in zip(names, answered):
                    rows.append({"repo": job.name, "language": job.language, "split": job.split,
                                 "group": n["group"], "query": n["query"], "retriever": retriever,
                                 "rank": hit_rank(answer["ranked"], n["targets"], job.prefix),
                                 "targets": [dict(t, path=job.prefix + t["path"]) for t in n["targets"]],
                                 "top": answer["ranked"][:3]})
            mine = [x for x in rows if x["repo"] == job.name]
            figures = " ".join(f"{r} {_rate([x['rank'] for x in mine if x['retriever'] == r], 1):.3f}" for r in answers)
            shortq.log(f"{job.set}/{job.name} ({job.language}, {len(names)} names): hit@1 {figures}")
    finally:
        localidx.close()
    retrievers = list(dict.fromkeys(r["retriever"] for r in rows))
    for half in sorted({r["split"] for r in rows}, key=lambda h: h != "tuning"):
        part = [r for r in rows if r["split"] == half]
        where = f"{half} half" if half else "the semble benchmark's tuning repositories"
        print(f"\n## Names asked bare ({args.set}, {where}): the declaration line (Universal Ctags) inside the match")
        for key, title in (("language", "by language"), ("group", "by kind"), ("repo", "by repository")):
            print_table(title, part, key, retrievers)
    if args.misses:
        print("\n### misses of localidx (hybrid)\n")
        for r in rows:
            if r["retriever"] == "localidx" and r["rank"] != 1:
                want = ", ".join(f"{t['path']}:{t['line']}" for t in r["targets"])
                got = ", ".join(f"{p}:{s}-{e}" for p, s, e in r["top"])
                print(f"- {r['repo']} `{r['query']}` ({r['group']}) wants {want}; rank {r['rank']}; first: {got}")
    out = args.out or args.work / f"names-{args.set}.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shortq.log(f"\nper-name rows: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
