"""The protocol module on its own: framing, request decoding, schema checks, and the documentation that describes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localidx import protocol
from localidx.protocol import (INVALID_PARAMS, INVALID_REQUEST, MAX_FRAME_BYTES, METHOD_NOT_FOUND, PARSE_ERROR,
                               ProtocolError)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"


def decode_error(frame: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_request(frame)
    return info.value


def test_a_frame_is_one_compact_json_line():
    frame = protocol.encode(protocol.request(7, "search/query", {"query": "verify token", "k": 5}))
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1 and b": " not in frame
    assert protocol.decode_request(frame) == (7, "search/query", {"query": "verify token", "k": 5})


def test_a_lone_surrogate_is_escaped_rather_than_breaking_the_frame():
    frame = protocol.encode(protocol.result("\ud800", {"name": "x\udc80"}))
    assert json.loads(frame) == {"id": "\ud800", "result": {"name": "x\udc80"}}
    frame.decode("utf-8")  # valid UTF-8 on the wire


@pytest.mark.parametrize("frame, code", [
    (b"not json\n", PARSE_ERROR),
    (b"\xff\xfe{}\n", PARSE_ERROR),
    (b"[" * 100_000 + b"\n", PARSE_ERROR),  # deeper than the JSON parser recurses
    (b'{"id": ' + b"9" * 5000 + b"}\n", PARSE_ERROR),  # over Python's int-digits limit
    (b"[1, 2]\n", INVALID_REQUEST),
    (b'{"method": "daemon/hello"}\n', INVALID_REQUEST),
    (b'{"id": true, "method": "daemon/hello"}\n', INVALID_REQUEST),
    (b'{"id": 1.5, "method": "daemon/hello"}\n', INVALID_REQUEST),
])
def test_unreadable_frames_have_no_id(frame, code):
    err = decode_error(frame)
    assert err.code == code
    assert not (isinstance(err.data, dict) and "id" in err.data)


@pytest.mark.parametrize("message, code, text", [
    ({"id": 3, "method": "nope/never"}, METHOD_NOT_FOUND, "no method"),
    ({"id": 3, "method": "daemon/hello", "params": {"protocol_version": 1}, "extra": 1}, INVALID_REQUEST, "extra"),
    ({"id": 3, "method": 5}, INVALID_REQUEST, "method"),
    ({"id": 3, "method": "search/query", "params": {"query": ""}}, INVALID_PARAMS, "params.query: must not be empty"),
    ({"id": 3, "method": "search/query", "params": {"query": "x", "k": 10**30}}, INVALID_PARAMS, "at most 100"),
    ({"id": 3, "method": "search/query", "params": {"query": "x", "k": True}}, INVALID_PARAMS, "must be integer"),
    ({"id": 3, "method": "search/query", "params": {"query": "x", "mode": "fuzzy"}}, INVALID_PARAMS, "one of"),
    ({"id": 3, "method": "search/query", "params": []}, INVALID_PARAMS, "params: must be object"),
    ({"id": 3, "method": "index/reindex", "params": {"paths": ["a", 1]}}, INVALID_PARAMS, "params.paths[1]"),
    ({"id": 3, "method": "daemon/stop", "params": {"now": True}}, INVALID_PARAMS, "unknown parameter"),
])
def test_readable_but_wrong_requests_keep_their_id(message, code, text):
    err = decode_error(json.dumps(message).encode() + b"\n")
    assert (err.code, err.data) == (code, {"id": 3})
    assert text in err.message


def test_null_params_mean_none():
    assert protocol.decode_request(b'{"id": "a", "method": "daemon/stop", "params": null}') == ("a", "daemon/stop", {})


def test_an_oversize_frame_is_a_parse_error():
    assert decode_error(b"x" * (MAX_FRAME_BYTES + 1)).code == PARSE_ERROR


def test_a_response_has_exactly_one_of_result_and_error():
    assert protocol.decode_response(b'{"id": 1, "result": null}\n') == {"id": 1, "result": None}
    for frame in (b'{"id": 1}', b'{"id": 1, "result": 1, "error": {}}', b"[]", b"nope", b"[" * 100_000):
        with pytest.raises(ProtocolError):
            protocol.decode_response(frame)


def test_the_schema_lists_every_method_and_error():
    described = protocol.schema()
    assert set(described["methods"]) == set(protocol.METHODS)
    assert described["protocol_version"] == protocol.PROTOCOL_VERSION
    assert set(described["errors"]) == {str(code) for code in protocol.ERROR_NAMES}
    json.dumps(described)


def test_protocol_schema_command_prints_the_schema():
    proc = subprocess.run([sys.executable, "-m", "localidx", "protocol", "schema"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == protocol.schema()


def test_the_protocol_document_covers_every_method_and_error_code():
    text = DOCS.read_text(encoding="utf-8")
    for method in protocol.METHODS:
        assert f"`{method}`" in text, method
    for code in protocol.ERROR_NAMES:
        assert str(code) in text, code
    assert "socat" in text and str(protocol.PROTOCOL_VERSION) in text
