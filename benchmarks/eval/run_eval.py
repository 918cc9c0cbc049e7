"""Retrieval eval: index installed packages' source with the real model and print Recall@k / MRR per search setup.

Place in the flow: a benchmark over retrieve (``localidx.retrieve.evaluate``); it is how ``DEFAULT_FUSION`` and
``DEFAULT_VECTOR_WEIGHT`` in ``localidx/retrieve/search.py`` were chosen, and how the context pipeline's profiles
(``profile ...`` setups: files ranked by their order in the pack) are compared with plain search. It prints figures
and asserts nothing. jsonschema ships its test suite inside the package, so its questions also show what the
rerank's test-code rule does.

For each query set ``benchmarks/eval/<package>.jsonl`` it copies the installed package's source into
``<work>/<package>/<package>/`` (a fresh git repository, so gold paths read ``click/core.py``), indexes it with the
configured embedding model (the real default unless ``--model``) into ``<work>/home``, rebuilt on every run (the
vector cache makes reruns cheap), then runs every setup over the questions.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py            # every query set here
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py click --per-query
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py --only "linear w=0.5,profile"
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUPS = [  # (label, mode, fusion, vector weight, context profile)
    ("bm25", "bm25", None, None, None),
    ("vector", "vector", None, None, None),
    ("linear w=0.1", "hybrid", "linear", 0.1, None),
    ("linear w=0.3", "hybrid", "linear", 0.3, None),
    ("linear w=0.4", "hybrid", "linear", 0.4, None),
    ("linear w=0.5", "hybrid", "linear", 0.5, None),
    ("linear w=0.6", "hybrid", "linear", 0.6, None),
    ("linear w=0.7", "hybrid", "linear", 0.7, None),
    ("linear w=0.9", "hybrid", "linear", 0.9, None),
    ("rrf", "hybrid", "rrf", None, None),
    # The context pipeline: files ranked by their order in the final pack (localidx.retrieve.context).
    ("profile legacy", "hybrid", None, None, "legacy"),
    ("profile conservative", "hybrid", None, None, "conservative"),
    ("profile balanced", "hybrid", None, None, "balanced"),
    ("profile aggressive", "hybrid", None, None, "aggressive"),
]
METRICS = ("recall@1", "recall@5", "recall@10", "gold_recall@5", "mrr")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=eval", "-c", "user.email=eval@localidx.invalid",
                    "-c", "init.defaultBranch=main", *args], cwd=cwd, check=True, capture_output=True)


def prepare_repo(package: str, work: Path) -> Path:
    """A git repository holding a copy of the installed package's source (without bytecode)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {package!r} is not installed in this environment")
    source = Path(list(spec.submodule_search_locations)[0])
    root = work / package
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", f"{package} source")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="*", help="query sets to run (default: every <name>.jsonl here)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "localidx-eval",
                        help="where the repository copies and the index live (kept for faster reruns)")
    parser.add_argument("--model", default=None, help="embedding model (default: the configured default)")
    parser.add_argument("--k", type=int, default=10, help="files ranked per query")
    parser.add_argument("--per-query", action="store_true", help="also print each query's first gold rank")
    parser.add_argument("--only", default=None,
                        help="comma-separated setup labels or prefixes to run (e.g. 'linear w=0.5,profile')")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from localidx.config import load_settings
    from localidx.enrich import META_VERSION
    from localidx.indexer import run_index
    from localidx.store.index import open_index
    from localidx.retrieve.evaluate import evaluate, load_queries

    packages = args.packages or sorted(p.stem for p in HERE.glob("*.jsonl"))
    setups = SETUPS
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        setups = [s for s in SETUPS if any(s[0] == w or s[0].startswith(w) for w in wanted)]
    args.work.mkdir(parents=True, exist_ok=True)
    totals: dict[str, list[dict]] = {label: [] for label, *_ in setups}
    for package in packages:
        queries = load_queries(HERE / f"{package}.jsonl")
        root = prepare_repo(package, args.work)
        overrides = {"home": str(args.work / "home")}
        if args.model:
            overrides["embed_model"] = args.model
        settings = load_settings(root, overrides)
        started = time.perf_counter()
        # rebuild: re-chunk every file, so the table reflects today's chunker and [META] even when META_VERSION
        # did not change; the vector cache still spares re-embedding any text seen before.
        stats = run_index(root, True, settings, rebuild=True)
        index = open_index(root, True, settings, read_only=True)
        rows = index.store.snapshot().count_rows()
        print(f"\n## {package}: {len(queries)} queries, {stats.files_processed + stats.files_unchanged} files, "
              f"{rows} chunks, model {stats.model}, META_VERSION {META_VERSION}, "
              f"indexed in {time.perf_counter() - started:.0f}s ({stats.chunks_embedded} embedded)\n")
        print("| setup | " + " | ".join(METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        for label, mode, fusion, weight, profile in setups:
            report = evaluate(index, queries, mode=mode, fusion=fusion, vector_weight=weight, k=args.k,
                              profile=profile)
            totals[label].append(report)
            print(f"| {label} | " + " | ".join(f"{report[m]:.3f}" for m in METRICS) + " |")
            if profile:
                print(f"|   pack | {json.dumps(report['pack'])} |")
            if args.per_query:
                ranks = [r["rank"] for r in report["per_query"]]
                print(f"|   ranks | {json.dumps(ranks)} |")
        index.close()
    if len(packages) > 1:
        print(f"\n## all: {sum(r['queries'] for r in totals[setups[0][0]])} queries (micro-average)\n")
        print("| setup | " + " | ".join(METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        for label, reports in totals.items():
            n = sum(r["queries"] for r in reports)
            cells = [sum(r[m] * r["queries"] for r in reports) / n for m in METRICS]
            print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
