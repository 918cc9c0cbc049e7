"""``search/query``: hybrid search, as ``localidx search --json``, on this connection's thread.

The search reads a pinned table version through a read-only Index of its own (its own sqlite connection) and the
daemon's shared, warm embedder, so it never waits for the writer and never sees a half-written file. In hybrid mode
the query is embedded on another thread while the BM25 arm runs (``daemon.model.Prepared``).
"""

from __future__ import annotations

from localidx.errors import UsageError


def handle(daemon, params: dict) -> dict:
    """``{"matches": [Match.to_dict(), ...], "warnings": [...]}``, best first (``retrieve.search.search_response``)."""
    from localidx.retrieve.search import search_response

    kind = params.get("kind")
    if kind:
        from localidx.records import KINDS

        if kind not in KINDS:
            raise UsageError(f"unknown kind(s) {kind}; known: {', '.join(KINDS)}")
    mode = params.get("mode", "hybrid")
    # Hybrid: the query is embedded on another thread while this one runs the BM25 arm.
    ahead = vector_text(params["query"]) if mode == "hybrid" and isinstance(params["query"], str) else None
    with daemon.reader(query=ahead) as index:
        return search_response(index, params["query"], k=params.get("k", 10), mode=mode,
                               language=params.get("lang"), path_glob=params.get("path"), kind=kind,
                               files=bool(params.get("files", False)))


def vector_text(query: str) -> str | None:
    """What ``search`` will embed for ``query`` (its query plan's vector text, of the query as cut to the limit), to
    embed it ahead; None when the query has no words (search refuses it)."""
    from localidx.retrieve.guard import has_words, limit_query
    from localidx.retrieve.search import plan_query

    query = limit_query(query)[0]
    return plan_query(query).vector_text if has_words(query) else None
