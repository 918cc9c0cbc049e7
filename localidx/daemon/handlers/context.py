"""``context/build``: the retrieval pipeline's context pack, as ``localidx context --json``.

Runs on the connection's thread over a read-only Index of its own and the daemon's warm embedder, like
``search/query``; every query of one pack reads one pinned table version.
"""

from __future__ import annotations


def handle(daemon, params: dict) -> dict:
    """The pipeline's response dict (``localidx.retrieve.context.RESPONSE_KEYS``); an index of nothing says so
    (``status.explain_empty_pack``)."""
    from localidx.index.status import explain_empty_pack
    from localidx.retrieve.context import build_for_repository

    with daemon.reader() as index:
        return explain_empty_pack(index, build_for_repository(
            index, params["query"], profile=params.get("profile"), max_tokens=params.get("max_tokens"),
            top_k=params.get("top_k"), conversation_context=params.get("conversation_context"),
            locale=params.get("locale"), language=params.get("lang"), path_glob=params.get("path"),
            kind=params.get("kind"), settings=daemon.settings))
