"""The backend layer as its callers meet it: one call per operation, answered by the work tree's daemon or worked out
in this process as the caller's policy says, with the same answers either way. A real git repository, a real daemon
process over a real socket (the fake embedder), and a scripted server where a daemon has to misbehave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import AUTH_MODULE, AUTH_README, ScriptedServer, daemon_environment, daemon_like
from localidx import __version__
from localidx.config import load_settings
from localidx.daemon import lifecycle
from localidx.errors import ConfigError, UsageError
from localidx.interface.backend import Backend
from localidx.interface.client import probe, stop_daemon



@pytest.fixture
def repo(make_repo, tmp_path, monkeypatch):
    """A committed repository with its own state dir and runtime dir; any daemon started for it is stopped after."""
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    daemon_environment(monkeypatch, tmp_path / "home")
    root = make_repo({"auth.py": AUTH_MODULE, "README.md": AUTH_README})
    pids: set[int] = set()
    yield root, pids
    paths = lifecycle.daemon_paths(root, True, load_settings(root))
    status = lifecycle.read_status(paths.status)
    if status:
        pids.add(status["pid"])
    try:
        stop_daemon(paths, timeout=30)
    except Exception:  # noqa: BLE001 - killed below
        pass
    for pid in pids:
        if lifecycle.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def backend(root: Path, daemon: str) -> Backend:
    return Backend(root, True, load_settings(root), daemon=daemon)


def plain(value: dict) -> dict:
    """As it reads after the trip through the socket (tuples are lists)."""
    return json.loads(json.dumps(value))


def test_without_a_daemon_the_cli_policy_works_in_process_and_starts_nothing(repo):
    root, _pids = repo
    here = backend(root, "running")
    record = here.index()
    assert here.via == "in-process" and record["files_processed"] == 2 and record["chunks_pending"] == 0
    found = here.search("verify token", k=3)
    assert here.via == "in-process" and found["matches"][0]["path"] == "auth.py"
    assert "verify_token" in found["matches"][0]["text"]
    pack = here.context("how is a session token verified?")
    assert here.via == "in-process" and "auth.py" in pack["augmentedPrompt"]
    assert here.status()["state"] == "READY"
    assert probe(root, True, load_settings(root)).state == "stopped"


def test_a_running_daemon_answers_the_same_calls_with_the_same_answers(repo):
    root, pids = repo
    here = backend(root, "running")
    here.index(progress=None)
    before = {"search": plain(here.search("verify token", k=3)),
              "files": plain(here.search("session expiry", k=2, files=True, kind="function")),
              "context": plain(here.context("how is a session token verified?", profile="balanced")),
              "status": here.status()}

    started = backend(root, "start")
    report = started.status()  # no daemon runs: this policy starts one
    assert started.via == "daemon" and report["daemon"]["pid"] > 0
    pids.add(report["daemon"]["pid"])

    through = backend(root, "running")
    assert through.search("verify token", k=3) == before["search"] and through.via == "daemon"
    assert through.search("session expiry", k=2, files=True, kind="function") == before["files"]
    pack = through.context("how is a session token verified?", profile="balanced")
    assert through.via == "daemon"
    assert pack["matches"] == before["context"]["matches"]
    assert pack["augmentedPrompt"] == before["context"]["augmentedPrompt"]
    status = through.status()
    assert status.pop("daemon")["pid"] == report["daemon"]["pid"]
    assert {k: status[k] for k in ("state", "files", "chunks", "root")} == \
        {k: before["status"][k] for k in ("state", "files", "chunks", "root")}


def test_index_through_a_daemon_announces_it_and_asks_it_for_a_rebuild(repo):
    root, pids = repo
    report = backend(root, "start").status()
    pids.add(report["daemon"]["pid"])
    # The daemon's first run (the reconcile on start) must be over, or it would index the new file itself.
    assert lifecycle.wait_until(lambda: backend(root, "running").status()["daemon"]["writer"]["runs"] >= 1, 60)
    (root / "billing.py").write_text("def charge_invoice(invoice):\n    return invoice.total\n")

    events = []
    through = backend(root, "running")
    record = through.index(only=["billing.py"], progress=lambda event, **data: events.append((event, data)))
    assert through.via == "daemon" and events == [("daemon", {"pid": report["daemon"]["pid"]})]
    assert record["files_processed"] == 1 and record["chunks_pending"] == 0
    assert through.search("charge invoice", k=1)["matches"][0]["path"] == "billing.py"

    rebuilt = through.index(rebuild=True)  # the daemon holds the index: it rebuilds it, nobody stops it
    assert through.via == "daemon" and rebuilt["rebuilt"] and rebuilt["generation"] == record["generation"] + 1
    assert lifecycle.pid_alive(report["daemon"]["pid"])
    assert through.search("charge invoice", k=1)["matches"][0]["path"] == "billing.py"
    queued = backend(root, "fallback")
    assert queued.index(wait=False, reason="test") == {"queued": 0, "full": True} and queued.via == "daemon"


@pytest.mark.parametrize("policy", ["running", "auto"])
def test_a_client_of_other_settings_leaves_the_daemon_alone(repo, capfd, monkeypatch, policy):
    """Found by indexing real repositories from another shell while a search's daemon ran: the command restarted
    the daemon with its own settings. A client whose environment differs answers in its own process, says why in
    one line, and a rebuild it asks for is refused with what to do; the daemon others use keeps running."""
    from localidx.store.lock import IndexBusy

    root, pids = repo
    old = backend(root, "start").status()["daemon"]
    pids.add(old["pid"])
    assert lifecycle.wait_until(lambda: backend(root, "running").status()["daemon"]["writer"]["runs"] >= 1, 60)
    monkeypatch.setenv("LOCALIDX_DAEMON_RELEASE_S", "120")  # this shell's own setting, not the repository's
    capfd.readouterr()
    mine = backend(root, policy)
    assert mine.search("verify token", k=1)["matches"][0]["path"] == "auth.py" and mine.via == "in-process"
    said = capfd.readouterr().err.splitlines()
    assert said == ["localidx: answering in this process: this work tree's daemon runs with other settings than this "
                    "command's (daemon_release_s); `localidx daemon restart` switches it to them"], said
    with pytest.raises(IndexBusy) as refused:
        backend(root, policy).index(rebuild=True)
    assert "other settings (daemon_release_s)" in str(refused.value) and "daemon restart" in str(refused.value)
    assert not mine.started and lifecycle.pid_alive(old["pid"])
    assert lifecycle.read_status(lifecycle.daemon_paths(root, True, load_settings(root)).status)["pid"] == old["pid"]


def test_the_cli_policy_restarts_a_daemon_whose_settings_were_edited(repo):
    root, pids = repo
    old = backend(root, "start").status()["daemon"]
    pids.add(old["pid"])
    assert old["release_after_s"] == 300
    (root / ".localidx.toml").write_text("daemon_release_s = 120\n")
    new = backend(root, "running").status()["daemon"]
    pids.add(new["pid"])
    assert new["pid"] != old["pid"] and new["release_after_s"] == 120
    assert not lifecycle.pid_alive(old["pid"])


def test_the_auto_policy_restarts_a_daemon_whose_settings_were_edited_after_answering(repo, capfd):
    """Another daemon's settings: it is stopped, this call is answered here, and a daemon with the new settings is
    started after it, for the next call."""
    root, pids = repo
    old = backend(root, "start").status()["daemon"]
    pids.add(old["pid"])
    (root / ".localidx.toml").write_text("daemon_release_s = 120\n")
    call = backend(root, "auto")
    assert call.search("verify token", k=1)["matches"][0]["path"] == "auth.py"
    assert call.via == "in-process" and call.started and not lifecycle.pid_alive(old["pid"])
    assert "restarting the daemon in the background" in capfd.readouterr().err
    new = _wait_for_daemon(root, pids)
    assert new["pid"] != old["pid"] and new["daemon"]["release_after_s"] == 120


@pytest.mark.parametrize("daemon", ["of another version", "silent"])
def test_the_hook_policy_works_in_process_when_the_daemon_does_not_answer(repo, daemon):
    """A daemon of another version is not restarted by a hook, and one that takes the request but stays silent is
    given up on within FALLBACK_TIMEOUT_S: either way the change is indexed here, not lost."""
    root, _pids = repo
    honest = daemon_like(root, package_version="0.0.0-old" if daemon == "of another version" else __version__)

    def respond(message, line):
        if message and message.get("method") == "index/reindex":
            return "silence"
        return honest(message, line)

    server = ScriptedServer(lifecycle.daemon_paths(root, True, load_settings(root)).socket, respond)
    try:
        hook = backend(root, "fallback")
        record = hook.index(wait=False, reason="post-commit")
    finally:
        server.close()
    assert hook.via == "in-process" and record["files_processed"] == 2
    assert backend(root, "running").search("verify token", k=1)["matches"][0]["path"] == "auth.py"


def test_where_no_daemon_can_run_the_cli_works_in_process_and_the_mcp_policy_says_why(repo):
    root, _pids = repo
    backend(root, "running").index()
    runtime = Path(os.environ["XDG_RUNTIME_DIR"]) / "localidx"
    runtime.mkdir()
    os.chmod(runtime, 0o777)  # anyone could put a socket of their own in the daemon's place
    cli = backend(root, "running")
    assert cli.search("verify token", k=1)["matches"][0]["path"] == "auth.py" and cli.via == "in-process"
    mcp = backend(root, "start")
    with pytest.raises(ConfigError, match="writable by others"):
        mcp.search("verify token", k=1)
    assert mcp.via is None  # nothing was worked out in this process instead


def test_an_unknown_policy_is_refused(repo):
    root, _pids = repo
    with pytest.raises(ValueError, match="start, auto, running, never, fallback"):
        backend(root, "sometimes")


def test_the_command_policy_follows_the_flag_the_setting_and_ci():
    from localidx.config import Settings
    from localidx.interface.backend import command_policy

    auto, running, never = (Settings(daemon=value) for value in ("auto", "running", "never"))
    assert command_policy(auto, env={}) == "auto"
    assert command_policy(auto, no_daemon=True, env={}) == "never"
    assert command_policy(never, env={}) == "never"
    assert command_policy(running, env={}) == "running"
    assert command_policy(auto, starts=False, env={}) == "running"  # `index` starts no daemon
    assert command_policy(auto, env={"CI": "true"}) == "running"
    assert command_policy(auto, env={"CI": "false"}) == command_policy(auto, env={"CI": ""}) == "auto"
    assert command_policy(never, env={"CI": "1"}) == "never"


def _wait_for_daemon(root: Path, pids: set[int]) -> dict:
    assert lifecycle.wait_until(lambda: probe(root, True, load_settings(root)).state == "running", 60, 0.2)
    hello = probe(root, True, load_settings(root)).hello
    pids.add(hello["pid"])
    return hello


def test_the_auto_policy_answers_in_process_and_leaves_a_daemon_for_the_next_call(repo):
    """No daemon runs: the first call is worked out here while a daemon starts in the background; the next call
    goes to that daemon, with the same answer."""
    root, pids = repo
    backend(root, "never").index()
    first = backend(root, "auto")
    found = first.search("verify token", k=3)
    assert first.via == "in-process" and first.started and found["matches"][0]["path"] == "auth.py"
    _wait_for_daemon(root, pids)
    second = backend(root, "auto")
    assert second.search("verify token", k=3) == plain(found) and second.via == "daemon" and not second.started


def test_the_auto_policy_starts_no_daemon_for_a_work_tree_with_nothing_indexed(repo):
    """Its first job would be to index everything: a `status` must not set that off."""
    root, _pids = repo
    call = backend(root, "auto")
    assert call.status()["state"] == "EMPTY" and call.via == "in-process" and not call.started
    assert not lifecycle.daemon_paths(root, True, load_settings(root)).log.exists()


def test_the_auto_policy_starts_nothing_while_the_index_is_held(repo):
    """An indexer (or a daemon on its way up) holds the write lock: a second daemon would only wait for it."""
    from localidx.store.lock import WriteLock

    root, _pids = repo
    backend(root, "never").index()
    paths = lifecycle.daemon_paths(root, True, load_settings(root))
    with WriteLock(paths.lock):
        call = backend(root, "auto")
        assert call.search("verify token", k=1)["matches"][0]["path"] == "auth.py"
    assert call.via == "in-process" and not call.started and not paths.log.exists()


def test_a_daemon_that_cannot_start_costs_the_auto_policy_nothing(repo, monkeypatch):
    """The daemon cannot make its socket's directory: this call and the next are answered here, the failure is in
    the daemon's log, and no other daemon is started for a while (``RETRY_START_S``)."""
    from localidx.interface import client

    root, _pids = repo
    backend(root, "never").index()
    monkeypatch.setenv(lifecycle.SOCK_ENV, "/proc/localidx-test/daemon.sock")  # nobody can make this directory
    first = backend(root, "auto")
    assert first.search("verify token", k=1)["matches"][0]["path"] == "auth.py" and first.started
    for process in client._children:
        process.wait(60)
    paths = lifecycle.daemon_paths(root, True, load_settings(root))
    assert lifecycle.start_failure(paths) is not None
    assert any("cannot make the socket dir" in line for line in lifecycle.log_tail(paths.log, 20))
    again = backend(root, "auto")
    assert again.search("verify token", k=1)["matches"][0]["path"] == "auth.py"
    assert again.via == "in-process" and not again.started
