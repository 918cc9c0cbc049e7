"""The bug-report eval: each report of ``<repo>.jsonl`` asked of an index of its repository at the report's parent
commit; prints file Recall@1/5/10, MRR and function Recall@10 for two BM25 baselines, ``localidx search`` in each
mode and ``localidx context`` in each profile, with paired bootstrap confidence intervals against the baseline.

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. Not part of the test suite: the
repositories come from outside (fetch ``github:owner/name`` with the search tool's ``fetch``, which leaves a mirror
in ``/work/.mirror/owner+name/repo``; ``--mirror`` names another place).

How it is scored (the same for every setup):
- a setup ranks files: the baselines directly; ``search`` by the first appearance of each file among its ``-k 50``
  chunks; ``context`` by the order of files in the pack, ``context-files`` by the pack's files view (its
  ``files`` field, then the pack's own files);
- the ranking is cut to source files (``gold.is_source``: code localidx parses, not tests, docs or examples), as a
  user looking for the code to fix reads it;
- file R@k: a gold file is among the first k; MRR: 1 / rank of the first gold file (0 when none is ranked);
- function R@10: a gold function (``path::symbol``) is the symbol, or one of the merged symbols, of one of the
  first 10 chunks (search) or pack matches (context).

Baselines (benchmark-only, ``pip install bm25s``): BM25 (bm25s, English stop words) over 40-line windows of the
source files with a 20-line stride, a file scoring its best window; and BM25 over whole source files. Both read the
report as it is.

Each report gets a git worktree of its repository at its parent commit under ``--work`` (kept, so reruns index
nothing new), all indexed into one LanceDB database per repository and model, so identical text is embedded once.

    .venv/bin/pip install bm25s
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/bugreports/run.py                    # every set here
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/bugreports/run.py attrs tqdm --only baseline,search
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/bugreports/run.py --no-embed --only "baseline,search bm25"
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gold import is_source  # noqa: E402

SETUPS = ["baseline windows", "baseline files", "search bm25", "search vector", "search hybrid", "search-files hybrid",
          "context legacy", "context conservative", "context balanced", "context aggressive", "context-files balanced",
          "context-prompt balanced"]
BASELINE = "baseline windows"
K_CHUNKS = 50
WINDOW, STRIDE = 40, 20


# -- repositories ---------------------------------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def worktree(repo: str, commit: str, mirror: Path, work: Path) -> Path:
    """A worktree of ``repo`` at ``commit`` (made once, kept)."""
    name = repo.split("/")[1]
    base = work / "repos" / name
    if not base.exists():
        source = mirror / repo.replace("/", "+") / "repo"
        if not source.exists():
            raise SystemExit(f"{repo}: no mirror at {source} (fetch github:{repo} first)")
        base.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(source), str(base)], check=True)
    tree = work / "trees" / name / commit[:12]
    if not tree.exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        git(base, "worktree", "add", "-q", "-f", "--no-checkout", "--detach", str(tree), commit)
        # A mirror may lack its largest blobs (data files): check out everything else.
        listing = git(base, "ls-tree", "-r", "--full-tree", commit).splitlines()
        blobs = [(line.split()[2], line.split("\t", 1)[1]) for line in listing if line.split()[1] == "blob"]
        check = subprocess.run(["git", "cat-file", "--batch-check"], cwd=base, input="\n".join(b for b, _ in blobs),
                               capture_output=True, text=True).stdout.splitlines()
        missing = [path for (_blob, path), line in zip(blobs, check) if line.endswith("missing")]
        if missing:
            git(tree, "sparse-checkout", "set", "--no-cone", "/*", *[f"!/{p}" for p in missing])
        git(tree, "checkout", "-q", "-f", commit)
    return tree


def source_files(tree: Path) -> list[str]:
    listed = git(tree, "ls-files", "-z").split("\0")
    return sorted(p for p in listed if p and is_source(p) and (tree / p).is_file())


# -- baselines ------------------------------------------------------------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def baselines(tree: Path, query: str) -> dict[str, list[str]]:
    """The two BM25 baselines' file rankings for one report."""
    import bm25s

    files = source_files(tree)
    texts = {p: _read(tree / p) for p in files}
    windows, owners = [], []
    for p, text in texts.items():
        lines = text.split("\n")
        for start in range(0, max(1, len(lines) - WINDOW + STRIDE), STRIDE):
            windows.append("\n".join(lines[start : start + WINDOW]))
            owners.append(p)
    out = {}
    for label, corpus, owner in (("baseline windows", windows, owners),
                                 ("baseline files", list(texts.values()), list(texts))):
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        k = min(len(corpus), 2000)
        docs, scores = retriever.retrieve(tokens, k=k, show_progress=False)
        ranking: list[str] = []
        for doc, score in zip(docs[0], scores[0]):
            if score <= 0:
                break
            path = owner[int(doc)]
            if path not in ranking:
                ranking.append(path)
        out[label] = ranking
    return out


def cached_baselines(tree: Path, item: dict, work: Path) -> dict[str, list[str]]:
    """``baselines``, kept in ``work``/baselines.json by report, commit and query (they never change otherwise)."""
    import hashlib

    cache_file = work / "baselines.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    key = hashlib.sha256(f"{item['parent']}\0{item['query']}\0{WINDOW}\0{STRIDE}".encode()).hexdigest()
    if key not in cache:
        cache[key] = baselines(tree, item["query"])
        cache_file.write_text(json.dumps(cache))
    return cache[key]


# -- localidx -------------------------------------------------------------------------------------------------------


def localidx_rankings(index, query: str, setups: list[str], settings) -> dict[str, tuple[list[str], list[str]]]:
    """(files in order, "path::symbol" keys of the first 10 chunks) per localidx setup."""
    from localidx.retrieve import search
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search_response

    out = {}
    for label in setups:
        kind, name = label.split(" ", 1)
        if kind == "search":
            matches = [m.to_dict() for m in search(index, query, k=K_CHUNKS, mode=name)]
        elif kind == "search-files":
            # what `localidx search --files` prints: the 10 best files, then its 10 matches for the function keys
            response = search_response(index, query, files=True, k=10, mode=name)
            matches = response["files"] + response["matches"]
        elif kind.startswith("context"):
            pack = build_for_repository(index, query, profile=name, settings=settings)
            # "context": the excerpts' files in pack order; "context-files": the pack's files view (its "files"
            # field); "context-prompt": the files as the augmented prompt names them (excerpts, then its list of
            # the other ranked files)
            matches = {"context": pack["matches"], "context-files": pack["files"] + pack["matches"],
                       "context-prompt": pack["matches"] + pack["files"]}[kind]
        else:
            continue
        out[label] = ranked(matches, matches)
    return out


def ranked(matches: list[dict], ranked_matches: list[dict]) -> tuple[list[str], list[str]]:
    """(files in the order ``ranked_matches`` first names them, ``path::symbol`` of the first 10 ``matches``)."""
    files = list(dict.fromkeys(m["path"] for m in ranked_matches))
    symbols = []
    for m in matches[:10]:
        names = [m.get("symbol") or ""] + list(m.get("symbols") or [])
        symbols.extend(f"{m['path']}::{s}" for s in names if s)
    return files, symbols


# -- scoring --------------------------------------------------------------------------------------------------------


def score(files: list[str], symbols: list[str] | None, item: dict) -> dict:
    ranked = [f for f in files if is_source(f)]
    gold = set(item["gold_files"])
    rank = next((i + 1 for i, f in enumerate(ranked) if f in gold), None)
    result = {"rank": rank, "r1": float(rank == 1), "r5": float(rank is not None and rank <= 5),
              "r10": float(rank is not None and rank <= 10), "mrr": 1.0 / rank if rank else 0.0}
    if symbols is not None and item["gold_functions"]:
        golds = set(item["gold_functions"])
        result["f10"] = float(any(s in golds for s in symbols))
    return result


def bootstrap(diffs: list[float], rounds: int = 10_000, seed: int = 7) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def table(per: dict[str, list[dict]], setups: list[str]) -> list[str]:
    lines = ["| setup | n | file R@1 | R@5 | R@10 | MRR | function R@10 | ΔR@1 vs windows [95% CI] | ΔMRR [95% CI] |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    base = per.get(BASELINE)
    for label in setups:
        rows = per.get(label)
        if not rows:
            continue
        n = len(rows)

        def mean(key: str) -> float:
            return sum(r[key] for r in rows) / n

        f10 = [r["f10"] for r in rows if "f10" in r]
        f10_cell = f"{sum(f10) / len(f10):.3f}" if f10 else "-"
        cells = [f"{mean(k):.3f}" for k in ("r1", "r5", "r10", "mrr")]
        if base and label != BASELINE and len(base) == n:
            d1 = [a["r1"] - b["r1"] for a, b in zip(rows, base)]
            dm = [a["mrr"] - b["mrr"] for a, b in zip(rows, base)]
            lo1, hi1 = bootstrap(d1)
            lom, him = bootstrap(dm)
            delta = [f"{sum(d1) / n:+.3f} [{lo1:+.3f}, {hi1:+.3f}]", f"{sum(dm) / n:+.3f} [{lom:+.3f}, {him:+.3f}]"]
        else:
            delta = ["", ""]
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + f" | {f10_cell} | " + " | ".join(delta) + " |")
    return lines


# -- main -----------------------------------------------------------------------------------------------------------


def load_sets(names: list[str]) -> list[dict]:
    files = [HERE / f"{n}.jsonl" for n in names] if names else sorted(HERE.glob("*.jsonl"))
    items = []
    for path in files:
        if not path.exists():
            raise SystemExit(f"no set {path}")
        items.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", help="set names (attrs, zod, ...); default: every set here")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-bugreports"))
    parser.add_argument("--model", default=None, help="embedding model (default: the configured default)")
    parser.add_argument("--no-embed", action="store_true", help="index without vectors (BM25 setups only)")
    parser.add_argument("--no-index", action="store_true",
                        help="query the indexes an earlier run left in --work as they are (faster reruns while "
                        "changing only the query side)")
    parser.add_argument("--only", default=None, help="comma-separated setup labels or prefixes")
    parser.add_argument("--dump", type=Path, default=None, help="write every report's ranks as JSON here")
    parser.add_argument("--limit", type=int, default=None, help="at most this many reports per set")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.store.index import open_index

    setups = SETUPS
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        setups = [s for s in SETUPS if any(s == w or s.startswith(w) for w in wanted)]
    if args.no_embed:
        setups = [s for s in setups if not (s.startswith("context") or s.endswith(("vector", "hybrid")))]
    items = load_sets(args.sets)
    if args.limit:
        seen: dict[str, int] = {}
        items = [i for i in items if seen.setdefault(i["repo"], 0) < args.limit and not seen.update(
            {i["repo"]: seen[i["repo"]] + 1})]
    per: dict[str, list[dict]] = {s: [] for s in setups}
    per_lang: dict[str, dict[str, list[dict]]] = {}
    dump = []
    model_slug = re.sub(r"\W+", "_", args.model or "default")
    started = time.perf_counter()
    index_s = query_s = 0.0
    for n, item in enumerate(items, 1):
        tree = worktree(item["repo"], item["parent"], args.mirror, args.work)
        overrides = {"home": str(args.work / "state" / model_slug / item["repo"].split("/")[1])}
        if args.model:
            overrides["embed_model"] = args.model
        settings = load_settings(tree, overrides)
        t0 = time.perf_counter()
        stats = None if args.no_index else run_index(tree, True, settings, embed=not args.no_embed)
        t1 = time.perf_counter()
        index_s += t1 - t0
        results: dict[str, dict] = {}
        if any(s.startswith("baseline") for s in setups):
            for label, files in cached_baselines(tree, item, args.work).items():
                if label in setups:
                    results[label] = score(files, None, item)
        index = open_index(tree, True, settings, read_only=True)
        try:
            for label, (files, symbols) in localidx_rankings(index, item["query"], setups, settings).items():
                results[label] = score(files, symbols, item)
        finally:
            index.close()
        query_s += time.perf_counter() - t1
        for label, r in results.items():
            per[label].append(r)
            per_lang.setdefault(item["language"], {}).setdefault(label, []).append(r)
        dump.append({"id": item["id"], "ranks": {k: v["rank"] for k, v in results.items()},
                     "f10": {k: v.get("f10") for k, v in results.items()}})
        ranks = " ".join(f"{k.split()[-1][:4]}={v['rank']}" for k, v in results.items())
        indexed = f"{stats.chunks_written} written, {stats.chunks_embedded} embedded" if stats else "not indexed"
        print(f"[{n}/{len(items)}] {item['id']}: {ranks}  (index {t1 - t0:.1f}s, {indexed})", file=sys.stderr,
              flush=True)
    print(f"\n## {len(items)} bug reports, {len({i['repo'] for i in items})} repositories, model "
          f"{args.model or 'default'}{' (no vectors)' if args.no_embed else ''}; index {index_s:.0f}s, "
          f"queries {query_s:.0f}s, total {time.perf_counter() - started:.0f}s\n")
    print("\n".join(table(per, setups)))
    for language, by_setup in sorted(per_lang.items()):
        print(f"\n### {language} ({len(next(iter(by_setup.values())))} reports)\n")
        print("\n".join(table(by_setup, setups)))
    if args.dump:
        args.dump.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
