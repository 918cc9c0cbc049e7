"""The socket protocol between the daemon and its clients (the CLI, git hooks, the MCP server, the VS Code bridge).

One module owns it: the version, the method names, the parameter schemas, the error codes and the framing.

Framing: newline-delimited JSON. Each frame is one compact JSON object on one line (UTF-8, at most
``MAX_FRAME_BYTES`` including the newline), so ``socat - UNIX-CONNECT:$(localidx daemon status --json | jq -r
.socket)`` can debug it. Every request gets exactly one response on the same connection, in order.

    request   {"id": 1, "method": "search/query", "params": {"query": "verify token", "k": 5}}
    result    {"id": 1, "result": {...}}
    error     {"id": 1, "error": {"code": -32602, "message": "params.k: must be at least 1", "data": {...}}}

JSON-RPC-shaped (no "jsonrpc" member). ``id`` is an integer or a string chosen by the client; a frame that cannot be
read gets an error with ``"id": null``. Errors travel as data: a bad frame never drops the connection or the daemon.

Methods are named ``namespace/verb``, the same verbs as the CLI (``status`` -> ``index/status``). ``daemon/hello``
comes first: it exchanges protocol and package versions; a mismatch means "restart me" and the client restarts the
daemon once and retries. The hello also sets the connection's response frame limit (``max_frame_bytes``): a client
that reads larger frames says so, and then no response is too large for it; without it the limit is
``MAX_FRAME_BYTES`` and a larger response is answered with ``RESPONSE_TOO_LARGE`` (never dropped, never an internal
error). Requests are always limited to ``MAX_FRAME_BYTES``.

Notifications: after ``daemon/subscribe`` the daemon also sends frames without an ``id`` on that connection,
``{"method": "index/progress", "params": {...}}`` (``NOTIFICATIONS``), between its responses. Every other frame it
sends is a response. This module imports nothing heavy: git hooks load it on every commit.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 2  # 2: daemon/subscribe and its notifications, max_frame_bytes in the hello
MAX_FRAME_BYTES = 1024 * 1024  # every request; responses too, unless the hello raised the connection's limit
MAX_NEGOTIATED_FRAME_BYTES = 1 << 30  # the most a hello may ask for (1 GiB): what localidx's own clients ask for
DEFAULT_INTERVAL_MS = 500  # daemon/subscribe: the least time between two progress notifications
# The longest query or question (and conversation turn) the retrieval reads, on every path: longer text is cut to
# this many characters with a warning (``localidx.retrieve.guard.limit_query``), never refused, so a request gives
# the same answer in-process and through the daemon. 32 KiB holds a bug report with its traceback and log (typical
# reports are 1,500-3,000 characters); the embedding model reads only the first 256 word pieces anyway.
MAX_QUERY_CHARS = 32 * 1024

# Error codes: the JSON-RPC ones, then localidx's own.
PARSE_ERROR = -32700  # not JSON, not UTF-8, or over the size limit
INVALID_REQUEST = -32600  # JSON, but not a request object
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
INDEX_NOT_READY = 1001  # nothing indexed yet
USAGE_ERROR = 1002  # well-formed, but the request cannot be served as asked (an empty query, an unknown kind)
VERSION_MISMATCH = 1003  # hello found another protocol or package version: restart the daemon
SHUTTING_DOWN = 1004
OVERLOADED = 1005  # the daemon holds as many connections as it serves: try again later (``id`` is null)
RESPONSE_TOO_LARGE = 1006  # the response is over this connection's frame limit: raise it in daemon/hello

ERROR_NAMES = {
    PARSE_ERROR: "parse error", INVALID_REQUEST: "invalid request", METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params", INTERNAL_ERROR: "internal error", INDEX_NOT_READY: "index not ready",
    USAGE_ERROR: "usage error", VERSION_MISMATCH: "version mismatch", SHUTTING_DOWN: "shutting down",
    OVERLOADED: "overloaded", RESPONSE_TOO_LARGE: "response too large",
}

_STR = {"type": "string"}
_FILTERS = {
    "lang": {"type": "string", "maxLength": 64},
    "path": {"type": "string", "maxLength": 1024},
    "kind": {"type": "string", "maxLength": 32},
}

# Parameter schemas (a JSON Schema subset: type, properties, required, additionalProperties, enum, minimum,
# maximum, minLength, maxLength, items, maxItems) and result descriptions, per method.
METHODS: dict[str, dict[str, Any]] = {
    "daemon/hello": {
        "summary": "Exchange versions and capabilities; the first request on a connection.",
        "params": {
            "type": "object",
            "properties": {
                "protocol_version": {"type": "integer", "minimum": 1},
                "package_version": _STR,
                "client": {"type": "string", "maxLength": 128},
                # The largest frame the client reads: this connection's responses may be that large.
                "max_frame_bytes": {"type": "integer", "minimum": 1024, "maximum": MAX_NEGOTIATED_FRAME_BYTES},
                # The client's settings digest: a daemon started with other settings answers VERSION_MISMATCH.
                "settings_fingerprint": {"type": "string", "maxLength": 64},
            },
            "required": ["protocol_version"],
            "additionalProperties": False,
        },
        "result": "{protocol_version, package_version, pid, root, index, capabilities: [method names], "
                  "max_frame_bytes (this connection's response limit), max_request_bytes, daemon: {...}}",
    },
    "daemon/subscribe": {
        "summary": "Receive index/progress notifications on this connection: now, on every change of the index's "
                   "state or the writer's phase, and at most every interval_ms while a run makes progress.",
        "params": {"type": "object",
                   "properties": {"interval_ms": {"type": "integer", "minimum": 50, "maximum": 60000}},
                   "additionalProperties": False},
        "result": "{subscribed: true, interval_ms, status: (as the index/progress notification's params)}",
    },
    "daemon/stop": {
        "summary": "Stop the daemon after answering.",
        "params": {"type": "object", "properties": {}, "additionalProperties": False},
        "result": "{stopping: true}",
    },
    "index/status": {
        "summary": "What `localidx status --json` reports, plus the daemon's queue and embedding progress.",
        "params": {"type": "object", "properties": {"check_work_tree": {"type": "boolean"}},
                   "additionalProperties": False},
        "result": "{state: READY|STALE|EMPTY|INDEXING, files, chunks, chunks_with_vectors, ..., daemon: {...}}",
    },
    "index/reindex": {
        "summary": "Queue changed paths (or everything) for the single writer; returns at once unless wait is true.",
        "params": {
            "type": "object",
            "properties": {
                "paths": {"type": "array", "items": {"type": "string", "maxLength": 4096}, "maxItems": 100000},
                "reason": {"type": "string", "maxLength": 64},
                "wait": {"type": "boolean"},
                "rebuild": {"type": "boolean"},  # build the whole index again beside the current one (`--rebuild`)
            },
            "additionalProperties": False,
        },
        "result": "{queued: n} or, with wait, the run's record (as `localidx index --json`)",
    },
    "search/query": {
        "summary": "Hybrid search, as `localidx search --json`.",
        "params": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},  # over MAX_QUERY_CHARS: cut, with a warning
                "k": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"type": "string", "enum": ["hybrid", "vector", "bm25"]},
                "files": {"type": "boolean"},  # also rank the k best files (`localidx search --files`)
                **_FILTERS,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "result": "{matches: [{path, start_line, end_line, symbol, kind, language, score, vector_score, bm25_score, "
                  "stale, text, ...}], warnings: [text], files (when asked): [{path, score, matches, start_line, "
                  "end_line, symbol}], updatePending?, noResultsReason? (NOTHING_TO_INDEX: indexed, and nothing "
                  "was there to index; its warning gives the counts)}",
    },
    "context/build": {
        "summary": "The retrieval pipeline's context pack, as `localidx context --json` (docs/protocol.md lists the "
                   "response fields).",
        "params": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},  # over MAX_QUERY_CHARS: cut, with a warning
                "profile": {"type": "string", "minLength": 1, "maxLength": 64},
                # Raw limits (the CLI's --max-tokens/--top-k); the pipeline's guard clamps them and says so in
                # warnings. The MCP server never sends them: tools choose profiles.
                "max_tokens": {"type": "integer"},
                "top_k": {"type": "integer"},
                "conversation_context": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
                "locale": {"type": "string", "maxLength": 35},
                **_FILTERS,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "result": "{matches: [{id, path, start_line, end_line, symbol, kind, language, score, stale, text, uses, "
                  "used_by, span_hash, neighborOfSpanHash?, generatedBySubQuery?, auto_merged?, merged_chunk_ids?, "
                  "merged_chunk_count?, chunk_span?, content_length?}], rerankApplied, augmentedPrompt, "
                  "instructions, contextMissing, noResults, noResultsReason, appliedModules, warnings, profile, "
                  "query, subQueries, stats}",
    },
    "chunks/show": {
        "summary": "How files of the work tree are chunked, as `localidx chunks --json`; nothing is written.",
        "params": {
            "type": "object",
            "properties": {
                # Relative to the work tree's root, forward slashes; a path outside it is a usage error.
                "paths": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096},
                          "maxItems": 10000},
                "max_tokens": {"type": "integer"},  # the CLI's --max-tokens; checked as the setting is
            },
            "required": ["paths"],
            "additionalProperties": False,
        },
        "result": "{files: [{path, language, skipped (a reason, or null), chunks: [{path, start_line, end_line, kind, "
                  "symbol, title, token_count, text, ...}]}]}",
    },
}
RESERVED_METHODS: tuple[str, ...] = ()

# What the daemon sends unasked, to connections that subscribed (frames without an id).
NOTIFICATIONS: dict[str, dict[str, Any]] = {
    "index/progress": {
        "summary": "The index's state and the writer's progress, cheap to compute: no work-tree walk, no table scan "
                   "(changed files are noticed by the watcher, which starts a run).",
        "params": "{seq, state: READY|STALE|EMPTY|INDEXING, files, chunks, chunks_with_vectors, embedding_progress, "
                  "percent (0..100 while INDEXING, when known), writer: {state, queued, progress, runs, "
                  "pending_vectors, last_error}, memory: {released, rss_mb}}",
    },
}


class ProtocolError(Exception):
    """A request that cannot be served, as the error it answers with."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def encode(message: dict) -> bytes:
    """One frame: compact JSON and a newline."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (a request can carry "\ud800", and errors echo names back) is not UTF-8: escape it.
        return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def request(id_: int | str, method: str, params: dict | None = None) -> dict:
    return {"id": id_, "method": method, "params": params or {}}


def result(id_: int | str | None, value: Any) -> dict:
    return {"id": id_, "result": value}


def error(id_: int | str | None, err: ProtocolError) -> dict:
    return {"id": id_, "error": err.to_error()}


def notification(method: str, params: dict) -> dict:
    """A frame the daemon sends unasked (no ``id``): one of ``NOTIFICATIONS``."""
    return {"method": method, "params": params}


def is_notification(message: dict) -> bool:
    """Whether a decoded frame from the daemon is a notification rather than a response."""
    return "id" not in message and isinstance(message.get("method"), str)


def decode_request(frame: bytes) -> tuple[int | str | None, str, dict]:
    """Read one request frame: (id, method, params), params checked against the method's schema.

    Raises ProtocolError; its ``id`` is recoverable as ``ProtocolError.data["id"]`` when the frame had one."""
    if len(frame) > MAX_FRAME_BYTES:
        raise ProtocolError(PARSE_ERROR, f"frame over {MAX_FRAME_BYTES} bytes")
    try:
        message = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(PARSE_ERROR, f"not a JSON object: {exc}") from None
    except RecursionError:
        raise ProtocolError(PARSE_ERROR, "not a JSON object: nested too deeply") from None
    if not isinstance(message, dict):
        raise ProtocolError(INVALID_REQUEST, "a request is a JSON object")
    id_ = message.get("id")
    if not (isinstance(id_, (int, str)) and not isinstance(id_, bool)):
        raise ProtocolError(INVALID_REQUEST, "id must be an integer or a string")
    method = message.get("method")
    if not isinstance(method, str):
        raise ProtocolError(INVALID_REQUEST, "method must be a string", {"id": id_})
    unknown = set(message) - {"id", "method", "params"}
    if unknown:
        raise ProtocolError(INVALID_REQUEST, f"unknown members: {', '.join(sorted(unknown))}", {"id": id_})
    if method not in METHODS:
        raise ProtocolError(METHOD_NOT_FOUND, f"no method {method!r}", {"id": id_})
    params = message.get("params", {})
    if params is None:
        params = {}
    problem = validate(params, METHODS[method]["params"], "params")
    if problem:
        raise ProtocolError(INVALID_PARAMS, problem, {"id": id_})
    return id_, method, params


def decode_response(frame: bytes) -> dict:
    """Read one frame from the daemon: a response, or a notification (``is_notification``); raises
    ProtocolError(PARSE_ERROR) when it is neither."""
    try:
        message = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(PARSE_ERROR, f"bad response frame: {exc}") from None
    if isinstance(message, dict) and is_notification(message):
        return message
    if not isinstance(message, dict) or ("result" in message) == ("error" in message):
        raise ProtocolError(PARSE_ERROR, "a response has exactly one of result and error")
    return message


_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool}


def validate(value: Any, schema: dict, where: str) -> str | None:
    """The first way ``value`` breaks ``schema`` (the subset used in METHODS), as one line; None when it fits."""
    kind = schema.get("type")
    if kind:
        expected = _TYPES[kind]
        bad_bool = isinstance(value, bool) and kind in ("integer", "number")
        if bad_bool or not isinstance(value, expected):
            return f"{where}: must be {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: must be one of {', '.join(map(str, schema['enum']))}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: must be at most {schema['maximum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where}: must not be empty" if schema.get("minLength") == 1 else f"{where}: too short"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: longer than {schema['maxLength']} characters"
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where}: more than {schema['maxItems']} items"
        for i, item in enumerate(value):
            problem = validate(item, schema.get("items", {}), f"{where}[{i}]")
            if problem:
                return problem
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                return f"{where}.{name}: required"
        for name, item in value.items():
            if name not in properties:
                if schema.get("additionalProperties", True) is False:
                    return f"{where}.{name}: unknown parameter"
                continue
            problem = validate(item, properties[name], f"{where}.{name}")
            if problem:
                return problem
    return None


def schema() -> dict:
    """The machine-readable description `localidx protocol schema` prints (clients check themselves against it)."""
    return {
        "protocol_version": PROTOCOL_VERSION,
        "framing": "newline-delimited JSON, one compact object per line, UTF-8",
        "max_frame_bytes": MAX_FRAME_BYTES,
        "max_query_chars": MAX_QUERY_CHARS,
        "max_negotiated_frame_bytes": MAX_NEGOTIATED_FRAME_BYTES,
        "request": {"id": "integer or string", "method": "string", "params": "object"},
        "response": {"id": "the request's id (null when unreadable)", "result": "any",
                     "error": {"code": "integer", "message": "string", "data": "any (optional)"}},
        "errors": {str(code): name for code, name in ERROR_NAMES.items()},
        "methods": {name: {"summary": spec["summary"], "params": spec["params"], "result": spec["result"]}
                    for name, spec in METHODS.items()},
        "reserved_methods": list(RESERVED_METHODS),
        "notifications": {name: dict(spec) for name, spec in NOTIFICATIONS.items()},
        "notification": {"method": "string", "params": "object", "id": "absent"},
    }
