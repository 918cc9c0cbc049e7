"""The daemon as users and programs meet it: real processes, a real socket, a real index (with the fake embedder).

Every daemon a test starts is stopped in teardown, and killed with SIGKILL if it does not go. Every socket operation
and subprocess has a timeout.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import AUTH_MODULE, AUTH_README, daemon_environment
from localidx import __version__, protocol
from localidx.config import load_settings
from localidx.daemon import lifecycle

AUTH = AUTH_MODULE
README = AUTH_README
TIMEOUT = 10.0  # per socket operation


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Daemons:
    """Runs the CLI in a work tree and remembers every daemon pid it saw, to stop them all at the end."""

    def __init__(self, root: Path):
        self.root = root
        self.pids: set[int] = set()
        # The environment the daemon was started with: later commands run with it too, as a user's shell would, so
        # their settings match the daemon's (a client with other settings restarts it: config.fingerprint).
        self.env: dict = {}

    def cli(self, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **self.env, **(env or {})})
        self.remember()
        return proc

    @property
    def paths(self) -> lifecycle.DaemonPaths:
        return lifecycle.daemon_paths(self.root, True, load_settings(self.root))

    def remember(self) -> None:
        status = lifecycle.read_status(self.paths.status)
        if status:
            self.pids.add(status["pid"])

    def start(self, env: dict | None = None) -> int:
        self.env = dict(env or {})
        proc = self.cli("daemon", "start")
        assert proc.returncode == 0, proc.stderr + proc.stdout
        pid = int(proc.stdout.split("pid ")[1].split(",")[0])
        self.pids.add(pid)
        return pid

    def ready(self) -> None:
        """Wait until the start-up reconcile has run (``localidx index`` through the daemon waits for a run)."""
        proc = self.cli("index", "--quiet")
        assert proc.returncode == 0, proc.stderr

    def raw(self) -> "Raw":
        return Raw(self.paths.socket)

    def teardown(self) -> None:
        self.remember()
        try:
            self.cli("daemon", "stop", timeout=60)
        except subprocess.TimeoutExpired:
            pass
        for pid in self.pids:
            if lifecycle.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


class Raw:
    """A bare socket speaking frames, for what the Client would never send."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> dict:
        line = self.reader.readline()
        assert line.endswith(b"\n"), f"no complete response: {line[:200]!r}"
        return json.loads(line)

    def ask(self, method: str, params: dict | None = None, id_=1) -> dict:
        self.send(protocol.encode(protocol.request(id_, method, params)))
        return self.recv()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture
def run_dir(monkeypatch):
    path = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def daemons(make_repo, tmp_path, monkeypatch, run_dir):
    """A committed repository and a Daemons helper for it; the environment is shared with daemons it starts."""
    daemon_environment(monkeypatch, tmp_path / "home")
    root = make_repo({"auth.py": AUTH, "README.md": README})
    helper = Daemons(root)
    try:
        yield helper
    finally:
        helper.teardown()


def search_over_socket(d: Daemons, query: str = "verify token") -> list[dict]:
    with d.raw() as raw:
        response = raw.ask("search/query", {"query": query, "k": 3})
    assert "result" in response, response
    return response["result"]["matches"]


def defined_names(matches: list[dict]) -> set[str]:
    """Every symbol the matches define: a merged chunk's ``symbols``, else its ``symbol``."""
    return {name for m in matches for name in (m["symbols"] or [m["symbol"]])}


# -- lifecycle ------------------------------------------------------------------------------------------------


def test_start_serves_hello_status_and_search_with_the_same_output_as_in_process(daemons):
    d = daemons
    pid = d.start()
    d.ready()
    status = lifecycle.read_status(d.paths.status)
    assert status["pid"] == pid and status["socket"] == str(d.paths.socket)
    assert status["protocol_version"] == protocol.PROTOCOL_VERSION and status["package_version"] == __version__
    with d.raw() as raw:
        hello = raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION, "client": "test"})["result"]
        assert hello["pid"] == pid and hello["root"] == str(d.root)
        assert hello["capabilities"] == sorted(protocol.METHODS)
        report = raw.ask("index/status", {}, id_="s")
        assert report["id"] == "s" and report["result"]["state"] == "READY"
        assert report["result"]["daemon"]["writer"]["state"] == "idle"
    assert "verify_token" in defined_names(search_over_socket(d))

    commands = [("search", "verify token"), ("search", "session expiry", "--json"), ("search", "-k", "1", "--kind",
                "function", "refresh"), ("status",), ("status", "--json")]
    through_daemon = [d.cli(*c) for c in commands]
    assert d.cli("daemon", "stop").returncode == 0
    in_process = [d.cli(*c) for c in commands]
    for command, a, b in zip(commands, through_daemon, in_process):
        assert a.returncode == b.returncode == 0, (command, a.stderr, b.stderr)
        assert a.stdout == b.stdout, command
    assert "auth.py:1-9  verify_token, refresh_session  " in through_daemon[0].stdout  # the two merged: both named


def test_searching_through_the_daemon_does_not_import_lancedb_in_the_cli(daemons):
    d = daemons
    d.start()
    d.ready()
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('LANCEDB=%s\\n' % ('lancedb' in sys.modules)))\n"
            "from localidx.interface.cli import main\n"
            "main(['search', 'verify token'])\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=d.root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "verify_token" in proc.stdout and "LANCEDB=False" in proc.stderr


def test_start_twice_finds_the_running_daemon_and_stop_removes_its_files(daemons):
    d = daemons
    pid = d.start()
    again = d.cli("daemon", "start")
    assert again.returncode == 0 and f"already running: pid {pid}" in again.stdout
    proc = d.cli("daemon", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["running"] and report["pid"] == pid and report["socket"] == str(d.paths.socket)
    assert report["package_version"] == __version__ and report["watcher"] == "off"
    human = d.cli("daemon", "status")
    assert human.returncode == 0 and human.stdout.startswith(f"running  pid {pid}")

    stopped = d.cli("daemon", "stop")
    assert stopped.returncode == 0 and f"daemon stopped (pid {pid})" in stopped.stdout
    assert not lifecycle.pid_alive(pid)
    assert not d.paths.status.exists() and not d.paths.socket.exists()
    after = d.cli("daemon", "status", "--json")
    assert after.returncode == 1 and json.loads(after.stdout)["running"] is False
    assert d.cli("daemon", "stop").stdout.strip() == "no daemon running"
    logs = d.cli("daemon", "logs", "-n", "5")
    assert logs.returncode == 0 and "stopped (daemon/stop)" in logs.stdout


def test_a_killed_daemon_is_cleaned_up_and_a_new_one_indexes_what_changed_meanwhile(daemons):
    d = daemons
    pid = d.start()
    d.ready()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not lifecycle.pid_alive(pid), 10, "the daemon to die")
    assert d.paths.status.exists() and d.paths.socket.exists()  # what a crash leaves
    (d.root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")
    (d.root / "README.md").unlink()

    proc = d.cli("daemon", "status")
    assert proc.returncode == 1 and f"not running (removed files left by pid {pid})" in proc.stdout
    assert not d.paths.status.exists() and not d.paths.socket.exists()

    new_pid = d.start()
    assert new_pid != pid
    d.ready()
    assert "billing.py" in [m["path"] for m in search_over_socket(d, "charge invoice")]
    assert all(m["path"] != "README.md" for m in search_over_socket(d, "auth service tokens"))


def test_start_after_a_crash_cleans_up_by_itself(daemons):
    d = daemons
    pid = d.start()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not lifecycle.pid_alive(pid), 10, "the daemon to die")
    new_pid = d.start()
    assert new_pid != pid and lifecycle.read_status(d.paths.status)["pid"] == new_pid


def test_socket_is_0600_in_a_0700_dir(daemons):
    d = daemons
    d.start()
    assert (os.stat(d.paths.socket).st_mode & 0o777) == 0o600
    assert (os.stat(d.paths.socket.parent).st_mode & 0o777) == 0o700
    assert (os.stat(d.paths.status).st_mode & 0o777) == 0o600


def test_a_world_writable_runtime_dir_is_refused(daemons, run_dir):
    d = daemons
    (run_dir / "localidx").mkdir()
    os.chmod(run_dir / "localidx", 0o777)
    proc = d.cli("daemon", "start")
    assert proc.returncode == 2 and "writable by others" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not d.paths.status.exists()
    assert d.cli("search", "verify token").returncode == 2  # no daemon, nothing indexed: the in-process answer


def test_localidx_sock_names_the_socket(daemons, run_dir):
    d = daemons
    sock = run_dir / "mine.sock"
    d.start(env={lifecycle.SOCK_ENV: str(sock)})
    assert sock.is_socket()
    assert d.cli("daemon", "status", env={lifecycle.SOCK_ENV: str(sock)}).returncode == 0
    assert d.cli("daemon", "stop", env={lifecycle.SOCK_ENV: str(sock)}).returncode == 0
    assert not sock.exists()


AUTO = {"LOCALIDX_DAEMON": "auto", "CI": ""}  # a user's shell: the setting's default, not under CI


def test_a_search_with_no_daemon_answers_and_starts_one_for_the_next(daemons):
    """The first search answers by itself and leaves a daemon starting in the background, which says so on stderr;
    the next search is answered by that daemon, with the same matches, and starts nothing."""
    d = daemons
    assert d.cli("index", "--quiet").returncode == 0
    env = {**AUTO, "LOCALIDX_DEBUG": "1"}  # the daemon logs each request it handles
    first = d.cli("search", "verify", "token", "--json", env=env)
    assert first.returncode == 0, first.stderr
    assert "started this work tree's daemon in the background" in first.stderr
    wait_for(lambda: json.loads(d.cli("daemon", "status", "--json").stdout)["state"] == "running", 60,
             "the daemon the search started")
    assert not handled(d, "search/query")
    second = d.cli("search", "verify", "token", "--json", env=env)
    assert second.returncode == 0 and second.stderr == ""
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert handled(d, "search/query") == 1
    status = d.cli("status", "--json", env=env)
    assert status.returncode == 0 and status.stderr == "" and handled(d, "index/status") == 1


def test_an_index_right_after_a_search_started_the_daemon_goes_through_it(daemons):
    """A search starts the daemon in the background; an `index` run at once finds it on its way up, holding the
    write lock: it waits for it and has it do the run, where it said "another indexer is running (pid N)"."""
    d = daemons
    assert d.cli("index", "--quiet").returncode == 0
    (d.root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")
    first = d.cli("search", "verify", "token", env=AUTO)
    assert "started this work tree's daemon in the background" in first.stderr, first.stderr
    again = d.cli("index", env=AUTO)
    assert again.returncode == 0 and "another indexer" not in again.stderr, again.stderr
    assert "indexing through the daemon" in again.stderr, again.stderr


def test_a_daemon_being_started_counts_as_running_and_only_its_starter_says_so(daemons):
    """Three searches at once start one daemon and only one of them says so; a stop right after a search that
    started one waits for it and stops it (it said 'no daemon running' while the daemon was still on its way up),
    and status agrees at every step; restart gives a new pid."""
    import concurrent.futures

    d = daemons
    assert d.cli("index", "--quiet").returncode == 0
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: d.cli("search", "verify", "token", env=AUTO), range(3)))
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert sum("started this work tree's daemon" in r.stderr for r in runs) == 1, [r.stderr for r in runs]
    status = json.loads(d.cli("daemon", "status", "--json").stdout)
    assert status["running"] and status["state"] in ("starting", "running"), status
    d.pids.add(status["pid"])
    stop = d.cli("daemon", "stop")
    assert stop.returncode == 0 and stop.stdout == f"daemon stopped (pid {status['pid']})\n", (status, stop.stdout)
    assert d.cli("daemon", "status").returncode == 1
    assert not lifecycle.pid_alive(status["pid"]), "the daemon outlived the stop"
    assert "started this work tree's daemon" in d.cli("search", "verify", "token", env=AUTO).stderr
    stop = d.cli("daemon", "stop")
    assert stop.stdout.startswith("daemon stopped (pid"), stop.stdout
    d.start()
    first = d.cli("daemon", "start")
    restarted = d.cli("daemon", "restart")
    assert restarted.returncode == 0, restarted.stderr
    old_pid = int(first.stdout.split("pid ")[1].split(",")[0])
    assert f"stopped pid {old_pid}," in restarted.stdout and f"pid {old_pid}, socket" not in restarted.stdout
    d.remember()


HEAVY = ("lancedb", "pyarrow", "numpy", "pandas", "tree_sitter", "onnxruntime", "tokenizers", "pygit2", "pathspec")
# Nor what only another command needs: the click CLI (localidx.interface.console answers without it), discovery's
# filters,
# starting a process, logging (nothing is logged on the way: localidx.lazylog).
NOT_NEEDED = ("click", "localidx.interface.cli", "localidx.discover.files", "subprocess", "logging")


def test_a_search_through_the_daemon_imports_nothing_heavy(daemons):
    """The client of a running daemon is thin: the search is the daemon's, and the command imports none of the
    libraries that do the work (each costs a short command more than its whole answer), nor click."""
    d = daemons
    d.start()
    d.ready()
    for args in (["verify", "token"], ["verify", "token", "--json", "-k", "3", "--mode=bm25"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "localidx", "search", *args],
                              cwd=d.root, capture_output=True, text=True, timeout=120, env={**os.environ, **d.env})
        assert proc.returncode == 0 and "auth.py" in proc.stdout, proc.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time")}
        assert "localidx.interface.client" in imported
        assert sorted(m for m in imported if m.split(".")[0] in HEAVY) == []
        assert sorted(m for m in imported if m in NOT_NEEDED or m.split(".")[0] in NOT_NEEDED) == []


CLICK_CLI = "import sys; from localidx.interface.cli import main; main(sys.argv[1:])"  # the CLI without the fast path


SEARCHES = [
    ["verify", "token"],
    ["how", "is", "a", "token", "verified", "--json"],
    ["verify", "-k", "1", "--mode", "bm25", "token"],
    ["token", "--files", "--path=*.py"],
    ["verify", "token", "--color", "always", "--lang", "python"],
    ["--kind=function", "verify"],
    ["xyzzyplugh"],  # nothing matches: exit 1
    ["verify", "--kind", "nonsense"],  # an unknown kind: exit 2, said by the CLI
    ["verify", "--path", "[", "--json"],  # a glob that matches nothing
    [" "],  # the daemon's error: an empty query
    ["verify", "-k", "0"],  # click's error
    ["verify", "-k3"],
    ["--help"],
]


def test_a_search_through_the_daemon_prints_what_the_click_cli_prints(daemons):
    """``localidx search`` answered without click (localidx.interface.entry) is byte for byte what the click command
    prints,
    with the same exit status, for plain, JSON, file and coloured output, and for every error."""
    d = daemons
    d.start()
    d.ready()
    env = {**os.environ, **d.env}
    for args in SEARCHES:
        fast = subprocess.run([sys.executable, "-m", "localidx", "search", *args], cwd=d.root, capture_output=True,
                              timeout=120, env=env)
        full = subprocess.run([sys.executable, "-c", CLICK_CLI, "search", *args], cwd=d.root, capture_output=True,
                              timeout=120, env=env)
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr), args
        assert fast.stdout or fast.stderr, args
    closed = []  # a reader that went away before the answer (`localidx search ... | head -0`): the same exit
    for command in ([sys.executable, "-m", "localidx"], [sys.executable, "-c", CLICK_CLI]):
        read, write = os.pipe()
        os.close(read)
        try:
            proc = subprocess.run([*command, "search", "verify", "token"], cwd=d.root, stdout=write,
                                  stderr=subprocess.PIPE, timeout=120, env=env)
        finally:
            os.close(write)
        closed.append((proc.returncode, proc.stderr))
    assert closed[0] == closed[1] == (1, b"")


def handled(d: Daemons, method: str) -> int:
    """How many ``method`` requests the daemon's debug log says it handled."""
    return sum(f" {method} handled in " in line for line in lifecycle.log_tail(d.paths.log, 2000))


@pytest.mark.parametrize("how", [("--no-daemon",), ("LOCALIDX_DAEMON=never",), ("CI=true",),
                                 ("LOCALIDX_DAEMON=running",)])
def test_no_daemon_is_started_when_told_not_to_or_under_ci(daemons, how):
    d = daemons
    assert d.cli("index", "--quiet").returncode == 0
    env = dict(AUTO, **dict(item.split("=", 1) for item in how if "=" in item))
    flags = [item for item in how if item.startswith("--")]
    proc = d.cli("search", "verify", "token", *flags, env=env)
    assert proc.returncode == 0 and "auth.py" in proc.stdout and proc.stderr == ""
    time.sleep(1.0)  # a daemon started in the background would have written its log by now
    assert not d.paths.log.exists() and d.cli("daemon", "status").returncode == 1


def test_no_daemon_keeps_the_work_in_this_process_while_a_daemon_runs(daemons):
    d = daemons
    d.start(env={"LOCALIDX_DEBUG": "1"})
    d.ready()
    proc = d.cli("search", "verify", "token", "--json", "--no-daemon", env=AUTO)
    assert proc.returncode == 0 and json.loads(proc.stdout)["matches"][0]["path"] == "auth.py"
    assert not handled(d, "search/query")
    assert d.cli("search", "verify", "token", env=AUTO).returncode == 0 and handled(d, "search/query") == 1
    # Indexing in this process while the daemon holds the index: the message names the daemon, not an "indexer".
    busy = d.cli("index", "--no-daemon")
    assert busy.returncode == 75 and busy.stderr.count("\n") == 1, busy.stderr
    assert "this work tree's daemon (pid" in busy.stderr and "without --no-daemon" in busy.stderr, busy.stderr


def test_chunks_goes_through_the_running_daemon_and_prints_what_it_prints_by_itself(daemons):
    d = daemons
    d.start(env={"LOCALIDX_DEBUG": "1"})
    (d.root / "sub").mkdir()
    (d.root / "sub" / "notes.md").write_text("# Notes\n\nHow tokens are checked.\n\n## Expiry\n\nTokens expire.\n")
    for args in (["auth.py"], ["auth.py", "README.md", "--json"], ["auth.py", "--max-tokens", "40"],
                 ["sub/notes.md", "auth.py", "--json", "--max-tokens", "64"]):
        before = handled(d, "chunks/show")
        through = d.cli("chunks", *args, env=AUTO)
        assert through.returncode == 0 and through.stderr == "" and through.stdout, through.stderr
        assert handled(d, "chunks/show") == before + len([a for a in args if "." in a])
        alone = d.cli("chunks", *args, "--no-daemon", env=AUTO)
        assert (alone.returncode, alone.stdout, alone.stderr) == (through.returncode, through.stdout, through.stderr)
    assert "auth.py:1-" in d.cli("chunks", "../" + d.root.name + "/auth.py", env=AUTO).stdout
    bad = d.cli("chunks", "auth.py", "--max-tokens", "5", env=AUTO)
    assert bad.returncode == 2 and bad.stderr.startswith("localidx: error: --max-tokens: max_tokens must be")


def test_index_goes_through_the_running_daemon(daemons):
    d = daemons
    d.start()
    (d.root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")
    proc = d.cli("index", "billing.py")
    assert proc.returncode == 0, proc.stderr
    assert "indexing through the daemon" in proc.stderr
    assert proc.stdout.startswith(f"indexed {d.root}: ")
    record = json.loads(d.cli("index", "--json").stdout)
    assert record["files_unchanged"] == 3 and record["chunks_pending"] == 0
    pid = lifecycle.read_status(d.paths.status)["pid"]
    rebuild = d.cli("index", "--rebuild")  # asked of the daemon, which holds the index: nobody has to stop it
    assert rebuild.returncode == 0 and "indexing through the daemon" in rebuild.stderr, rebuild.stderr
    assert "rebuilt: a new index replaced the old one" in rebuild.stdout, rebuild.stdout
    assert lifecycle.read_status(d.paths.status)["pid"] == pid
    assert "billing.py" in [m["path"] for m in search_over_socket(d, "charge invoice")]
    alone = d.cli("index", "--no-daemon")  # the idle daemon holds the write lock: said, with what to do
    assert alone.returncode == 75 and f"this work tree's daemon (pid {pid}) holds the index" in alone.stderr
    assert "without --no-daemon" in alone.stderr


def test_run_stays_in_the_foreground_and_stops_cleanly_on_sigterm(daemons):
    d = daemons
    proc = subprocess.Popen([sys.executable, "-m", "localidx", "daemon", "run"], cwd=d.root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    d.pids.add(proc.pid)
    try:
        wait_for(lambda: lifecycle.read_status(d.paths.status), 60, "the foreground daemon to listen")
        assert lifecycle.read_status(d.paths.status)["pid"] == proc.pid
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "listening on" in err and "stopped (SIGTERM)" in err  # the log goes to stderr too
    assert not d.paths.status.exists() and not d.paths.socket.exists()


def test_a_daemon_that_cannot_start_says_why_in_one_line(daemons):
    proc = daemons.cli("daemon", "start", env={"LOCALIDX_EMBED_MODEL": "no/such-model", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not start: unknown embedding model 'no/such-model'" in lines[0]


def test_idle_daemon_stops_by_itself(daemons):
    d = daemons
    pid = d.start(env={"LOCALIDX_DAEMON_IDLE_S": "1"})
    wait_for(lambda: not lifecycle.pid_alive(pid), 30, "the idle daemon to stop")
    assert not d.paths.status.exists() and not d.paths.socket.exists()
    assert "idle for 1 s" in d.cli("daemon", "logs").stdout


def test_a_daemon_whose_work_tree_is_deleted_stops_by_itself(daemons):
    import shutil

    d = daemons
    pid = d.start()
    log_path = d.paths.log
    shutil.rmtree(d.root)
    try:
        wait_for(lambda: not lifecycle.pid_alive(pid), 30, "the daemon of a deleted work tree to stop")
        assert "was deleted" in log_path.read_text()
    finally:
        d.root.mkdir()  # the teardown's `daemon stop` runs there


def test_a_second_home_gets_a_daemon_of_its_own_and_leaves_the_first_running(daemons, tmp_path):
    d = daemons
    pid = d.start()
    other = {"LOCALIDX_HOME": str(tmp_path / "other-home")}
    assert d.cli("index", "--quiet", env=other).returncode == 0
    second = d.cli("daemon", "start", env=other)
    assert second.returncode == 0, second.stderr
    other_pid = int(second.stdout.split("pid ")[1].split(",")[0])
    d.pids.add(other_pid)
    assert other_pid != pid and lifecycle.pid_alive(pid), "the first home's daemon was stopped"
    found = d.cli("search", "verify", "token", "--json", env=other)
    assert found.returncode == 0 and "restarting" not in found.stderr, found.stderr
    assert lifecycle.pid_alive(pid)
    assert d.cli("daemon", "stop", env=other).stdout == f"daemon stopped (pid {other_pid})\n"
    assert lifecycle.pid_alive(pid)


def test_at_most_daemon_max_running_run_and_daemon_list_shows_them(daemons, make_repo):
    """A second work tree's daemon, with at most one allowed, stops the first (idle) one; `daemon list` shows what
    runs, and looking at it is no activity that keeps a daemon up."""
    d = daemons
    first = d.start()
    d.ready()  # idle: a daemon busy with its start-up pass is never the one stopped
    listed = json.loads(d.cli("daemon", "list", "--json").stdout)["daemons"]
    assert [x["pid"] for x in listed] == [first] and listed[0]["root"] == str(d.root.resolve())
    assert listed[0]["memory"]["rss_mb"] > 0 and listed[0]["idle_s"] >= 0
    other = make_repo({"notes.py": "def other():\n    return 1\n"}, name="other")
    started = subprocess.run([sys.executable, "-m", "localidx", "daemon", "start"], cwd=other, capture_output=True,
                             text=True, timeout=120, env={**os.environ, "LOCALIDX_DAEMON_MAX_RUNNING": "1"})
    assert started.returncode == 0, started.stderr
    second = int(started.stdout.split("pid ")[1].split(",")[0])
    d.pids.add(second)
    try:
        wait_for(lambda: not lifecycle.pid_alive(first), 40, "the idle daemon to make room")
        listed = json.loads(d.cli("daemon", "list", "--json").stdout)["daemons"]
        assert [x["pid"] for x in listed] == [second]
        human = d.cli("daemon", "list").stdout
        assert str(second) in human and str(other.resolve()) in human and " MB " in human
    finally:
        subprocess.run([sys.executable, "-m", "localidx", "daemon", "stop"], cwd=other, capture_output=True,
                       timeout=120)


# -- versions -------------------------------------------------------------------------------------------------


def test_hello_with_another_version_answers_version_mismatch(daemons):
    d = daemons
    d.start()
    with d.raw() as raw:
        other_protocol = raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION + 1})
        assert other_protocol["error"]["code"] == protocol.VERSION_MISMATCH
        assert other_protocol["error"]["data"]["protocol_version"] == protocol.PROTOCOL_VERSION
        other_package = raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION,
                                                 "package_version": "0.0.0-elsewhere"}, id_=2)
        assert other_package["id"] == 2 and other_package["error"]["code"] == protocol.VERSION_MISMATCH
        assert "restart" in other_package["error"]["message"]


def test_connect_restarts_a_daemon_of_another_package_version_once(daemons):
    from localidx.interface.client import connect

    d = daemons
    old_pid = d.start(env={lifecycle.FAKE_VERSION_ENV: "0.0.1-old"})
    assert lifecycle.read_status(d.paths.status)["package_version"] == "0.0.1-old"
    with connect(d.root, True, load_settings(d.root)) as client:
        d.pids.add(client.hello["pid"])
        assert client.hello["package_version"] == __version__ and client.hello["pid"] != old_pid
        assert client.request("index/status", {"check_work_tree": False})["daemon"]["pid"] == client.hello["pid"]
    assert not lifecycle.pid_alive(old_pid)


def test_queries_and_new_writes_do_not_wait_for_an_embedding_backlog(daemons):
    d = daemons
    for n in range(520):  # over two embedding batches (256 rows each), about 10 s at the delay below
        (d.root / "pkg").mkdir(exist_ok=True)
        (d.root / "pkg" / f"mod{n:03}.py").write_text(
            f"def handler_{n}(request):\n    \"\"\"Serve request kind {n}.\"\"\"\n    return request.kind == {n}\n")
    d.start(env={"LOCALIDX_FAKE_EMBED_DELAY": "0.02"})

    def writer_state() -> dict:
        with d.raw() as raw:
            return raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION})["result"]["daemon"]["writer"]

    wait_for(lambda: writer_state()["state"] == "embed", 60, "the writer to embed its backlog")
    (d.root / "late.py").write_text("def reconcile_ledger_entries(ledger):\n    return ledger.balance()\n")
    with d.raw() as raw:
        started = time.monotonic()
        assert "result" in raw.ask("search/query", {"query": "serve request kind 7", "k": 1})
        assert time.monotonic() - started < 3  # a reader never waits for the writer's batch (about 5 s)
        assert raw.ask("index/reindex", {"paths": ["late.py"], "reason": "test"})["result"] == {
            "queued": 1, "full": False}

    def late_found():
        with d.raw() as raw:
            found = raw.ask("search/query", {"query": "reconcile ledger entries", "mode": "bm25", "k": 3})
        return any(m["path"] == "late.py" for m in found["result"]["matches"])

    wait_for(late_found, 30, "the late file to be searchable")
    with d.raw() as raw:
        report = raw.ask("index/status", {"check_work_tree": False})["result"]
    assert report["chunks_with_vectors"] < report["chunks"]  # written ahead of the backlog, which is not done yet
    assert report["state"] == "INDEXING"


# -- robustness -----------------------------------------------------------------------------------------------


def _valid_frames() -> list[dict]:
    return [
        protocol.request(1, "daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION}),
        protocol.request(2, "index/status", {"check_work_tree": False}),
        protocol.request(3, "search/query", {"query": "verify token", "k": 2}),
        protocol.request("four", "search/query", {"query": "session", "mode": "bm25", "lang": "python"}),
        protocol.request(5, "index/reindex", {"paths": [], "reason": "fuzz"}),
    ]


def _mutate(rng: random.Random) -> bytes:
    """One line the daemon must answer: a valid frame bent out of shape, random bytes, or a known nasty case."""
    base = rng.choice(_valid_frames())
    if rng.random() < 0.1:
        return json.dumps(base).encode()  # valid frames in between: answers must stay in step
    roll = rng.random()
    if roll < 0.25:
        text = bytearray(json.dumps(base).encode())
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text))
            op = rng.random()
            if op < 0.4:
                del text[at]
            elif op < 0.7:
                text[at] = rng.randrange(256)
            else:
                text.insert(at, rng.choice(b'{}[]":,\\0aZ\xff'))
        data = bytes(text)
    elif roll < 0.4:
        data = rng.randbytes(rng.randint(1, 300))
    elif roll < 0.55:
        message = json.loads(json.dumps(base))
        key = rng.choice(["id", "method", "params"])
        message[key] = rng.choice([None, True, 1.5, -(10**30), [], {}, "x" * 200, {"a": [1]}, "nope/never"])
        data = json.dumps(message).encode()
    elif roll < 0.7:
        message = json.loads(json.dumps(base))
        params = message["params"]
        params[rng.choice(["k", "query", "paths", "protocol_version", "extra", "\ud800"])] = rng.choice(
            [0, 10**40, "", "q" * 5000, ["../../etc/passwd"], [1, 2], None, {"deep": {}}, "\udc80"])
        data = json.dumps(message).encode()
    elif roll < 0.8:
        depth = rng.choice([10, 1000, 100_000])
        data = rng.choice([b"[" * depth + b"]" * depth, b'{"id":1,"method":"search/query","params":' +
                           b'{"a":' * depth + b"1" + b"}" * depth + b"}"])
    elif roll < 0.9:
        message = json.loads(json.dumps(base))
        message[rng.choice(["jsonrpc", "extra", "ID"])] = "2.0"
        data = json.dumps(message).encode()
    else:
        data = rng.choice([b'{"id": ' + b"7" * 5000 + b"}", b"null", b"[]", b'"hello"', b"1e999", b"NaN",
                           json.dumps({"id": "\ud800", "method": "daemon/\udfff"}).encode(), b"\x00" * 10])
    data = data.replace(b"\n", b" ")
    return data if data.strip() else b"x"


def _check(frame: bytes, response: dict) -> None:
    assert set(response) in ({"id", "result"}, {"id", "error"}), response
    try:
        sent = json.loads(frame)
    except (ValueError, RecursionError):
        sent = None
    sent_id = sent.get("id") if isinstance(sent, dict) else None
    if "error" in response:
        assert response["error"]["code"] in protocol.ERROR_NAMES and response["error"]["message"]
        assert "\n" not in response["error"]["message"]
        if sent is None:
            assert response["id"] is None
    if response["id"] is not None:
        assert response["id"] == sent_id


def test_fuzzed_frames_each_get_one_answer_and_the_daemon_survives(daemons):
    d = daemons
    pid = d.start()
    d.ready()
    rng = random.Random(20240617)
    with d.raw() as raw:
        for _ in range(500):
            frame = _mutate(rng)
            raw.send(frame + b"\n")
            _check(frame, raw.recv())
        # Oversize, with and without a JSON start; the rest of the line is discarded and the connection still works.
        for head in (b"", b'{"id": 9, "method": "daemon/hello", "params": {"client": "'):
            raw.send(head + b"a" * (protocol.MAX_FRAME_BYTES + 100) + b"\n")
            response = raw.recv()
            assert response["id"] is None and response["error"]["code"] == protocol.PARSE_ERROR
        # Pipelined: answers come back in order.
        frames = [protocol.request(i, "daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION}) for i in range(20)]
        raw.send(b"".join(protocol.encode(f) for f in frames))
        assert [raw.recv()["id"] for _ in frames] == list(range(20))
        raw.send(b"\n   \n")  # blank lines are not frames: no answer, and the next frame is answered
        assert raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION}, id_=77)["id"] == 77
    for _ in range(100):
        frame = _mutate(rng)
        with d.raw() as raw:
            raw.send(frame + b"\n")
            _check(frame, raw.recv())
    assert lifecycle.pid_alive(pid)
    assert "verify_token" in defined_names(search_over_socket(d))


def test_clients_that_go_away_mid_request_do_not_hurt_the_daemon(daemons):
    d = daemons
    pid = d.start()
    d.ready()
    search = protocol.encode(protocol.request(1, "search/query", {"query": "verify token"}))
    for k in range(20):
        raw = d.raw()
        raw.send(search[: 1 + k * len(search) // 20])  # half a frame, then gone
        raw.close()
        raw = d.raw()
        raw.send(search)  # a whole request, gone before the answer
        raw.close()
    raw = d.raw()
    raw.send(protocol.encode(protocol.request(2, "index/reindex", {"wait": True})))
    raw.close()
    d.raw().close()  # connected, never a word
    with d.raw() as raw:
        raw.send(search[:-1])  # no newline, but the client half-closes: the last line still counts as a frame
        raw.sock.shutdown(socket.SHUT_WR)
        assert raw.recv()["id"] == 1
    assert lifecycle.pid_alive(pid)
    assert "verify_token" in defined_names(search_over_socket(d))


def test_a_request_for_a_path_outside_the_work_tree_is_a_usage_error(daemons):
    d = daemons
    d.start()
    with d.raw() as raw:
        response = raw.ask("index/reindex", {"paths": ["../elsewhere.py"], "wait": True})
        assert response["error"]["code"] == protocol.USAGE_ERROR and "outside" in response["error"]["message"]
        response = raw.ask("search/query", {"query": "x", "kind": "gadget"}, id_=2)
        assert response["error"]["code"] == protocol.USAGE_ERROR and "unknown kind" in response["error"]["message"]
        for id_, outside in enumerate(["../elsewhere.py", "/etc/hostname", "a/../../elsewhere.py"], 3):
            response = raw.ask("chunks/show", {"paths": [outside]}, id_=id_)
            assert response["error"]["code"] == protocol.USAGE_ERROR and "outside" in response["error"]["message"]


def test_an_index_of_nothing_answers_that_there_was_nothing_to_index(make_repo, daemons):
    d = daemons
    d.root = make_repo({"logo.png": b"\x89PNG\r\n\x1a\n\x00\x00"}, name="empty")
    d.start()
    d.ready()
    said = "0 files to index (1 binary): nothing here for localidx to search"
    with d.raw() as raw:
        found = raw.ask("search/query", {"query": "anything"})["result"]
        assert found["matches"] == [] and found["noResultsReason"] == "NOTHING_TO_INDEX" and said in found["warnings"]
        pack = raw.ask("context/build", {"query": "anything"}, id_=2)["result"]  # what the MCP tools answer from
        assert pack["noResults"] and pack["noResultsReason"] == "NOTHING_TO_INDEX" and said in pack["warnings"]
    through_daemon = d.cli("search", "anything")
    status = d.cli("status")
    d.teardown()
    in_process = d.cli("search", "anything", "--no-daemon")
    assert through_daemon.returncode == in_process.returncode == 1  # README: the command ran and nothing matched
    assert through_daemon.stderr == in_process.stderr and said in in_process.stderr
    assert status.returncode == 1 and said in status.stdout and "run `localidx index`" not in status.stdout


# -- the routing table and error mapping, in-process ---------------------------------------------------------


def test_every_protocol_method_has_its_own_handler_module_and_no_more():
    from localidx.daemon.routes import ROUTES

    assert set(ROUTES) == set(protocol.METHODS)
    for method, handler in ROUTES.items():
        assert handler.__module__.startswith("localidx.daemon.handlers.") and handler.__name__ == "handle"
    assert len({handler.__module__ for handler in ROUTES.values()}) == len(ROUTES)


class _Writer:
    busy = False

    def describe(self):
        return {}


def _bare_daemon(tmp_path):
    from localidx.daemon.server import Daemon

    root = tmp_path
    settings = load_settings(None)
    paths = lifecycle.DaemonPaths(root=root, state=tmp_path, worktree=tmp_path, worktree_key="k",
                                  socket=tmp_path / "s.sock")
    embedder = type("E", (), {"model_id": "fake", "dim": 4})()
    return Daemon(root, False, settings, paths, None, embedder, _Writer())


def test_handler_exceptions_become_error_responses(tmp_path, monkeypatch):
    from localidx.daemon import routes
    from localidx.errors import UsageError
    from localidx.retrieve import IndexNotReady

    daemon = _bare_daemon(tmp_path)

    def raiser(exc):
        def handle(_daemon, _params):
            raise exc
        return handle

    cases = [(RuntimeError("boom\nsecond line"), protocol.INTERNAL_ERROR, "RuntimeError: boom"),
             (IndexNotReady("run localidx index"), protocol.INDEX_NOT_READY, "run localidx index"),
             (UsageError("empty query"), protocol.USAGE_ERROR, "empty query"),
             (KeyError("k"), protocol.INTERNAL_ERROR, "KeyError: 'k'")]
    for exc, code, message in cases:
        monkeypatch.setitem(routes.ROUTES, "index/status", raiser(exc))
        response = daemon.handle_frame(protocol.encode(protocol.request(5, "index/status")))
        assert response == {"id": 5, "error": {"code": code, "message": message}}
    daemon.request_stop("test")
    assert daemon.handle_frame(protocol.encode(protocol.request(6, "index/status")))["error"]["code"] == \
        protocol.SHUTTING_DOWN


# -- the watcher ----------------------------------------------------------------------------------------------


def test_an_editor_style_atomic_save_is_picked_up_by_the_watcher(daemons):
    pytest.importorskip("localidx.discover.watch")
    d = daemons
    d.start(env={"LOCALIDX_WATCH": "1", "LOCALIDX_WATCH_DEBOUNCE_S": "0.1"})
    d.ready()
    with d.raw() as raw:
        assert raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION})["result"]["daemon"]["watcher"] in (
            "inotify", "polling", "native")
    temp = d.root / ".auth.py.swp~"
    temp.write_text(AUTH + "\n\ndef rotate_signing_keys(keyring):\n    return keyring.rotate()\n")
    os.replace(temp, d.root / "auth.py")

    def found():
        return any("def rotate_signing_keys" in m["text"] for m in search_over_socket(d, "rotate signing keys"))

    wait_for(found, 30, "the watcher's change to be indexed")


def test_a_search_while_an_update_is_pending_says_so(daemons):
    """A save the watcher is still gathering (a long quiet time here) is not searchable yet: the search says so,
    in JSON and on stderr, and once the update is in the warning is gone."""
    pytest.importorskip("localidx.discover.watch")
    d = daemons
    d.start(env={"LOCALIDX_WATCH": "1", "LOCALIDX_WATCH_DEBOUNCE_S": "8"})
    d.ready()
    quiet = d.cli("search", "verify", "token", "--json")
    assert "updatePending" not in json.loads(quiet.stdout)
    (d.root / "auth.py").write_text(AUTH + "\n\ndef rotate_signing_keys(keyring):\n    return keyring.rotate()\n")
    time.sleep(0.5)
    pending = d.cli("search", "rotate", "signing", "keys", "--json")
    answer = json.loads(pending.stdout)
    assert answer["updatePending"] is True and any("update of the index is pending" in w for w in answer["warnings"])
    plain = d.cli("search", "verify", "token")
    assert "update of the index is pending" in plain.stderr
    wait_for(lambda: any("def rotate_signing_keys" in m["text"] for m in search_over_socket(d, "rotate signing keys")),
             60, "the change to be indexed")
    assert "updatePending" not in json.loads(d.cli("search", "verify", "token", "--json").stdout)


# -- many clients, large responses, the idle release, subscriptions ------------------------------------------


LOAD_THREADS = 60  # well under the 150 idle connections a thread-per-connection daemon would hold


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def hello_daemon(d: Daemons) -> dict:
    with d.raw() as raw:
        return raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION})["result"]["daemon"]


def read_until_id(raw: Raw, id_) -> tuple[dict, list[dict]]:
    """Frames until the response with ``id_``; the notifications met on the way."""
    notes = []
    while True:
        frame = raw.recv()
        if "id" in frame and frame["id"] == id_:
            return frame, notes
        assert "id" not in frame and frame["method"] == "index/progress", frame
        notes.append(frame["params"])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="counts threads through /proc")
def test_200_clients_at_once_are_all_answered_and_idle_clients_hold_no_thread(daemons):
    from concurrent.futures import ThreadPoolExecutor

    from localidx.interface.client import connect

    d = daemons
    pid = d.start()
    d.ready()
    search = {"query": "verify token", "k": 1}
    expected = d.raw().ask("search/query", search)["result"]  # the request threads exist from here on
    base = threads_of(pid)
    idle = []
    for _ in range(150):  # half a frame each, then silence: a thread per connection would be 150 threads
        raw = d.raw()
        raw.send(b'{"id": 1, "method": "search/que')
        idle.append(raw)
    clients = [d.raw() for _ in range(200)]
    for n, raw in enumerate(clients):
        raw.send(protocol.encode(protocol.request(n, "search/query", search)))
    answers = [raw.recv() for raw in clients]
    assert [a["id"] for a in answers] == list(range(200))
    assert all(a.get("result") == expected for a in answers)
    # Bounded: the request workers, plus the pools LanceDB grows on demand under load (seen: up to 15 more
    # threads on a 2-core machine); not one per connection, which would add at least the 150 idle ones.
    assert threads_of(pid) - base < LOAD_THREADS, threads_of(pid) - base
    for raw in clients:
        raw.close()

    def through_the_client(_n):  # the project's own client, 200 at once, each its own connection
        with connect(d.root, True, load_settings(d.root), timeout=60) as client:
            return client.request("search/query", search, timeout=60)

    with ThreadPoolExecutor(200) as pool:
        assert all(answer == expected for answer in pool.map(through_the_client, range(200)))
    assert threads_of(pid) - base < LOAD_THREADS, threads_of(pid) - base
    raw = idle[0]
    raw.send(b'ry", "params": {"query": "verify token", "k": 1}}\n')  # the half frame, finished much later
    assert raw.recv()["result"] == expected
    for raw in idle:
        raw.close()
    assert lifecycle.pid_alive(pid)


def test_past_the_connection_cap_a_client_is_told_so_and_the_client_waits_for_a_free_slot(daemons):
    import threading

    from localidx.interface.client import connect

    d = daemons
    d.start(env={"LOCALIDX_DAEMON_MAX_CONNECTIONS": "8"})
    d.ready()  # the start-up pass is over: the status asked below is READY, not INDEXING, on a loaded machine too
    held = [d.raw() for _ in range(8)]
    for n, raw in enumerate(held):
        assert raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION}, id_=n)["id"] == n
    with d.raw() as extra:
        refused = extra.recv()
        assert refused["id"] is None and refused["error"]["code"] == protocol.OVERLOADED
        assert "try again" in refused["error"]["message"]
        assert extra.reader.readline() == b""  # and closed
    got: list = []

    def connect_when_free():
        with connect(d.root, True, load_settings(d.root, {"daemon_max_connections": 8}), timeout=30) as client:
            got.append(client.request("index/status", {"check_work_tree": False})["state"])

    waiting = threading.Thread(target=connect_when_free)
    waiting.start()
    time.sleep(1.0)
    assert not got  # still waiting for a slot
    held.pop().close()
    waiting.join(30)
    assert got == ["READY"]
    for raw in held:
        raw.close()
    assert hello_daemon(d)["connections"]["refused"] >= 2


def test_a_response_over_the_frame_limit_is_delivered_to_a_client_that_asked_for_it(daemons):
    d = daemons
    d.start()
    d.ready()
    deep = d.root / ("d" * 100)
    deep.mkdir()
    for n in range(6000):  # not indexed (no watcher): index/status lists each as changed, over 1 MiB of paths
        (deep / f"{n:05}_{'x' * 110}.txt").write_text("x\n")
    with d.raw() as raw:
        too_large = raw.ask("index/status", {})
        assert too_large["id"] == 1 and too_large["error"]["code"] == protocol.RESPONSE_TOO_LARGE
        assert too_large["error"]["data"]["bytes"] > protocol.MAX_FRAME_BYTES
        assert "max_frame_bytes" in too_large["error"]["message"]
        hello = raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION,
                                         "max_frame_bytes": 64 * 1024 * 1024}, id_=2)
        assert hello["result"]["max_frame_bytes"] == 64 * 1024 * 1024
        report = raw.ask("index/status", {}, id_=3)["result"]
        assert len(report["changed_files"]) == 6000
    proc = d.cli("status", "--json")  # the project's client raises its limit by itself
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["changed_files"]) == 6000


def test_the_idle_release_drops_the_index_caches_keeps_a_small_model_and_the_next_query_answers(daemons):
    d = daemons
    d.start(env={"LOCALIDX_DAEMON_RELEASE_S": "1"})
    d.ready()
    released = wait_for(lambda: (lambda m: m if m["released"] else None)(hello_daemon(d)["memory"]), 30,
                        "the idle release")
    # The fake model costs nothing to hold: it stays loaded, and the next query does not load it again.
    assert released["model_loaded"] is True and released["model_loads"] == 1 and released["releases"] >= 1
    assert "released the index caches after" in d.cli("daemon", "logs").stdout
    assert any("verify_token" in m["symbol"].split(", ") for m in search_over_socket(d))  # opens the index again
    after = hello_daemon(d)["memory"]
    assert after["model_loaded"] is True and after["model_loads"] == 1 and not after["released"]
    (d.root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")
    wait_for(lambda: hello_daemon(d)["memory"]["released"], 30, "a second release")
    with d.raw() as raw:  # the writer opens its index again for the run
        record = raw.ask("index/reindex", {"paths": ["billing.py"], "wait": True})["result"]
    assert record["files_processed"] == 1
    assert "billing.py" in [m["path"] for m in search_over_socket(d, "charge invoice")]


def test_the_idle_release_drops_a_model_that_costs_more_than_the_limit(daemons):
    d = daemons
    d.start(env={"LOCALIDX_DAEMON_RELEASE_S": "1", "LOCALIDX_FAKE_MODEL_MB": "300"})
    d.ready()
    released = wait_for(lambda: (lambda m: m if m["released"] else None)(hello_daemon(d)["memory"]), 30,
                        "the idle release")
    assert released["model_loaded"] is False and released["model_mb"] > 100
    assert "released the index caches and the model" in d.cli("daemon", "logs").stdout
    assert any("verify_token" in m["symbol"].split(", ") for m in search_over_socket(d))  # loads it again
    after = hello_daemon(d)["memory"]
    assert after["model_loaded"] is True and after["model_loads"] == 2


def test_an_idle_daemon_gives_freed_memory_back(daemons):
    d = daemons
    d.start(env={"LOCALIDX_DAEMON_RELEASE_S": "0"})
    d.ready()
    from localidx.daemon.server import TRIM_AFTER_S

    before = hello_daemon(d)["memory"]["trims"]
    assert search_over_socket(d)
    for _ in range(10):  # a hello is a request too: ask only after a quiet spell longer than the trim's
        time.sleep(TRIM_AFTER_S + 1.0)
        if hello_daemon(d)["memory"]["trims"] > before:
            break
    else:
        raise AssertionError("no idle trim after a query")


def test_a_subscriber_hears_about_runs_and_does_not_keep_the_daemon_up(daemons):
    d = daemons
    pid = d.start(env={"LOCALIDX_DAEMON_IDLE_S": "6"})
    d.ready()
    with d.raw() as sub:
        first = sub.ask("daemon/subscribe", {"interval_ms": 50})["result"]
        assert first["subscribed"] is True and first["status"]["state"] == "READY"
        chunks = first["status"]["chunks"]
        (d.root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")
        with d.raw() as other:
            assert other.ask("index/reindex", {"paths": ["billing.py"], "wait": True})["result"][
                "files_processed"] == 1
        notes = []
        while not notes or notes[-1]["state"] != "READY" or notes[-1]["chunks"] == chunks:
            frame = sub.recv()
            assert "id" not in frame and frame["method"] == "index/progress", frame
            notes.append(frame["params"])
        states = [n["state"] for n in notes]
        assert "INDEXING" in states and states[-1] == "READY"
        assert [n["seq"] for n in notes] == sorted(n["seq"] for n in notes)
        sub.send(protocol.encode(protocol.request(5, "index/status", {"check_work_tree": False})))
        answer, _ = read_until_id(sub, 5)  # answers and notifications share the connection, told apart by id
        assert answer["result"]["chunks"] > chunks
        # Only notifications from here on: the daemon idles out while the subscriber stays connected, and its last
        # notification says why.
        wait_for(lambda: not lifecycle.pid_alive(pid), 60, "the idle daemon to stop with a subscriber connected")
        last = None
        while True:
            line = sub.reader.readline()
            if not line:
                break
            last = json.loads(line)
        assert last is not None and last["params"]["stopping"] == "idle for 6 s"
    assert "idle for 6 s" in d.cli("daemon", "logs").stdout


def test_an_edited_config_restarts_the_daemon_once_with_the_new_settings(daemons):
    """A daemon keeps the settings it started with; the first client whose settings differ (here an edited
    .localidx.toml) has it restarted, and the new daemon runs with the file as it is now."""
    from localidx.interface.client import connect

    d = daemons
    old_pid = d.start()
    assert hello_daemon(d)["release_after_s"] == 300
    (d.root / ".localidx.toml").write_text("daemon_release_s = 120\n")
    with connect(d.root, True, load_settings(d.root)) as client:
        d.pids.add(client.hello["pid"])
        assert client.hello["pid"] != old_pid and client.hello["daemon"]["release_after_s"] == 120
    assert not lifecycle.pid_alive(old_pid)
    with connect(d.root, True, load_settings(d.root)) as client:  # the same settings: the same daemon
        assert client.hello["pid"] == lifecycle.read_status(d.paths.status)["pid"]
    with d.raw() as raw:
        stale = raw.ask("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION,
                                         "settings_fingerprint": "0" * 16})
        assert stale["error"]["code"] == protocol.VERSION_MISMATCH and "settings" in stale["error"]["message"]


def test_a_client_of_other_settings_is_answered_without_stopping_the_daemon(daemons):
    """Two shells, one with an LLM model set: both are served by the same daemon. A shell with another idle release
    time (its own environment: no settings file changed) is answered in its own process, says so in one line naming
    the setting, and leaves the daemon running; `daemon restart` switches it."""
    d = daemons
    pid = d.start()
    d.ready()
    for env in ({"LOCALIDX_LLM_MODEL": "x", "LOCALIDX_LLM_BASE_URL": "http://127.0.0.1:9/v1"}, {}):
        proc = d.cli("search", "verify token", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "restarting" not in proc.stderr and "in this process" not in proc.stderr
        assert lifecycle.read_status(d.paths.status)["pid"] == pid
    other = {"LOCALIDX_DAEMON_RELEASE_S": "120"}
    proc = d.cli("search", "verify token", env=other)
    assert proc.returncode == 0 and "verify_token" in proc.stdout, proc.stderr
    assert proc.stderr.splitlines() == [
        "localidx: answering in this process: this work tree's daemon runs with other settings than this command's "
        "(daemon_release_s); `localidx daemon restart` switches it to them"], proc.stderr
    assert lifecycle.read_status(d.paths.status)["pid"] == pid and lifecycle.pid_alive(pid)
    assert "other settings" in d.paths.log.read_text()
    restarted = d.cli("daemon", "restart", env=other)
    d.remember()
    assert restarted.returncode == 0, restarted.stderr
    assert lifecycle.read_status(d.paths.status)["pid"] != pid
    again = d.cli("search", "verify token", env=other)
    assert again.returncode == 0 and "in this process" not in again.stderr, again.stderr


def test_a_reindex_that_waited_is_over_when_it_answers(daemons):
    """The answer to a waiting index/reindex comes after the writer stopped running: the status asked next says
    READY, not INDEXING (the VS Code integration test found the reply sent while the run still counted as running)."""
    from localidx.interface.client import connect

    d = daemons
    d.start()
    d.ready()
    for n in range(5):
        (d.root / "auth.py").write_text(AUTH + f"\n\ndef helper_{n}():\n    return {n}\n")
        with connect(d.root, True, load_settings(d.root)) as client:
            client.request("index/reindex", {"paths": ["auth.py"], "reason": "test", "wait": True}, timeout=120)
            assert client.request("index/status", {"check_work_tree": True})["state"] == "READY"
