"""Retrieve: a query against the index -> ranked chunk matches.

This is the read side of the flow (store -> retrieve -> rerank / expand / merge -> serve). Nothing here writes: a
search reads one pinned table version (``ChunkStore.snapshot()``), so a concurrent indexing run never shows it a
file half old and half new.

- ``search``   : the hybrid query (BM25 arm + vector arm, fused in Python), filters, the ``stale`` flag.
- ``fusion``   : the pure scoring functions (normalisation, linear, RRF).
- ``evaluate`` : file-level Recall@k / MRR over a JSONL query set, which is how the fusion defaults were chosen.

The context pipeline: ``context`` (the stages in order, the response), ``profiles``, ``guard``, ``transforms``,
``rerank``, ``expand``, ``merge``; ``filters`` (filters, stale, the files view), ``across`` (``--all-repos``),
``shared_index`` (a laptop's read-only view of an organisation's shared index) and ``ask`` (a pack sized to the
model's window, the streamed answer, its citations checked).

Layer: above ``cluster``, ``index`` (the registry), ``store``, ``chunk`` (the [META] words), ``embed`` and the shared
services (``llm`` for the query transforms and ``ask``); below ``daemon`` and ``interface``.
"""

from __future__ import annotations

from localidx.errors import IndexNotReady
from localidx.retrieve.search import FUSIONS, MODES, Match, search

__all__ = ["FUSIONS", "IndexNotReady", "MODES", "Match", "search"]
