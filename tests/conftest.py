"""Shared fixtures: real git repositories in temp dirs, a scripted daemon on a real socket, and the --update-goldens
switch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from localidx import __version__, protocol
from localidx.daemon import lifecycle

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# No test starts a daemon it did not ask for: the CLI uses a daemon a test started, and starts none by itself (tests
# of the automatic start set LOCALIDX_DAEMON=auto for their own commands).
os.environ["LOCALIDX_DAEMON"] = "running"
# Searches read LanceDB, never the in-memory copy a process loads in the background after its first queries: a test
# comparing two searches would otherwise compare LanceDB's float sums with numpy's. tests/test_hot.py turns it on.
os.environ["LOCALIDX_HOT"] = "0"

# Every process the test run starts inherits this marker; at the end, any process still carrying it is a survivor.
RUN_MARKER_ENV = "LOCALIDX_TEST_RUN"
os.environ[RUN_MARKER_ENV] = uuid.uuid4().hex
# The user's own config.toml and trust records are never read: a directory that does not exist (each test gets one of
# its own below, ``isolated_config``).
os.environ["LOCALIDX_CONFIG_DIR"] = f"/nonexistent/localidx-test-config-{os.environ[RUN_MARKER_ENV]}"


def marked_processes(name: str, value: str) -> dict[int, str]:
    """{pid: command line} of the live processes (this one aside) whose environment holds ``name=value``."""
    wanted = f"{name}={value}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie is dead already, waiting for its parent to read its status
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return found


def survivors(name: str, value: str, wait_s: float) -> dict[int, str]:
    """The processes marked ``name=value`` still alive after waiting up to ``wait_s`` for them to end."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = marked_processes(name, value)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def kill_all(pids) -> None:
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _stop_own_helpers() -> None:
    """Stop this process's own fork server and resource tracker (they would end with it): they are not survivors."""
    from multiprocessing import forkserver, resource_tracker

    def stop_both() -> None:
        for stop in (forkserver._forkserver._stop, resource_tracker._resource_tracker._stop):  # noqa: SLF001
            try:
                stop()  # each waits for its process to end: the server waits for its workers
            except (OSError, ChildProcessError):
                pass

    # Waited for a while only: a worker still running keeps the server up; it is then reported as a survivor.
    stopping = threading.Thread(target=stop_both, daemon=True)
    stopping.start()
    stopping.join(10)


def pytest_sessionfinish(session, exitstatus):
    """A test run leaves no process behind: whatever the run started and is still alive is killed, named, and
    fails the run."""
    if not Path("/proc/self/environ").exists():
        return  # no /proc to look in (not Linux)
    _stop_own_helpers()
    left = survivors(RUN_MARKER_ENV, os.environ[RUN_MARKER_ENV], wait_s=3.0)
    if not left:
        return
    kill_all(left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"FAILED: the test run left {len(left)} process(es) behind (now killed):"]
    lines += [f"  {pid} {cmd[:200]}" for pid, cmd in sorted(left.items())]
    if reporter is not None:
        reporter.write("\n")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED

# Sample sources several test modules index.
BILLING_MODULE = '''"""Billing helpers."""


def invoice_total(lines):
    """Sum the lines of an invoice."""
    total = 0
    for line in lines:
        total += line.quantity * line.unit_price
    return total


class Ledger:
    """Keeps balances."""

    def credit(self, account, amount):
        self.balances[account] = self.balances.get(account, 0) + amount
        self.history.append(("credit", account, amount))

    def debit(self, account, amount):
        if self.balances.get(account, 0) < amount:
            raise ValueError("insufficient funds")
        self.balances[account] -= amount
'''
AUTH_MODULE = (
    "def verify_token(token, secret):\n"
    '    """Check a signed session token against the server secret."""\n'
    "    return sign(token.payload, secret) == token.signature\n\n\n"
    "def refresh_session(session):\n"
    '    """Give a session a new expiry time."""\n'
    "    session.expires = now() + 3600\n"
    "    return session\n"
)
AUTH_README = "# Auth service\n\nTokens are verified against the secret; sessions are refreshed hourly.\n"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="Rewrite the golden chunk files from the chunker.")


@pytest.fixture
def update_goldens(request) -> bool:
    return request.config.getoption("--update-goldens")


@pytest.fixture(autouse=True)
def isolated_registry(tmp_path_factory, monkeypatch) -> Path:
    """Every test (and every process it starts) registers its indexes in a registry of its own, not the user's."""
    path = tmp_path_factory.mktemp("registry") / "registry.json"
    monkeypatch.setenv("LOCALIDX_REGISTRY", str(path))
    return path


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory, monkeypatch) -> Path:
    """Every test (and every process it starts) has a per-user config dir of its own (config.toml, trust records)."""
    path = tmp_path_factory.mktemp("config") / "localidx"
    monkeypatch.setenv("LOCALIDX_CONFIG_DIR", str(path))
    return path


@contextmanager
def indexed_once(tmp_path_factory, name: str, files: dict[str, str]):
    """(root, settings, read-only index) of a repository holding ``files``, indexed with the fake embedder, for a
    module-scoped fixture: the per-test registry fixture is not active there, so the registry is pointed away from
    the user's here, for as long as the ``with`` lasts."""
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.store.index import open_index

    base = tmp_path_factory.mktemp(name)
    mp = pytest.MonkeyPatch()
    mp.setenv("LOCALIDX_REGISTRY", str(base / "registry.json"))
    try:
        root = init_repo(base / name, files)
        settings = load_settings(root, {"embed_model": "fake", "home": str(base / f"{name}-home")})
        run_index(root, True, settings)
        index = open_index(root, True, settings, read_only=True)
        try:
            yield root, settings, index
        finally:
            index.close()
    finally:
        mp.undo()


@pytest.fixture
def isolated_git_config(tmp_path_factory, monkeypatch):
    """Keep the machine's git config (a global excludesFile, say) out of both git and pygit2."""
    import pygit2

    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    levels = (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(home)
    yield home
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity, so tests need no global git config."""
    return subprocess.run(
        ["git", "-c", "user.name=localidx-test", "-c", "user.email=test@localidx.invalid", "-c", "init.defaultBranch=main",
         *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Write {relative path: text or bytes} under ``root``, making directories."""
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def init_repo(root: Path, tracked: dict[str, str | bytes], untracked: dict[str, str | bytes] | None = None,
              commit: bool = True) -> Path:
    """A git repository at ``root``: ``tracked`` written and committed (when ``commit`` and there are any), then
    ``untracked`` written."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    write_files(root, tracked)
    if commit and tracked:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
    write_files(root, untracked or {})
    return root


@pytest.fixture
def make_repo(tmp_path):
    """Create a git repository from {relative path: text or bytes} and commit it."""

    def make(files: dict[str, str | bytes], name: str = "repo", commit: bool = True) -> Path:
        return init_repo(tmp_path / name, files, commit=commit)

    return make


class ScriptedServer:
    """Listens on a socket and answers each request line with ``respond(request_dict_or_None, line)``."""

    def __init__(self, path: Path, respond):
        self.path = path
        self.respond = respond
        lifecycle.check_socket_dir(path, create=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        conn.settimeout(5)
        with conn, conn.makefile("rb") as reader:
            for line in reader:
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                answer = self.respond(message, line)
                if answer is None:
                    return  # hang up without answering
                if answer == "silence":
                    self.stop.wait(5)
                    return
                conn.sendall(answer if isinstance(answer, bytes) else protocol.encode(answer))

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()
        lifecycle.unlink_quietly(self.path)


def daemon_environment(monkeypatch, home: Path) -> None:
    """The environment of a test that starts real daemons (they inherit it): the fake embedder, its own state dir,
    no watcher, an idle timeout that ends a leftover daemon, and no socket, version or debug override from outside."""
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    monkeypatch.setenv("LOCALIDX_HOME", str(home))
    monkeypatch.setenv("LOCALIDX_WATCH", "0")
    monkeypatch.setenv("LOCALIDX_DAEMON_IDLE_S", "300")  # a leftover daemon still goes away by itself
    for name in (lifecycle.SOCK_ENV, lifecycle.FAKE_VERSION_ENV, "LOCALIDX_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def daemon_like(root: Path, errors: dict | None = None, package_version: str = __version__):
    """A respond function: hello answers like a daemon for ``root``; methods in ``errors`` answer that error."""

    def respond(message, _line):
        if message is None:
            return protocol.error(None, protocol.ProtocolError(protocol.PARSE_ERROR, "bad"))
        method, id_ = message.get("method"), message.get("id")
        if method == "daemon/hello":
            return protocol.result(id_, {"protocol_version": protocol.PROTOCOL_VERSION, "pid": os.getpid(),
                                         "package_version": package_version, "root": str(root), "daemon": {}})
        if errors and method in errors:
            code, text = errors[method]
            return protocol.error(id_, protocol.ProtocolError(code, text))
        return protocol.result(id_, {"echo": message.get("params")})

    return respond
