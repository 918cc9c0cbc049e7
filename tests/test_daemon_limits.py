"""The daemon against clients that do not behave: connections that never read their answers, a fake daemon on the
socket path, a socket directory another user made. Real daemons over real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import AUTH_MODULE, ScriptedServer, daemon_like
from localidx import protocol
from localidx.daemon import lifecycle
from localidx.errors import ConfigError
from localidx.interface.client import DaemonUnavailable, stop_daemon
from test_daemon import daemons, run_dir  # noqa: F401 - fixtures

CLIENTS = 20
REQUESTS = 300  # each, never read: about 40 MB of answers per connection if the daemon made them all


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _wait_until_quiet(pid: int, timeout: float = 240.0) -> None:
    """Until the daemon has used no CPU for two seconds: what it was handed is answered."""
    deadline = time.monotonic() + timeout
    last = _cpu_ticks(pid)
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = _cpu_ticks(pid)
        if now == last:
            return
        last = now
    raise AssertionError("the daemon was still busy")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the daemon's RSS from /proc")
def test_connections_that_never_read_cannot_grow_the_daemon(daemons):
    d = daemons
    for n in range(40):  # answers of some size: many matches, each with its text
        (d.root / f"mod{n}.py").write_text(AUTH_MODULE.replace("verify_token", f"verify_token_{n}") * 3)
    pid = d.start()
    d.ready()
    before = _rss_mb(pid)
    frame = protocol.encode(protocol.request(1, "search/query", {"query": "verify token session", "k": 100}))
    hogs = []
    for _ in range(CLIENTS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(d.paths.socket))
        sock.setblocking(False)
        sent = 0
        for _ in range(REQUESTS):  # as much as the socket takes; the daemon stops reading a connection it holds
            try:
                sock.sendall(frame) if sent < 64 else sock.send(frame)
                sent += 1
            except (BlockingIOError, InterruptedError):
                break
        hogs.append(sock)
    _wait_until_quiet(pid)  # the workers have answered all they were handed
    grown = _rss_mb(pid) - before
    try:
        # A client that reads is still served, at once.
        started = time.monotonic()
        proc = d.cli("search", "verify token", "--json")
        assert proc.returncode == 0 and "mod" in proc.stdout, proc.stderr
        assert time.monotonic() - started < 60
    finally:
        for sock in hogs:
            sock.close()
    # 1 MiB of unread answers (plus the one in hand) per connection. Before that bound each held the answers to all
    # 64 requests it had queued (130 KB each): these 20 connections grew the daemon by about 600 MB, now by 30.
    assert grown < 100, f"the daemon grew by {grown:.0f} MB for {CLIENTS} connections that never read"


def test_stop_refuses_a_socket_dir_others_may_write(tmp_path, monkeypatch, make_repo):
    from localidx.config import load_settings

    root = make_repo({"a.py": "x = 1\n"})
    shared = Path(os.path.realpath(tmp_path)) / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv(lifecycle.SOCK_ENV, str(shared / "d.sock"))
    server = None
    try:
        os.chmod(shared, 0o700)
        server = ScriptedServer(shared / "d.sock", daemon_like(root))  # a fake daemon listening there
        os.chmod(shared, 0o777)
        with pytest.raises(ConfigError, match="writable by others"):
            stop_daemon(lifecycle.daemon_paths(root, True, load_settings(root)))
        proc = subprocess.run([sys.executable, "-m", "localidx", "daemon", "stop"], cwd=root, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "writable by others" in proc.stderr
    finally:
        if server is not None:
            server.close()


def test_stop_waits_for_the_process_on_the_socket_not_the_pid_an_answer_claims(tmp_path, monkeypatch, make_repo,
                                                                                 run_dir):
    from localidx.config import load_settings

    root = make_repo({"a.py": "x = 1\n"})
    bystander = subprocess.Popen(["sleep", "60"])  # the pid a fake daemon names as its own
    respond = daemon_like(root)

    def claims_another_pid(message, line):
        if message and message.get("method") == "daemon/stop":
            return protocol.encode(protocol.result(message.get("id"), {"pid": bystander.pid}))
        return respond(message, line)

    paths = lifecycle.daemon_paths(root, True, load_settings(root))
    server = ScriptedServer(paths.socket, claims_another_pid)
    try:
        with pytest.raises(DaemonUnavailable) as raised:
            stop_daemon(paths, timeout=1.0)
        assert f"pid {os.getpid()}" in str(raised.value)  # the socket's peer: this test's own process
        assert bystander.poll() is None  # never waited on as the daemon, never signalled
    finally:
        server.close()
        bystander.kill()
        bystander.wait()


def test_a_tmp_runtime_dir_another_user_made_moves_the_socket_under_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(lifecycle.SOCK_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(lifecycle, "TMP", tmp_path)
    taken = tmp_path / f"localidx-{os.getuid()}"
    taken.mkdir(mode=0o777)
    os.chmod(taken, 0o777)  # made by someone else, for everyone: unusable
    sock = lifecycle.socket_path("repo-0123456789ab")
    assert sock.parent == tmp_path / "cache" / "localidx" / "run"
    lifecycle.check_socket_dir(sock, create=True)
    assert (sock.parent.stat().st_mode & 0o777) == 0o700
    os.rmdir(taken)
    assert lifecycle.socket_path("repo-0123456789ab").parent == taken  # free again: /tmp as before


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_answers_in_its_own_process_when_the_daemon_cannot_start(tmp_path, make_repo):
    """A socket dir refused (here: writable by others) means no daemon; the tools still answer, and say why."""
    import json

    import mcp
    from mcp import StdioServerParameters

    root = make_repo({"auth.py": AUTH_MODULE})
    shared = Path(os.path.realpath(tmp_path)) / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home"),
           "LOCALIDX_WATCH": "0", lifecycle.SOCK_ENV: str(shared / "d.sock")}
    indexed = subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=root, env=env,
                             capture_output=True, text=True, timeout=120)
    assert indexed.returncode == 0, indexed.stderr
    params = StdioServerParameters(command=sys.executable, args=["-m", "localidx", "mcp"], cwd=str(root), env=env)
    async with mcp.Client(params, read_timeout_seconds=120) as client:
        result = await client.call_tool("rag_search", {"rawQuery": "verify token"})
        status = await client.call_tool("index_status", {})
    assert not result.is_error, result.content
    answer = json.loads("".join(getattr(b, "text", "") for b in result.content))
    assert answer["matches"] and answer["matches"][0]["path"] == "auth.py"
    assert any("answered without the daemon" in w and "writable by others" in w for w in answer["warnings"])
    assert json.loads(status.content[0].text)["state"] == "READY"
    assert not list(shared.iterdir())  # no socket was made in the refused dir
