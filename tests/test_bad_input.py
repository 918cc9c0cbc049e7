"""Bad input a user can give — odd bytes, odd files, odd settings, long text — through the real CLI and the real
daemon: one line, a clear exit code, nothing lost from the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_daemon import Daemons, run_dir  # noqa: F401 - run_dir is a fixture


def run(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI in ``cwd``; ``env`` adds variables, and removes those it sets to None."""
    full = {name: value for name, value in {**os.environ, **(env or {})}.items() if value is not None}
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full)


def fake_env(tmp_path: Path, name: str = "home") -> dict:
    return {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / name)}


def one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return lines[0]


# -- plain output: one line per location, whatever a file name holds ------------------------------------------

ODD_NAME = "we\nird\tname.py"


def test_plain_output_escapes_newlines_and_tabs_in_file_names(make_repo, tmp_path):
    root = make_repo({ODD_NAME: "def odd_helper():\n    return 1\n", "plain.py": "def plain_helper():\n    return 2\n"})
    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    shown = "we\\nird\\tname.py:1-2"
    chunks = run(root, "chunks", ODD_NAME, env=env)
    search = run(root, "search", "odd helper", env=env)
    context = run(root, "context", "odd helper", env=env)
    for proc in (chunks, search, context):
        assert proc.returncode == 0, proc.stderr
        assert "\t" not in proc.stdout.replace("\n    ", "\n"), proc.stdout
        assert any(line.lstrip().startswith(shown) or f"] {shown} " in line for line in proc.stdout.splitlines()), \
            proc.stdout
        assert "ird\tname" not in proc.stdout and "we\nird" not in proc.stdout
    assert search.stdout.splitlines()[0].startswith(f"{shown}  odd_helper  ")
    # JSON keeps the name as it is.
    found = json.loads(run(root, "search", "odd helper", "--json", env=env).stdout)["matches"]
    assert found[0]["path"] == ODD_NAME


# -- files that are not files ---------------------------------------------------------------------------------


def test_chunks_refuses_fifos_devices_and_symlink_loops_in_one_line(make_repo):
    root = make_repo({"ok.py": "def fine():\n    return 1\n"})
    os.mkfifo(root / "pipe.py")
    (root / "loop_a.py").symlink_to("loop_b.py")
    (root / "loop_b.py").symlink_to("loop_a.py")
    assert "is a FIFO, not a regular file" in one_line_error(run(root, "chunks", "pipe.py", timeout=30), 2)
    assert "a symlink loop" in one_line_error(run(root, "chunks", "loop_a.py", timeout=30), 2)
    assert "is a device, not a regular file" in one_line_error(run(root, "chunks", "/dev/null", timeout=30), 2)
    ok = run(root, "chunks", "ok.py", timeout=30)
    assert ok.returncode == 0 and "ok.py:1-2" in ok.stdout


def test_reading_a_file_swapped_for_a_fifo_fails_at_once(tmp_path):
    # The indexer reads what discovery listed; a file replaced by a FIFO in between must not block the run.
    from localidx.discover import read_source
    from localidx.errors import UsageError

    os.mkfifo(tmp_path / "was_a_file.py")
    try:
        read_source(tmp_path / "was_a_file.py")
    except UsageError as exc:
        assert "a FIFO, not a regular file" in str(exc)
    else:
        raise AssertionError("read_source read a FIFO")


# -- settings: every value checked, one line naming the key, the source and what is allowed ---------------------


@pytest.mark.parametrize("where, text, needles", [
    (".localidx.toml", "max_file_bytes = 1e400\n", ["max_file_bytes must be an integer from 1 to", "inf"]),
    (".localidx.toml", "window_lines = 1.5\n", ["window_lines must be an integer from 1 to 100,000", "1.5"]),
    ("config.toml", "workers = 1.5\n", ["workers must be an integer from 0 to 1,024", "1.5"]),
    (".localidx.toml", 'watch = "yes"\n', ["watch must be true or false", "'yes'"]),
    (".localidx.toml", "profile = 5\n", ["profile must be a profile name (not empty)", "5"]),
    ("config.toml", "home = 5\n", ["home must be a string", "5"]),
    (".localidx.toml", "overlap_lines = 50\n", ["overlap_lines must be an integer from 0 to 49"]),
    (".localidx.toml", "parse_timeout_s = nan\n", ["parse_timeout_s must be a number from 0 to"]),
    ("config.toml", '[llm]\nbase_url = "localhost:8080"\n', ["llm_base_url must be an http:// or https:// URL"]),
    ("pyproject.toml", '[tool.localidx]\nwatch = "on"\n', ["[tool.localidx]", "watch must be true or false"]),
    ("config.toml", 'summarize = "on"\n', ["summarize must be true or false"]),
])
def test_a_bad_setting_in_a_file_is_one_line_naming_key_source_and_what_is_allowed(make_repo, tmp_path, where,
                                                                                     text, needles, isolated_config):
    """In a repository's file or the user's own config.toml (a repository's untrusted LLM settings are not read
    at all: tests/test_hostile_repo.py)."""
    root = make_repo({"a.py": "def f():\n    return 1\n"})
    path = isolated_config / where if where == "config.toml" else root / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    env = {"LOCALIDX_HOME": None}  # the file's home, if any, is the one that counts
    for command in (("chunks", "a.py"), ("index", "-q"), ("status",)):
        line = one_line_error(run(root, *command, env=env, timeout=60), 2)
        assert str(path) in line, line
        for needle in needles:
            assert needle in line, line
    expected = [".git", "a.py"] + ([where] if path.parent == root else [])
    assert sorted(p.name for p in root.iterdir()) == sorted(expected), "nothing written anywhere"


def test_every_setting_has_a_rule():
    """A setting without a rule was an internal error (KeyError) the first time anything read it."""
    import dataclasses

    from localidx.config import RULES, Settings

    assert {f.name for f in dataclasses.fields(Settings)} == set(RULES)


@pytest.mark.parametrize("name, value, needle", [
    ("LOCALIDX_WORKERS", "1.5", "workers must be an integer from 0 to 1,024, got '1.5'"),
    ("LOCALIDX_MAX_FILE_BYTES", "1e400", "max_file_bytes must be an integer"),
    ("LOCALIDX_WATCH", "maybe", "watch must be true or false, got 'maybe'"),
    ("LOCALIDX_DAEMON_IDLE_S", "inf", "daemon_idle_s must be a number from 0 to"),
    ("LOCALIDX_DAEMON_MAX_CONNECTIONS", "0", "daemon_max_connections must be an integer from 1 to"),
    ("LOCALIDX_LLM_API_KEY_ENV", "MY KEY", "llm_api_key_env must be the name of an environment variable"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(make_repo, tmp_path, name, value, needle):
    root = make_repo({"a.py": "def f():\n    return 1\n"})
    line = one_line_error(run(root, "chunks", "a.py", env={name: value}, timeout=60), 2)
    assert line.startswith(f"localidx: error: {name}: ") and needle in line, line


def test_a_relative_home_in_the_config_file_is_under_the_root_from_any_directory(make_repo, tmp_path):
    """(``home`` in a repository's file is taken once the user trusts the file.)"""
    root = make_repo({"src/a.py": "def verify_token():\n    return 1\n", ".localidx.toml": 'home = "idx"\n'})
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": None}
    assert run(root, "trust", env=env).returncode == 0
    assert run(root, "index", "-q", env=env).returncode == 0
    assert (root / "idx" / "lancedb").is_dir() and not (root / "src" / "idx").exists()
    found = run(root / "src", "search", "verify token", env=env)
    assert found.returncode == 0 and found.stdout.startswith("a.py:1-2"), found.stderr  # printed from src/


# -- query text that is not valid Unicode ---------------------------------------------------------------------

# What a shell passes when a pasted name holds bytes that are not UTF-8 (argv carries them as lone surrogates), and
# what a JSON client can send ("\ud800"). The real model's tokenizer refused both: exit 3, or -32603 on the socket.
ARGV_BYTES = "verify tok\udcff\udcfeen"
JSON_SURROGATE = '{"id": 7, "method": "%s", "params": {"query": "verify \\ud800token \\udcff"}}\n'


@pytest.fixture
def real_model_daemons(make_repo, tmp_path, monkeypatch, run_dir):
    monkeypatch.delenv("LOCALIDX_EMBED_MODEL", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOCALIDX_WATCH", "0")
    monkeypatch.setenv("LOCALIDX_DAEMON_IDLE_S", "300")
    for name in ("LOCALIDX_SOCK", "LOCALIDX_FAKE_VERSION", "LOCALIDX_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    root = make_repo({"auth.py": "def verify_token(token, secret):\n    return token.signature == secret\n",
                      "mail.py": "def send_mail(to):\n    return to\n"})
    helper = Daemons(root)
    try:
        yield helper
    finally:
        helper.teardown()


@pytest.mark.real_model
def test_queries_with_invalid_bytes_or_lone_surrogates_work_in_process_and_over_the_socket(real_model_daemons):
    d = real_model_daemons
    assert d.cli("index", "-q").returncode == 0

    def answers(where: str) -> None:
        search = d.cli("search", ARGV_BYTES, "--json")
        assert search.returncode == 0, (where, search.stderr)
        assert json.loads(search.stdout)["matches"][0]["path"] == "auth.py"
        context = d.cli("context", ARGV_BYTES, "--json")
        assert context.returncode == 0, (where, context.stderr)
        pack = json.loads(context.stdout)
        assert pack["matches"][0]["path"] == "auth.py" and pack["rawQuery"] == "verify tok\ufffd\ufffden"

    answers("in process")
    d.start()
    answers("through the daemon")
    with d.raw() as raw:
        for method in ("search/query", "context/build"):
            raw.send((JSON_SURROGATE % method).encode())
            response = raw.recv()
            assert "result" in response, response
            assert response["result"]["matches"][0]["path"] == "auth.py"


def test_an_mcp_call_with_a_lone_surrogate_is_answered(make_repo, tmp_path, run_dir):
    # A JavaScript client that cuts a string inside an emoji sends "\ud83d" alone: valid JSON, which the MCP SDK's
    # parser refuses without answering, so the client waited forever.
    import selectors

    root = make_repo({"auth.py": "def verify_token(token, secret):\n    return token.signature == secret\n"})
    env = {**fake_env(tmp_path), "LOCALIDX_WATCH": "0", "LOCALIDX_DAEMON_IDLE_S": "120", "LOCALIDX_SOCK": None}
    assert run(root, "index", "-q", env=env).returncode == 0
    assert run(root, "repos", "share", ".", env=env).returncode == 0  # rag_search_global reads shared ones only
    full = {k: v for k, v in {**os.environ, **env, "XDG_RUNTIME_DIR": str(run_dir)}.items() if v is not None}
    server = subprocess.Popen([sys.executable, "-m", "localidx", "mcp"], cwd=root, env=full, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    selector = selectors.DefaultSelector()
    selector.register(server.stdout, selectors.EVENT_READ)

    def ask(frame: str) -> dict:
        server.stdin.write(frame.encode() + b"\n")
        server.stdin.flush()
        assert selector.select(timeout=120), f"no answer to {frame}"
        return json.loads(server.stdout.readline())

    try:
        ask('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}')
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for tool in ("rag_search_simple", "rag_search_global"):
            reply = ask('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"%s",'
                        '"arguments":{"rawQuery":"verify token \\ud83d"}}}' % tool)
            assert not reply["result"].get("isError"), reply
            found = reply["result"].get("structuredContent") or json.loads(reply["result"]["content"][0]["text"])
            assert found["matches"][0]["path"] == "auth.py" and found["rawQuery"] == "verify token \ufffd"
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        run(root, "daemon", "stop", env={**env, "XDG_RUNTIME_DIR": str(run_dir)}, timeout=60)


# -- long queries: one limit, the same answer with or without the daemon ----------------------------------------

REPORT = (
    "Bug: logging in with an expired session token crashes instead of asking to log in again.\n"
    "Steps: log in, wait an hour, reload. Expected: the login page. Actual: a 500 and this traceback:\n"
    "Traceback (most recent call last):\n"
    '  File "app/auth.py", line 2, in verify_token\n'
    "    return token.signature == secret\n"
    "AttributeError: 'NoneType' object has no attribute 'signature'\n"
)


def _same_answer(a: dict, b: dict) -> None:
    assert [(m["id"], round(m["score"], 6)) for m in a["matches"]] == \
        [(m["id"], round(m["score"], 6)) for m in b["matches"]]
    assert a["warnings"] == b["warnings"]


def test_a_long_query_gets_the_same_answer_in_process_and_through_the_daemon(make_repo, tmp_path, monkeypatch,
                                                                               run_dir):
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOCALIDX_WATCH", "0")
    monkeypatch.setenv("LOCALIDX_DAEMON_IDLE_S", "300")
    for name in ("LOCALIDX_SOCK", "LOCALIDX_FAKE_VERSION", "LOCALIDX_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    root = make_repo({"app/auth.py": "def verify_token(token, secret):\n    return token.signature == secret\n",
                      "app/mail.py": "def send_mail(to, body):\n    return to, body\n"})
    d = Daemons(root)
    report = (REPORT + "log line: session refresh failed, retrying\n" * 60)[:4500]  # a bug report with its log
    log_dump = (REPORT * 400)[:40_000]  # over the limit: cut, with a warning
    queries = {"report": report, "log": log_dump}
    try:
        assert d.cli("index", "-q").returncode == 0
        answers = {}
        for where in ("in process", "daemon"):
            if where == "daemon":
                d.start()
            for name, text in queries.items():
                for command in ("search", "context"):
                    proc = d.cli(command, text, "--json")
                    assert proc.returncode == 0, (where, name, command, proc.stderr)
                    answers[where, name, command] = json.loads(proc.stdout)
        for name in queries:
            for command in ("search", "context"):
                _same_answer(answers["in process", name, command], answers["daemon", name, command])
            assert answers["in process", name, "search"]["matches"][0]["path"] == "app/auth.py"
        assert answers["daemon", "report", "search"]["warnings"] == []
        cut = "cut to 32768 characters (it had 40000)"
        assert any(cut in w for w in answers["daemon", "log", "search"]["warnings"])
        assert any(cut in w for w in answers["daemon", "log", "context"]["warnings"])
        plain = d.cli("search", log_dump)
        assert plain.returncode == 0 and cut in plain.stderr and plain.stdout.startswith("app/auth.py:1-2")
    finally:
        d.teardown()
