"""The real-issue eval: public GitHub issues, as filed, asked of an index of their repository at the issue's base
commit; prints file Recall@1/5/10, MRR and function Recall@10 for two BM25 baselines, ``localidx search`` in each
mode, ``search --files`` and the ``balanced`` context pack, for the tuning and the held-out half, by language, with
paired bootstrap confidence intervals against the window baseline.

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. The instances, their gold and the
split are ``dataset.py``'s (read its docstring). Rankings are tuned on the tuning half only; the held-out half is the
figure to report.

Inputs come from outside and are never committed. ``fetch`` is the search tool's verb, not something this script can
call: fetch ``github:SWE-bench/SWE-bench``, ``github:ITMO-NSS-team/chronorepo_icdm26``,
``github:kuppireddypravalika/MSWE-validation-dataset`` and every repository in ``dataset.PYTHON_REPOS`` and
``dataset.MSWE_REPOS`` first; each leaves a bare git directory in ``--mirror``/owner+name/repo, which this script
reads with ``git show`` and clones from.

How it runs: one clone per repository under ``--work``/repos, moved from base commit to base commit in time order
(``git checkout -f``), with one index per repository (``--work``/state) brought up to date incrementally at each
commit, so only the files that changed are parsed again, between instances and between runs. Every instance's
figures are appended to ``--work``/results/<tag>.jsonl as soon as they are known (the baselines, which never change,
to baselines.jsonl): a stopped run resumes where it stopped, and ``--tag`` keeps the figures of a ranking change
apart from the ones before it.

Scoring is ``benchmarks/eval/bugreports/run.py``'s: files ranked by first appearance, cut to source files; file R@k,
MRR; function R@10 over the symbols of the first 10 matches. The baselines are BM25 (``bm25s``, benchmark-only) over
40-line windows of the source files and over whole source files, reading the issue as it is. ``search`` and
``search --files`` run as the CLI runs them (the query cut to the CLI's limit), ``-k 50`` chunks and 10 files.
``context-prompt balanced``: the files in the order the balanced pack's prompt names them. Each localidx setup runs
twice on the same index: as the code is, and with ``PRIOR_RULES`` (the report-reading constants before they were
tuned on the tuning half), labelled "(prior rules)".

    .venv/bin/pip install bm25s
    nice .venv/bin/python benchmarks/eval/realissues/run.py --work /work/scratch/realissues --no-embed --split heldout
    nice .venv/bin/python benchmarks/eval/realissues/run.py --work W --no-embed --split tuning --tag new \\
        --only "search,context"       # a ranking change: rerun the localidx setups only, baselines come from cache
    .venv/bin/python benchmarks/eval/realissues/run.py --work W --split all --report-only   # tables from the cache
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dataset  # noqa: E402

_spec = importlib.util.spec_from_file_location("bugreports_run", HERE.parent / "bugreports" / "run.py")
bugreports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugreports)

BASELINES = ["baseline windows", "baseline files"]
LOCALIDX = ["search bm25", "search hybrid", "search-files bm25", "search-files hybrid", "context-prompt balanced"]
# The report-reading rules as they were before they were tuned on this set (the tuning half): a setup label ending in
# PRIOR runs with these, so that one run compares both on the same indexes, instance by instance.
PRIOR = " (prior rules)"
PRIOR_RULES = {"localidx.retrieve.search": {"REPORT_ROLE_FACTOR": 0.5, "TITLE_SHARE": 0.0, "FILE_DEPTH_DECAY": 1.0},
               "localidx.retrieve.evidence": {"STRIP_TEMPLATES": False}}
SETUPS = BASELINES + [s + PRIOR for s in LOCALIDX] + LOCALIDX
NEEDS_VECTORS = ("search hybrid", "search-files hybrid")


class _Rules:
    """The report-reading constants of ``PRIOR_RULES`` in force inside the ``with`` block (``prior=True``)."""

    def __init__(self, prior: bool):
        self.prior, self.saved = prior, []

    def __enter__(self):
        if self.prior:
            for module, values in PRIOR_RULES.items():
                mod = importlib.import_module(module)
                for name, value in values.items():
                    self.saved.append((mod, name, getattr(mod, name)))
                    setattr(mod, name, value)

    def __exit__(self, *exc):
        for mod, name, value in reversed(self.saved):
            setattr(mod, name, value)
K_CHUNKS = 50


# -- the repository clone, moved commit by commit -------------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True)


def clone(mirror: Path, repo: str, work: Path) -> Path:
    path = work / "repos" / repo.replace("/", "+")
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(dataset.mirror_of(mirror, repo)), str(path)],
                       check=True)
    return path


def checkout(tree: Path, commit: str) -> None:
    """The work tree at ``commit``; blobs the mirror lacks (its largest files) are left out by a sparse checkout."""
    listing = git(tree, "ls-tree", "-r", "--full-tree", commit).stdout.splitlines()
    blobs = [(line.split()[2], line.split("\t", 1)[1]) for line in listing if line.split()[1] == "blob"]
    check = subprocess.run(["git", "cat-file", "--batch-check"], cwd=tree, input="\n".join(b for b, _ in blobs),
                           capture_output=True, text=True).stdout.splitlines()
    missing = [path for (_blob, path), line in zip(blobs, check) if line.endswith("missing")]
    sparse = git(tree, "config", "--get", "core.sparseCheckout", check=False).stdout.strip() == "true"
    if missing or sparse:
        # The patterns written directly: `git sparse-checkout set` would first rewrite the tree at the old commit.
        info = tree / ".git" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "sparse-checkout").write_text("/*\n" + "".join(f"!/{p}\n" for p in missing), encoding="utf-8")
        git(tree, "config", "core.sparseCheckout", "true")
    git(tree, "checkout", "-q", "-f", "--detach", commit)


# -- localidx setups ------------------------------------------------------------------------------------------------


def localidx_rankings(index, query: str, setups: list[str], settings) -> dict[str, tuple[list[str], list[str]]]:
    """(files in order, "path::symbol" keys of the first 10 matches) per localidx setup, as the CLI answers."""
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search_response

    out = {}
    for label in setups:
        kind, name = label.removesuffix(PRIOR).split(" ", 1)
        with _Rules(label.endswith(PRIOR)):
            if kind == "search":
                matches = search_response(index, query, k=K_CHUNKS, mode=name)["matches"]
                ranked = matches
            elif kind == "search-files":
                response = search_response(index, query, files=True, k=10, mode=name)
                matches, ranked = response["matches"], response["files"] + response["matches"]
            elif kind == "context-prompt":
                pack = build_for_repository(index, query, profile=name, settings=settings)
                matches, ranked = pack["matches"], pack["matches"] + pack["files"]
            else:
                continue
        out[label] = bugreports.ranked(matches, ranked)
    return out


# -- results cache --------------------------------------------------------------------------------------------------


def read_results(path: Path) -> dict[tuple[str, str], dict]:
    out = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[(row["id"], row["setup"])] = row
    return out


def append_results(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def scored(item: dict, label: str, files: list[str], symbols: list[str] | None) -> dict:
    result = bugreports.score(files, symbols, item)
    return {"id": item["id"], "setup": label, **result, "top": [f for f in files if bugreports.is_source(f)][:10]}


# -- main -----------------------------------------------------------------------------------------------------------


def run_repository(repo: str, items: list[dict], setups: list[str], args, cached: dict, base_cached: dict,
                   results_file: Path, baselines_file: Path, timing: dict) -> None:
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.store.index import open_index

    todo = [i for i in items if any((i["id"], s) not in (base_cached if s in BASELINES else cached) for s in setups)]
    if not todo:
        return
    tree = clone(args.mirror, repo, args.work)
    overrides = {"home": str(args.work / "state" / args.state / repo.replace("/", "+"))}
    if args.model:
        overrides["embed_model"] = args.model
    for n, item in enumerate(todo, 1):
        t0 = time.perf_counter()
        checkout(tree, item["base"])
        settings = load_settings(tree, overrides)
        stats = None if args.no_index else run_index(tree, True, settings, embed=not args.no_embed)
        t1 = time.perf_counter()
        fresh_base, fresh = [], []
        wanted_base = [s for s in setups if s in BASELINES and (item["id"], s) not in base_cached]
        if wanted_base:
            for label, files in bugreports.baselines(tree, item["query"]).items():
                fresh_base.append(scored(item, label, files, None))
        t2 = time.perf_counter()
        wanted = [s for s in setups if s not in BASELINES and (item["id"], s) not in cached]
        if wanted:
            index = open_index(tree, True, settings, read_only=True)
            try:
                for label, (files, symbols) in localidx_rankings(index, item["query"], wanted, settings).items():
                    fresh.append(scored(item, label, files, symbols))
            finally:
                index.close()
        t3 = time.perf_counter()
        append_results(baselines_file, fresh_base)
        append_results(results_file, fresh)
        for row in fresh_base:
            base_cached[(row["id"], row["setup"])] = row
        for row in fresh:
            cached[(row["id"], row["setup"])] = row
        timing["index"] += t1 - t0
        timing["baselines"] += t2 - t1
        timing["localidx"] += t3 - t2
        ranks = " ".join(f"{r['setup'].split()[0][:8]}/{r['setup'].split()[-1][:4]}={r['rank']}"
                         for r in fresh_base + fresh)
        indexed = f"{stats.files_processed} files parsed" if stats else "not indexed"
        print(f"  [{n}/{len(todo)}] {item['id']}: {ranks}  (index {t1 - t0:.1f}s {indexed}, baselines "
              f"{t2 - t1:.1f}s, localidx {t3 - t2:.1f}s)", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"),
                        help="where the fetched bare git directories are (owner+name/repo)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-realissues"),
                        help="clones, indexes, the instance cache and the results (kept between runs)")
    parser.add_argument("--split", choices=["tuning", "heldout", "all"], default="heldout")
    parser.add_argument("--repos", default=None, help="comma-separated owner/name or name (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many instances per repository")
    parser.add_argument("--only", default=None, help="comma-separated setup labels or prefixes")
    parser.add_argument("--tag", default="default",
                        help="results file name for the localidx setups (a ranking change gets a new tag)")
    parser.add_argument("--model", default=None, help="embedding model (default: the configured default)")
    parser.add_argument("--no-embed", action="store_true", help="index without vectors (no hybrid setups)")
    parser.add_argument("--no-index", action="store_true", help="query the indexes as they are (no update)")
    parser.add_argument("--report-only", action="store_true", help="print the tables from the cached results")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.state = ("noembed" if args.no_embed else (args.model or "default")).replace("/", "_")

    setups = SETUPS
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        setups = [s for s in SETUPS if any(s == w or s.startswith(w) for w in wanted)]
    if args.no_embed:
        setups = [s for s in setups if s.removesuffix(PRIOR) not in NEEDS_VECTORS]

    try:
        items = dataset.load(args.mirror, args.work, log=lambda m: print(m, file=sys.stderr))
    except dataset.MissingMirror as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"error: reading the datasets failed: {exc.stderr.decode(errors='replace').strip()}", file=sys.stderr)
        return 2
    if args.split != "all":
        items = [i for i in items if i["split"] == args.split]
    if args.repos:
        names = {r.strip().lower() for r in args.repos.split(",") if r.strip()}
        items = [i for i in items if i["repo"].lower() in names or i["repo"].split("/")[1].lower() in names]
    by_repo: dict[str, list[dict]] = {}
    for item in items:  # sorted by repository and base-commit time
        group = by_repo.setdefault(item["repo"], [])
        if args.limit is None or len(group) < args.limit:
            group.append(item)
    items = [i for group in by_repo.values() for i in group]
    if not items:
        print("error: no instance matches --split/--repos", file=sys.stderr)
        return 2

    results_file = args.work / "results" / f"{args.tag}-{args.state}.jsonl"
    baselines_file = args.work / "results" / "baselines.jsonl"
    cached, base_cached = read_results(results_file), read_results(baselines_file)
    timing = {"index": 0.0, "baselines": 0.0, "localidx": 0.0}
    started = time.perf_counter()
    if not args.report_only:
        for repo, group in by_repo.items():
            print(f"{repo}: {len(group)} instances", file=sys.stderr, flush=True)
            try:
                run_repository(repo, group, setups, args, cached, base_cached, results_file, baselines_file, timing)
            except dataset.MissingMirror as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
    wall = time.perf_counter() - started
    print_tables(items, setups, cached, base_cached, args, wall, timing)
    return 0


def print_tables(items, setups, cached, base_cached, args, wall, timing) -> None:
    def rows_for(subset: list[dict]) -> dict[str, list[dict]]:
        per = {}
        for label in setups:
            source = base_cached if label in BASELINES else cached
            rows = [source.get((i["id"], label)) for i in subset]
            if all(rows):
                per[label] = rows
        return per

    print(f"\n# Real issues: {len(items)} instances, {len({i['repo'] for i in items})} repositories, "
          f"{len({i['language'] for i in items})} languages; results {args.tag}-{args.state}; this run {wall:.0f}s "
          f"(index {timing['index']:.0f}s, baselines {timing['baselines']:.0f}s, localidx {timing['localidx']:.0f}s)")
    for split in dataset.SPLITS:
        part = [i for i in items if i["split"] == split]
        if not part:
            continue
        repos: dict[str, int] = {}
        for i in part:
            repos[i["repo"]] = repos.get(i["repo"], 0) + 1
        print(f"\n## {split}: {len(part)} instances; " + ", ".join(f"{r} {n}" for r, n in repos.items()) + "\n")
        print("\n".join(bugreports.table(rows_for(part), setups)))
        for language in sorted({i["language"] for i in part}):
            subset = [i for i in part if i["language"] == language]
            print(f"\n### {split}, {language} ({len(subset)} instances)\n")
            print("\n".join(bugreports.table(rows_for(subset), setups)))


if __name__ == "__main__":
    sys.exit(main())
