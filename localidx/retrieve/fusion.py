"""Fusion: two ranked arms (vector, BM25) -> one score per chunk id. Pure functions, no I/O.

Part of retrieve. LanceDB's own hybrid rerankers are not used: ``LinearCombinationReranker`` drops rows that only
the text arm found (measured, see the research notes), so the arms are queried separately and fused here.

Invariants:
- Both arms are keyed by the chunk ``id`` (the table's primary key); fusing on anything else silently loses an arm.
- ``normalize`` maps an arm's raw scores (higher = better) to [0, 1] by min-max within that arm's list; a list whose
  scores are all equal (a single hit included) maps to 1.0.
- A chunk missing from an arm contributes 0 to ``linear`` and nothing to ``rrf``.
"""

from __future__ import annotations

RRF_K = 60  # the constant from Cormack et al.; dampens the head of each list


def normalize(scores: dict[str, float]) -> dict[str, float]:
    """Min-max normalise raw arm scores (higher is better) to [0, 1]."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high - low <= 1e-12:
        return {key: 1.0 for key in scores}
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def linear(vector: dict[str, float], bm25: dict[str, float], vector_weight: float) -> dict[str, float]:
    """``w * vector + (1 - w) * bm25`` over the union of ids, with normalised arm scores; a missing arm counts 0."""
    return {
        key: vector_weight * vector.get(key, 0.0) + (1.0 - vector_weight) * bm25.get(key, 0.0)
        for key in vector.keys() | bm25.keys()
    }


def rrf(*ranked: list[str], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: for each list an id is in, add ``1 / (k + rank)`` (rank from 1)."""
    fused: dict[str, float] = {}
    for ids in ranked:
        for rank, key in enumerate(ids, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused

