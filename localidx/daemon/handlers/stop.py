"""``daemon/stop``: answer, then shut down.

The status file and the socket path are removed before the answer goes out (dmypy removes its status file the same
way): a client that starts a new daemon on receiving it must not have the new daemon's files removed by this one.
"""

from __future__ import annotations


def handle(daemon, params: dict) -> dict:
    """Release the daemon's files and begin shutdown; the answer is sent before connections close."""
    daemon.release_files()
    daemon.request_stop("daemon/stop")
    return {"stopping": True, "pid": daemon.pid}
