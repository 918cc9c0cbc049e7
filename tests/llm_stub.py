"""A small OpenAI-compatible chat server for tests: no model, canned or computed answers, real HTTP on 127.0.0.1.

    from llm_stub import Reply, serve_llm

    with serve_llm(lambda req: "an answer") as url:       # url: "http://127.0.0.1:<port>/v1"
        settings = settings.replace(llm_base_url=url)
        ...
        assert url.requests[0]["body"]["messages"][-1]["content"] == "..."

``serve_llm(handler)`` yields the base URL (a ``str``) that also carries ``.requests``, every request received, in
order: ``{"method", "path", "headers" (lower-case names), "body" (parsed JSON, or None), "raw"}``.

The handler gets that request dict and returns:
- a ``str``: the assistant message's content, wrapped in a chat completion;
- a ``dict``: sent as the JSON body, status 200 (a whole completion, or something malformed);
- a ``Reply``: full control — status, a raw body, a delay before answering, or ``drop`` (close without answering),
  or ``pieces``: an answer streamed as server-sent events, ``piece_delay_s`` apart.
A ``str`` (or ``Reply(content=...)``) answers a request that asks for ``"stream": true`` as a stream of a few pieces,
as llama.cpp's server does. A handler that raises answers HTTP 500 with the exception's text as an OpenAI-style
error. ``url.closed`` lists the streams whose client went away before the end (the number of pieces sent).

``unused_url()`` is a base URL where nothing listens (connection refused).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


@dataclass
class Reply:
    status: int = 200
    body: object = None  # sent as JSON
    raw: bytes | None = None  # a raw body (wins over body)
    content: str | None = None  # shorthand: a chat completion with this content
    delay_s: float = 0.0
    drop: bool = False  # close the connection without an answer
    content_type: str = "application/json"
    pieces: list | None = None  # stream these as server-sent events
    piece_delay_s: float = 0.0  # before each piece
    stream: bool | None = None  # None: stream when the request asks for it


def split_pieces(text: str, size: int = 8) -> list[str]:
    """``text`` in pieces of ``size`` characters, as a stream sends it."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def completion(content: str, model: str = "stub-model") -> dict:
    """A chat completion as an OpenAI-compatible server sends it."""
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def error_body(message: str, kind: str = "server_error") -> dict:
    return {"error": {"message": message, "type": kind}}


def user_message(request: dict) -> str:
    """The last user message of a recorded chat request ("" when there is none)."""
    messages = (request.get("body") or {}).get("messages") or []
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


class StubURL(str):
    """The stub's base URL; ``requests`` lists what it has received."""

    requests: list
    closed: list
    server: ThreadingHTTPServer


def _handler_class(handler: Callable, requests: list, closed: list):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            self._answer(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._answer(self.rfile.read(length) if length else b"")

        def _answer(self, raw: bytes | None) -> None:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = {"method": self.command, "path": self.path,
                       "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "raw": raw}
            requests.append(request)
            try:
                reply = handler(request)
            except Exception as exc:  # a handler bug or a deliberate failure: an HTTP 500 the client must report
                reply = Reply(status=500, body=error_body(str(exc)))
            if isinstance(reply, str):
                reply = Reply(content=reply)
            elif not isinstance(reply, Reply):
                reply = Reply(body=reply)
            asked_stream = isinstance(body, dict) and body.get("stream") is True
            if reply.pieces is None and reply.content is not None and (reply.stream or
                                                                        (reply.stream is None and asked_stream)):
                reply.pieces = split_pieces(reply.content)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.pieces is not None and reply.status == 200:
                self._stream(reply)
                return
            if reply.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if reply.raw is not None:
                data = reply.raw
            elif reply.content is not None:
                data = json.dumps(completion(reply.content)).encode()
            else:
                data = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout test)
                self.close_connection = True

        def _stream(self, reply: Reply) -> None:
            sent = 0
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                for piece in reply.pieces:
                    if reply.piece_delay_s:
                        time.sleep(reply.piece_delay_s)
                    event = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                    sent += 1
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:  # the client went away mid-answer: a real server stops computing here
                closed.append(sent)
            self.close_connection = True

    return Handler


@contextmanager
def serve_llm(handler: Callable | None = None) -> Iterator[StubURL]:
    """Run the stub on an ephemeral port for the ``with`` block; yields its base URL (``.../v1``)."""
    requests: list = []
    closed: list = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(handler or (lambda _req: "stub answer"), requests,
                                                                  closed))
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = StubURL(f"http://127.0.0.1:{server.server_address[1]}/v1")
    url.requests = requests
    url.closed = closed
    url.server = server
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def unused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
