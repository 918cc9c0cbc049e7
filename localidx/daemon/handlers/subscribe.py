"""``daemon/subscribe``: this connection receives ``index/progress`` notifications from now on.

The first one is the result itself (``status``); after it the daemon sends a notification whenever the writer's
phase or the index's state changes (at once) and while a run makes progress (at most every ``interval_ms``). They
are computed without walking the work tree or scanning the table, and they are not activity: a subscribed editor
does not keep the daemon from releasing its model or from idling out. A connection stays subscribed until it closes.
"""

from __future__ import annotations

from localidx.errors import UsageError
from localidx.protocol import DEFAULT_INTERVAL_MS


def handle(daemon, params: dict) -> dict:
    """``{"subscribed": true, "interval_ms": n, "status": {...}}``."""
    session = daemon.session()
    if session is None:
        raise UsageError("daemon/subscribe needs a connection to the daemon's socket")
    interval_ms = params.get("interval_ms", DEFAULT_INTERVAL_MS)
    session.interval_s = interval_ms / 1000
    return {"subscribed": True, "interval_ms": interval_ms, "status": daemon.light_status()}
