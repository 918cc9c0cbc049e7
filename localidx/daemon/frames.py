"""What the daemon sends, and to how many: a response as one frame within its connection's limit, a failure as the
protocol error it is answered with, and the connection cap the process's file descriptors leave room for.

Place in the flow: serve, under ``server.py`` (the event loop), which calls these for every connection and every
answer. Pure functions over ``localidx.protocol``; nothing here reads a socket.
"""

from __future__ import annotations

import logging
import resource

from localidx import protocol
from localidx.config import Settings
from localidx.errors import LocalidxError, UsageError
from localidx.protocol import (INDEX_NOT_READY, INTERNAL_ERROR, MAX_FRAME_BYTES, PARSE_ERROR, RESPONSE_TOO_LARGE,
                               USAGE_ERROR, ProtocolError)

log = logging.getLogger(__name__)

FD_RESERVE = 256  # file descriptors kept for LanceDB, SQLite, the watcher and the log, below the connection cap


def max_connections(settings: Settings) -> int:
    """``daemon_max_connections``, lowered to what the process's file-descriptor limit leaves room for (the soft
    limit is raised to the hard one first, up to 65536)."""
    wanted = int(settings.daemon_max_connections)
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = min(hard if hard != resource.RLIM_INFINITY else 65536, 65536)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    except (ValueError, OSError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FD_RESERVE))


def oversize() -> dict:
    """The answer to a request frame over ``MAX_FRAME_BYTES``."""
    return protocol.error(None, ProtocolError(PARSE_ERROR, f"frame over {MAX_FRAME_BYTES} bytes"))


def encode_frame(response: dict, limit: int) -> bytes:
    """One response frame, within the connection's limit: a larger one becomes RESPONSE_TOO_LARGE."""
    try:
        data = protocol.encode(response)
    except (TypeError, ValueError) as exc:
        log.exception("cannot encode a response")
        return protocol.encode(protocol.error(response.get("id"), ProtocolError(INTERNAL_ERROR, one_line(exc))))
    if len(data) > limit:
        message = (f"the response is {len(data)} bytes, over this connection's {limit}-byte frame limit: "
                   f"ask for more with max_frame_bytes in daemon/hello")
        data = protocol.encode(protocol.error(response.get("id"), ProtocolError(
            RESPONSE_TOO_LARGE, message, {"bytes": len(data), "max_frame_bytes": limit})))
    return data


def one_line(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def as_protocol_error(exc: Exception, method: str) -> ProtocolError:
    """A handler's failure as the error its response carries; a bug is logged with its traceback."""
    from localidx.errors import IndexNotReady

    if isinstance(exc, IndexNotReady):
        return ProtocolError(INDEX_NOT_READY, str(exc))
    if isinstance(exc, UsageError):
        return ProtocolError(USAGE_ERROR, str(exc))
    if isinstance(exc, LocalidxError):
        log.warning("%s failed: %s", method, exc)
        return ProtocolError(INTERNAL_ERROR, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    log.exception("%s failed", method)
    return ProtocolError(INTERNAL_ERROR, one_line(exc))
