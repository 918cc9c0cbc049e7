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
daemon once and retries. This module imports nothing heavy: git hooks load it on every commit.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 1024 * 1024
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

ERROR_NAMES = {
    PARSE_ERROR: "parse error", INVALID_REQUEST: "invalid request", METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params", INTERNAL_ERROR: "internal error", INDEX_NOT_READY: "index not ready",
    USAGE_ERROR: "usage error", VERSION_MISMATCH: "version mismatch", SHUTTING_DOWN: "shutting down",
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
            },
            "required": ["protocol_version"],
            "additionalProperties": False,
        },
        "result": "{protocol_version, package_version, pid, root, index, capabilities: [method names]}",
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
                **_FILTERS,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "result": "{matches: [{path, start_line, end_line, symbol, kind, language, score, vector_score, bm25_score, "
                  "stale, text, ...}], warnings: [text]}",
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
}
RESERVED_METHODS: tuple[str, ...] = ()


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
    """Read one response frame; raises ProtocolError(PARSE_ERROR) when it is not a response object."""
    try:
        message = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(PARSE_ERROR, f"bad response frame: {exc}") from None
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
        "request": {"id": "integer or string", "method": "string", "params": "object"},
        "response": {"id": "the request's id (null when unreadable)", "result": "any",
                     "error": {"code": "integer", "message": "string", "data": "any (optional)"}},
        "errors": {str(code): name for code, name in ERROR_NAMES.items()},
        "methods": {name: {"summary": spec["summary"], "params": spec["params"], "result": spec["result"]}
                    for name, spec in METHODS.items()},
        "reserved_methods": list(RESERVED_METHODS),
    }
