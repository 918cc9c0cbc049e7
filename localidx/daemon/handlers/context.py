"""``context/build``: the retrieval pipeline's context pack, as ``localidx context --json``.

Runs on the connection's thread over a read-only Index of its own and the daemon's warm embedder, like
``search/query``; every query of one pack reads one pinned table version.
"""

from __future__ import annotations


def handle(daemon, params: dict) -> dict:
    """The pipeline's response dict (``localidx.retrieve.context.RESPONSE_KEYS``)."""
    from localidx.daemon.handlers.search import vector_text
    from localidx.retrieve.context import build_for_repository

    # The pipeline's first search is the question itself, in hybrid mode: embed it while the BM25 arm runs. (A
    # question the pipeline rewrites first, from conversation turns, is embedded as rewritten instead.)
    with daemon.reader(query=vector_text(" ".join(params["query"].split()))) as index:
        return build_for_repository(
            index, params["query"], profile=params.get("profile"), max_tokens=params.get("max_tokens"),
            top_k=params.get("top_k"), conversation_context=params.get("conversation_context"),
            locale=params.get("locale"), language=params.get("lang"), path_glob=params.get("path"),
            kind=params.get("kind"), settings=daemon.settings)
