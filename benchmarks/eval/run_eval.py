"""Retrieval eval: index installed packages' source with the real model and print Recall@k / MRR per search setup.

Place in the flow: a benchmark over retrieve (``localidx.retrieve.evaluate``); it is how ``DEFAULT_FUSION`` and
``DEFAULT_VECTOR_WEIGHT`` in ``localidx/retrieve/search.py`` were chosen. It prints figures and asserts nothing.

For each query set ``benchmarks/eval/<package>.jsonl`` it copies the installed package's source into
``<work>/<package>/<package>/`` (a fresh git repository, so gold paths read ``click/core.py``), indexes it with the
configured embedding model (the real default unless ``--model``) into ``<work>/home``, rebuilt on every run (the
vector cache makes reruns cheap), then runs every setup over the questions.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py            # every query set here
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py click --per-query
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
SETUPS = [  # (label, mode, fusion, vector weight)
    ("bm25", "bm25", None, None),
    ("vector", "vector", None, None),
    ("linear w=0.1", "hybrid", "linear", 0.1),
    ("linear w=0.3", "hybrid", "linear", 0.3),
    ("linear w=0.4", "hybrid", "linear", 0.4),
    ("linear w=0.5", "hybrid", "linear", 0.5),
    ("linear w=0.6", "hybrid", "linear", 0.6),
    ("linear w=0.7", "hybrid", "linear", 0.7),
    ("linear w=0.9", "hybrid", "linear", 0.9),
    ("rrf", "hybrid", "rrf", None),
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
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from localidx.config import load_settings
    from localidx.enrich import META_VERSION
    from localidx.indexer import open_index, run_index
    from localidx.retrieve.evaluate import evaluate, load_queries

    packages = args.packages or sorted(p.stem for p in HERE.glob("*.jsonl"))
    args.work.mkdir(parents=True, exist_ok=True)
    totals: dict[str, list[dict]] = {label: [] for label, *_ in SETUPS}
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
        for label, mode, fusion, weight in SETUPS:
            report = evaluate(index, queries, mode=mode, fusion=fusion, vector_weight=weight, k=args.k)
            totals[label].append(report)
            print(f"| {label} | " + " | ".join(f"{report[m]:.3f}" for m in METRICS) + " |")
            if args.per_query:
                ranks = [r["rank"] for r in report["per_query"]]
                print(f"|   ranks | {json.dumps(ranks)} |")
        index.close()
    if len(packages) > 1:
        print(f"\n## all: {sum(r['queries'] for r in totals[SETUPS[0][0]])} queries (micro-average)\n")
        print("| setup | " + " | ".join(METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        for label, reports in totals.items():
            n = sum(r["queries"] for r in reports)
            cells = [sum(r[m] * r["queries"] for r in reports) / n for m in METRICS]
            print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
