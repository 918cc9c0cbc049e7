"""Evaluate: file-level retrieval quality of ``search`` over a set of questions with known answers.

Part of retrieve; used by ``benchmarks/eval/run_eval.py`` to choose the fusion defaults, and by tests. Read-only.

A query set is JSONL, one ``{"query": str, "gold": [repository-relative paths]}`` per line (blank lines allowed).
Scoring is per file, because a question is answered when the right file is found, whichever chunk of it ranks:
files are ranked by their first appearance in the match list (later chunks of a ranked file are skipped).

- ``recall@n``      : fraction of queries with at least one gold file among the top n files.
- ``gold_recall@5`` : mean fraction of a query's gold files among its top 5 files.
- ``mrr``           : mean of 1 / rank of the first gold file (0 when none is in the top ``k`` files).

With a ``profile``, each question runs the whole context pipeline (``localidx.retrieve.context``) instead of plain
search, and files are ranked by their order in the final pack; ``pack`` then sums up the packs: mean matches and
tokens, and the auto-merge windows and tokens before and after merging.
"""

from __future__ import annotations

import json
from pathlib import Path

from localidx.errors import UsageError
from localidx.retrieve.search import MAX_K, search

CUTOFFS = (1, 5, 10)


def load_queries(path: Path) -> list[dict]:
    """Read a JSONL query set; a malformed line raises ``UsageError`` naming the file and line number."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    queries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        query = record.get("query") if isinstance(record, dict) else None
        gold = record.get("gold") if isinstance(record, dict) else None
        if not isinstance(query, str) or not query.strip():
            raise UsageError(f"{path}:{number}: \"query\" must be a non-empty string")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g for g in gold):
            raise UsageError(f"{path}:{number}: \"gold\" must be a non-empty list of paths")
        queries.append({"query": query, "gold": gold})
    return queries


def ranked_files(paths: list[str]) -> list[str]:
    """Paths in order of first appearance, each once."""
    return list(dict.fromkeys(paths))


def score_query(files: list[str], gold: list[str], k: int = 10) -> dict:
    """The per-query figures for a ranked file list (only its first ``k`` files count)."""
    files = files[:k]
    gold_set = set(gold)
    rank = next((i for i, f in enumerate(files, start=1) if f in gold_set), None)
    record = {f"hit@{n}": rank is not None and rank <= n for n in CUTOFFS}
    record["gold_found@5"] = len(gold_set & set(files[:5])) / len(gold_set)
    record["rank"] = rank
    record["rr"] = 1.0 / rank if rank else 0.0
    return record


def evaluate(index, queries: list[dict], mode: str = "hybrid", fusion: str | None = None,
             vector_weight: float | None = None, k: int = 10, profile: str | None = None) -> dict:
    """Run every query through ``search`` and report file-level Recall@1/5/10, ``gold_recall@5`` and MRR.

    ``k`` is the number of files ranked per query; enough chunks are fetched (5 per file, at most 100) that chunks of
    the same file rarely leave fewer than ``k`` distinct files.
    """
    per_query = []
    packs = []
    for q in queries:
        if profile:
            from localidx.retrieve.context import build_for_repository

            pack = build_for_repository(index, q["query"], profile=profile)
            paths = [m["path"] for m in pack["matches"]]
            packs.append(pack["stats"])
        else:
            paths = [m.path for m in search(index, q["query"], k=min(MAX_K, 5 * k), mode=mode, fusion=fusion,
                                            vector_weight=vector_weight)]
        files = ranked_files(paths)[:k]
        per_query.append({"query": q["query"], "gold": q["gold"], "files": files,
                          **score_query(files, q["gold"], k)})
    n = len(per_query)

    def mean(key: str) -> float:
        return round(sum(float(r[key]) for r in per_query) / n, 4) if n else 0.0

    report = {"queries": n}
    for cutoff in CUTOFFS:
        report[f"recall@{cutoff}"] = mean(f"hit@{cutoff}")
    report["gold_recall@5"] = mean("gold_found@5")
    report["mrr"] = mean("rr")
    if profile:
        report["profile"] = profile
        report["pack"] = _pack_figures(packs)
    report["per_query"] = per_query
    return report


def _pack_figures(stats: list[dict]) -> dict:
    """Means over the packs, and auto-merge's totals: windows and tokens before and after merging."""
    n = len(stats) or 1

    def total(key: str) -> int:
        return sum(int(s.get(key, 0) or 0) for s in stats)

    return {
        "mean_matches": round(total("matches") / n, 2),
        "mean_tokens": round(total("tokens") / n, 1),
        "mean_ms": round(sum(float(s.get("totalMs", 0)) for s in stats) / n, 1),
        "merge_windows_before": total("windowsBefore"),
        "merge_windows_after": total("windowsAfter"),
        "merge_tokens_before": total("tokensBefore"),
        "merge_tokens_after": total("tokensAfter"),
    }
