"""The routing table: protocol method name -> handler. One handler module per method, under ``handlers/``.

Every name here is a method in ``localidx.protocol.METHODS`` and every method there has a handler here (a test checks
both ways). A handler is ``handle(daemon, params) -> result``: ``params`` are already checked against the method's
schema; it raises ``ProtocolError`` or a ``LocalidxError`` to answer with an error, and may return a
``concurrent.futures.Future`` of its result to answer later without holding a request thread.
"""

from __future__ import annotations

from localidx.daemon.handlers import chunks, context, hello, reindex, search, status, stop, subscribe

ROUTES = {
    "daemon/hello": hello.handle,
    "daemon/stop": stop.handle,
    "daemon/subscribe": subscribe.handle,
    "index/status": status.handle,
    "index/reindex": reindex.handle,
    "search/query": search.handle,
    "context/build": context.handle,
    "chunks/show": chunks.handle,
}
