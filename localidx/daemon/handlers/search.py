"""``search/query``: hybrid search, as ``localidx search --json``, on this connection's thread.

The search reads a pinned table version through a read-only Index of its own (its own sqlite connection) and the
daemon's shared, warm embedder, so it never waits for the writer and never sees a half-written file.
"""

from __future__ import annotations

from localidx.errors import UsageError


def handle(daemon, params: dict) -> dict:
    """``{"matches": [Match.to_dict(), ...], "warnings": [...]}``, best first (``retrieve.search.search_response``);
    an index of nothing answers no matches and says so (``status.explain_empty_search``)."""
    from localidx.index.status import explain_empty_search
    from localidx.retrieve.search import search_response

    kind = params.get("kind")
    if kind:
        from localidx.records import KINDS

        if kind not in KINDS:
            raise UsageError(f"unknown kind(s) {kind}; known: {', '.join(KINDS)}")
    pending = daemon.update_pending()  # asked before the read: a change seen now may be missing from it
    with daemon.reader() as index:
        response = explain_empty_search(index, lambda: search_response(
            index, params["query"], k=params.get("k", 10), mode=params.get("mode", "hybrid"),
            language=params.get("lang"), path_glob=params.get("path"), kind=kind,
            files=bool(params.get("files", False))))
    if pending:
        response["updatePending"] = True
        response.setdefault("warnings", []).append(UPDATE_PENDING)
    return response


UPDATE_PENDING = "an update of the index is pending: a change saved a moment ago may not be in these results yet"

