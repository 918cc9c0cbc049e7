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
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py click --model static-minilm --json out.json
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py --set bugreports/NAME.jsonl=/path/to/clone

Extra sets (``--set JSONL=REPO``, repeatable; JSONL relative to this directory or absolute): each line has ``query``
and ``gold`` or ``gold_files`` (repository-relative paths); REPO is a git repository on this machine. A line with a
``parent`` commit is asked at that commit, others at REPO's HEAD: each commit is exported once (``git archive``) into
``<work>/<set>/<commit>`` and indexed there, so the bug-report sets (one parent per report) run as they are.
``--vector-skip-kinds summary,config`` answers the vector arm as if chunks of those kinds had no vector (BM25 still
sees them): how the eval decides which kinds are worth embedding. ``--json PATH`` writes every figure.
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


def prepare_commit(repo: Path, commit: str, root: Path) -> Path:
    """A fresh git repository at ``root`` holding ``repo``'s tree at ``commit`` (kept when it is already there)."""
    if (root / ".git").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", f"{commit} tree")
    return root


def load_set(path: Path) -> list[dict]:
    """Query records of a set file: ``query``, ``gold`` (or ``gold_files``), optional ``parent`` and ``id``."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        gold = record.get("gold") or record.get("gold_files")
        if not isinstance(record.get("query"), str) or not gold:
            raise SystemExit(f"{path}:{number}: needs \"query\" and \"gold\" (or \"gold_files\")")
        records.append({"query": record["query"], "gold": list(gold), "parent": record.get("parent"),
                        "id": record.get("id")})
    return records


def skip_vector_kinds(kinds: list[str]) -> None:
    """Make the vector arm behave as if chunks of ``kinds`` had no vector (patched for this process)."""
    import importlib

    from localidx.store.lance import sql_str

    search_module = importlib.import_module("localidx.retrieve.search")  # the package re-exports search()

    original = search_module.vector_arm  # the name the search module calls
    clause = f"kind NOT IN ({', '.join(sql_str(k) for k in kinds)})"

    def arm(table, vector, where, fetch):
        return original(table, vector, f"({where}) AND {clause}" if where else clause, fetch)

    search_module.vector_arm = arm


def _targets(args) -> list[tuple[str, list[tuple[Path, list[dict]]]]]:
    """(set name, [(repository root to index, its queries)]) for every set asked for."""
    from localidx.retrieve.evaluate import load_queries

    targets = []
    packages = args.packages or ([] if args.set else sorted(p.stem for p in HERE.glob("*.jsonl")))
    for package in packages:
        targets.append((package, [(prepare_repo(package, args.work), load_queries(HERE / f"{package}.jsonl"))]))
    for spec in args.set:
        jsonl, _, repo = spec.partition("=")
        path = Path(jsonl) if Path(jsonl).is_absolute() else HERE / jsonl
        name = path.stem
        records = load_set(path)
        if not repo:
            raise SystemExit(f"--set {spec}: name the git repository its questions are about (JSONL=REPO)")
        by_commit: dict[str, list[dict]] = {}
        for record in records:
            by_commit.setdefault(record["parent"] or "HEAD", []).append(record)
        roots = []
        for commit, queries in by_commit.items():
            sha = subprocess.run(["git", "-C", repo, "rev-parse", commit], check=True, capture_output=True,
                                 text=True).stdout.strip()
            roots.append((prepare_commit(Path(repo), sha, args.work / name / sha[:12]), queries))
        targets.append((name, roots))
    return targets


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
    parser.add_argument("--set", action="append", default=[], metavar="JSONL=REPO",
                        help="an extra query set about a git repository on this machine (repeatable)")
    parser.add_argument("--vector-skip-kinds", default="",
                        help="comma-separated chunk kinds the vector arm ignores (as if never embedded)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from localidx.chunk.enrich import META_VERSION
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.retrieve.evaluate import evaluate
    from localidx.store.index import open_index

    setups = SETUPS
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        setups = [s for s in SETUPS if any(s[0] == w or s[0].startswith(w) for w in wanted)]
    if args.vector_skip_kinds:
        skip_vector_kinds([k.strip() for k in args.vector_skip_kinds.split(",") if k.strip()])
    args.work.mkdir(parents=True, exist_ok=True)
    totals: dict[str, list[dict]] = {label: [] for label, *_ in setups}
    figures: dict = {"model": None, "sets": {}}
    targets = _targets(args)
    for name, roots in targets:
        reports: dict[str, list[dict]] = {label: [] for label, *_ in setups}
        chunks = embedded = 0
        started = time.perf_counter()
        for root, queries in roots:
            overrides = {"home": str(args.work / "home")}
            if args.model:
                overrides["embed_model"] = args.model
            settings = load_settings(root, overrides)
            # rebuild: re-chunk every file, so the table reflects today's chunker and [META] even when META_VERSION
            # did not change; the vector cache still spares re-embedding any text seen before.
            stats = run_index(root, True, settings, rebuild=True)
            index = open_index(root, True, settings, read_only=True)
            chunks += index.store.snapshot().count_rows()
            embedded += stats.chunks_embedded
            figures["model"] = stats.model
            for label, mode, fusion, weight, profile in setups:
                reports[label].append(evaluate(index, [{"query": q["query"], "gold": q["gold"]} for q in queries],
                                               mode=mode, fusion=fusion, vector_weight=weight, k=args.k,
                                               profile=profile))
            index.close()
        queries_n = sum(len(q) for _, q in roots)
        print(f"\n## {name}: {queries_n} queries, {len(roots)} snapshot(s), {chunks} chunks, model {figures['model']}, "
              f"META_VERSION {META_VERSION}, indexed in {time.perf_counter() - started:.0f}s ({embedded} embedded)\n")
        print("| setup | " + " | ".join(METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        figures["sets"][name] = {"queries": queries_n, "chunks": chunks, "setups": {}}
        for label, mode, fusion, weight, profile in setups:
            report = _merge(reports[label])
            totals[label].append(report)
            figures["sets"][name]["setups"][label] = {m: report[m] for m in METRICS}
            print(f"| {label} | " + " | ".join(f"{report[m]:.3f}" for m in METRICS) + " |")
            if profile:
                print(f"|   pack | {json.dumps(report['pack'])} |")
            if args.per_query:
                ranks = [r["rank"] for r in report["per_query"]]
                print(f"|   ranks | {json.dumps(ranks)} |")
    packages = [name for name, _ in targets]
    if len(packages) > 1:
        print(f"\n## all: {sum(r['queries'] for r in totals[setups[0][0]])} queries (micro-average)\n")
        print("| setup | " + " | ".join(METRICS) + " |")
        print("|---" * (len(METRICS) + 1) + "|")
        for label, reports in totals.items():
            n = sum(r["queries"] for r in reports)
            cells = [sum(r[m] * r["queries"] for r in reports) / n for m in METRICS]
            print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


def _merge(reports: list[dict]) -> dict:
    """One report from the reports of a set's snapshots (query-weighted means; per-query lists joined)."""
    if len(reports) == 1:
        return reports[0]
    n = sum(r["queries"] for r in reports)
    merged = {m: sum(r[m] * r["queries"] for r in reports) / n for m in METRICS}
    merged["queries"] = n
    merged["per_query"] = [q for r in reports for q in r.get("per_query", [])]
    merged["pack"] = reports[0].get("pack")
    return merged


if __name__ == "__main__":
    sys.exit(main())
