"""The client and the daemon's path logic, against small scripted servers (no daemon process): socket paths, the
private runtime dir, stale files, error responses as exceptions, and callers that must never fail (git hooks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import ScriptedServer, daemon_like
from localidx import protocol
from localidx.interface.client import (Client, DaemonError, DaemonTimeout, DaemonUnavailable, VersionMismatch, connect,
                                       connect_as_is)
from localidx.config import load_settings
from localidx.daemon import lifecycle
from localidx.errors import ConfigError, UsageError
from localidx.retrieve import IndexNotReady


@pytest.fixture
def run_dir(monkeypatch):
    """A short private XDG_RUNTIME_DIR (socket paths must stay under 104 bytes), with no LOCALIDX_SOCK."""
    path = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    monkeypatch.delenv(lifecycle.SOCK_ENV, raising=False)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def worktree(tmp_path, monkeypatch, run_dir):
    """A plain directory as a work tree, its settings and its daemon paths."""
    root = tmp_path / "tree"
    root.mkdir()
    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "home"))
    settings = load_settings(root)
    return root, settings, lifecycle.daemon_paths(root, False, settings)


# -- paths --------------------------------------------------------------------------------------------------------


def test_the_socket_lives_in_localidx_runtime_dir(run_dir):
    path = lifecycle.socket_path("repo-0123456789ab")
    assert path == run_dir / "localidx" / "repo-0123456789ab.sock"


def test_a_long_socket_path_is_shortened_by_hashing(monkeypatch):
    deep = "/tmp/" + "d" * 60
    monkeypatch.setenv("XDG_RUNTIME_DIR", deep)
    monkeypatch.delenv(lifecycle.SOCK_ENV, raising=False)
    path = lifecycle.socket_path("a-very-long-work-tree-name-x-0123456789ab")
    assert len(os.fsencode(path)) <= lifecycle.MAX_SOCKET_PATH
    assert path.parent == Path(deep) / "localidx" and len(path.name) == len("0123456789abcdef.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp/" + "d" * 120)
    with pytest.raises(ConfigError, match="LOCALIDX_SOCK"):
        lifecycle.socket_path("key")


def test_without_xdg_runtime_dir_the_socket_goes_to_a_per_user_tmp_dir(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(lifecycle.SOCK_ENV, raising=False)
    assert lifecycle.socket_path("k").parent == Path(f"/tmp/localidx-{os.getuid()}")


def test_localidx_sock_overrides_and_must_be_short(monkeypatch, run_dir):
    monkeypatch.setenv(lifecycle.SOCK_ENV, str(run_dir / "s.sock"))
    assert lifecycle.socket_path("anything") == run_dir / "s.sock"
    monkeypatch.setenv(lifecycle.SOCK_ENV, str(run_dir / ("s" * 120)))
    with pytest.raises(ConfigError, match="too long"):
        lifecycle.socket_path("anything")


def test_the_runtime_dir_is_created_private(run_dir):
    sock = lifecycle.socket_path("k")
    lifecycle.check_socket_dir(sock, create=True)
    assert (os.stat(sock.parent).st_mode & 0o777) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_runtime_dir_writable_by_others_is_refused(run_dir, mode):
    sock = lifecycle.socket_path("k")
    sock.parent.mkdir()
    os.chmod(sock.parent, mode)
    for create in (True, False):
        with pytest.raises(ConfigError, match="writable by others"):
            lifecycle.check_socket_dir(sock, create=create)


def test_a_symlinked_runtime_dir_is_refused(run_dir, tmp_path):
    sock = lifecycle.socket_path("k")
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    sock.parent.symlink_to(target)
    with pytest.raises(ConfigError, match="not a directory"):
        lifecycle.check_socket_dir(sock, create=True)


def test_an_only_readable_runtime_dir_of_ours_is_tightened(run_dir):
    sock = lifecycle.socket_path("k")
    sock.parent.mkdir()
    os.chmod(sock.parent, 0o755)
    lifecycle.check_socket_dir(sock, create=False)
    assert (os.stat(sock.parent).st_mode & 0o777) == 0o700


def test_the_status_file_is_written_whole_and_read_back(tmp_path):
    path = tmp_path / "w" / lifecycle.STATUS_NAME
    lifecycle.write_status(path, {"pid": 12, "socket": "/tmp/x.sock"})
    assert lifecycle.read_status(path) == {"pid": 12, "socket": "/tmp/x.sock"}
    assert (os.stat(path).st_mode & 0o777) == 0o600
    for junk in ("", "{", "[]", '{"pid": "12", "socket": "/x"}'):
        path.write_text(junk)
        assert lifecycle.read_status(path) is None


def test_stale_files_of_a_dead_daemon_are_removed(worktree):
    _root, _settings, paths = worktree
    lifecycle.check_socket_dir(paths.socket, create=True)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(paths.socket))  # bound, never listening, then closed: what a killed daemon leaves
    left.close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lifecycle.write_status(paths.status, {"pid": dead.pid, "socket": str(paths.socket)})
    assert lifecycle.clean_stale(paths) == {"pid": dead.pid, "socket": str(paths.socket)}
    assert not paths.status.exists() and not paths.socket.exists()
    assert lifecycle.clean_stale(paths) is None


def test_files_are_kept_while_the_write_lock_is_held(worktree):
    from localidx.store.lock import WriteLock

    _root, _settings, paths = worktree
    lifecycle.write_status(paths.status, {"pid": 999_999_999, "socket": str(paths.socket)})
    with WriteLock(paths.lock):  # a daemon that is starting (or hung) holds it
        assert lifecycle.clean_stale(paths) is None
        assert paths.status.exists()
    assert lifecycle.clean_stale(paths) == {"pid": 999_999_999, "socket": str(paths.socket)}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_a_runtime_dir_owned_by_someone_else_is_refused(run_dir):
    sock = lifecycle.socket_path("k")
    sock.parent.mkdir(mode=0o700)
    os.chown(sock.parent, 65534, 65534)
    with pytest.raises(ConfigError, match="belongs to uid 65534"):
        lifecycle.check_socket_dir(sock, create=True)


def test_files_of_a_listening_daemon_are_kept(worktree):
    root, _settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(root))
    try:
        lifecycle.write_status(paths.status, {"pid": 999_999_999, "socket": str(paths.socket)})
        assert lifecycle.clean_stale(paths) is None
        assert paths.status.exists() and paths.socket.exists()
    finally:
        server.close()


# -- connecting and requests ----------------------------------------------------------------------------------


def test_without_a_daemon_connect_raises_and_connect_as_is_returns_none(worktree):
    root, settings, _paths = worktree
    with pytest.raises(DaemonUnavailable):
        connect(root, False, settings)
    assert connect_as_is(root, False, settings) is None


def test_connect_as_is_reaches_a_running_daemon(worktree):
    root, settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(root))
    try:
        with connect_as_is(root, False, settings) as client:
            assert client.request("index/reindex", {"paths": ["a.py"]}) == {"echo": {"paths": ["a.py"]}}
    finally:
        server.close()


@pytest.mark.parametrize("code, exc_type", [
    (protocol.INDEX_NOT_READY, IndexNotReady),
    (protocol.USAGE_ERROR, UsageError),
    (protocol.INVALID_PARAMS, UsageError),
    (protocol.INTERNAL_ERROR, DaemonError),
    (protocol.SHUTTING_DOWN, DaemonError),
])
def test_error_responses_raise_with_the_servers_message(worktree, code, exc_type):
    root, settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(root, errors={"search/query": (code, "the server says no")}))
    try:
        with connect(root, False, settings) as client:
            with pytest.raises(exc_type, match="the server says no") as info:
                client.request("search/query", {"query": "x"})
            assert info.value.code == code
            assert client.request("index/status") == {"echo": {}}  # the connection is still usable
    finally:
        server.close()


def test_a_hello_from_another_package_version_is_a_version_mismatch(worktree):
    root, settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(root, package_version="0.0.0-old"))
    try:
        from localidx.interface.client import _handshake

        with pytest.raises(VersionMismatch):
            _handshake(paths, 2.0)
        assert connect_as_is(root, False, settings) is None  # hooks never restart anything
    finally:
        server.close()


def test_a_daemon_serving_another_work_tree_is_not_used(worktree, tmp_path):
    root, settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(tmp_path / "other"))
    try:
        with pytest.raises(DaemonUnavailable, match="serves"):
            connect(root, False, settings)
    finally:
        server.close()


@pytest.mark.parametrize("behaviour", ["hang up", "garbage", "wrong id", "silence"])
def test_a_misbehaving_server_is_unavailable(worktree, behaviour):
    root, settings, paths = worktree
    honest = daemon_like(root)

    def respond(message, line):
        if message and message.get("method") == "daemon/hello":
            return honest(message, line)
        return {"hang up": None, "garbage": b"<html>\n", "wrong id": protocol.result(999, {}),
                "silence": "silence"}[behaviour]

    server = ScriptedServer(paths.socket, respond)
    try:
        with connect(root, False, settings, timeout=0.5) as client:
            with pytest.raises(DaemonTimeout if behaviour == "silence" else DaemonUnavailable):
                client.request("index/status")
            with pytest.raises(DaemonUnavailable, match="closed"):
                client.request("index/status")  # closed after a failure: a late answer would be out of step
    finally:
        server.close()


def test_a_request_can_wait_without_a_timeout(worktree):
    root, _settings, paths = worktree
    server = ScriptedServer(paths.socket, daemon_like(root))
    try:
        with Client.open(paths.socket, timeout=1.0) as client:
            assert client.request("index/reindex", {"wait": True}, timeout=None) == {"echo": {"wait": True}}
    finally:
        server.close()


def test_importing_the_client_stays_light():
    code = ("import sys, localidx.interface.client, localidx.daemon.lifecycle; "
            "print(sorted(m for m in ('lancedb', 'pyarrow', 'tree_sitter', 'numpy', 'fastembed') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_full_listen_queue_is_waited_for_not_taken_for_no_daemon(worktree):
    _root, _settings, paths = worktree
    lifecycle.check_socket_dir(paths.socket, create=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(1)
    queued = []
    try:
        while True:  # fill the queue: a busy daemon that has not accepted yet
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(str(paths.socket))
            except BlockingIOError:
                sock.close()
                break
            queued.append(sock)
        with pytest.raises(DaemonTimeout, match="listen queue"):
            Client.open(paths.socket, timeout=0.3)

        def accept_soon():
            time.sleep(0.3)
            for _ in range(len(queued) + 1):
                conn, _ = listener.accept()
                queued.append(conn)

        thread = threading.Thread(target=accept_soon)
        thread.start()
        Client.open(paths.socket, timeout=10).close()  # connects once the queue moves
        thread.join(10)
    finally:
        for sock in queued:
            sock.close()
        listener.close()


def test_an_overloaded_daemon_is_asked_again_until_a_slot_frees(worktree):
    root, settings, paths = worktree
    honest = daemon_like(root)
    refusals = [3]

    def respond(message, line):
        if message and message.get("method") == "daemon/hello" and refusals[0] > 0:
            refusals[0] -= 1
            return protocol.error(None, protocol.ProtocolError(protocol.OVERLOADED, "full"))
        return honest(message, line)

    server = ScriptedServer(paths.socket, respond)
    try:
        with connect(root, False, settings, timeout=10) as client:
            assert client.request("index/status") == {"echo": {}}
        assert refusals == [0]
    finally:
        server.close()


def test_a_daemon_that_refuses_the_hello_parameters_is_another_version(worktree):
    root, settings, paths = worktree

    def respond(message, line):
        return protocol.error(message["id"], protocol.ProtocolError(
            protocol.INVALID_PARAMS, "params.max_frame_bytes: unknown parameter"))

    server = ScriptedServer(paths.socket, respond)
    try:
        from localidx.interface.client import _handshake

        with pytest.raises(VersionMismatch):
            _handshake(paths, 2.0)
    finally:
        server.close()
