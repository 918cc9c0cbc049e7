"""File names that are legal on POSIX but read like paths elsewhere: a name holding backslashes (``..\\..\\x.py``) is
one file in its directory, indexed and updated like any other, and never makes an incremental pass (a commit
through the installed hooks, an ``index`` of listed paths, a daemon's reindex) drop the other changes it carries."""

from __future__ import annotations

import json
import time

import pytest

from test_hooks import commit_file, env, git, indexed, indexed_files, lx, passes, repo, wait_idle  # noqa: F401

ODD = "..\\..\\x.py"  # a single file at the top of the work tree


def _status(root, env_):
    proc = lx(root, env_, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _search_paths(root, env_, query):
    proc = lx(root, env_, "search", "--no-daemon", "--json", query)
    assert proc.returncode in (0, 1), proc.stderr
    return {m["path"] for m in json.loads(proc.stdout)["matches"]}


def test_a_commit_of_a_backslash_name_through_the_hooks_updates_it_and_the_rest(indexed, env):
    commit_file(indexed, env, ODD, "def odd_name():\n    return 'first'\n")
    wait_idle(indexed)
    assert ODD in indexed_files(indexed)

    # One commit changes the odd file and an ordinary one: the hook's pass takes both.
    (indexed / ODD).write_text("def odd_name():\n    return 'zebrafish'\n")
    (indexed / "app" / "main.py").write_text("def main():\n    return 'marmalade'\n")
    git(indexed, env, "commit", "-q", "-am", "both")
    wait_idle(indexed)
    assert "outside the repository" not in passes(indexed)[-1]
    assert "files_processed=2" in passes(indexed)[-1], passes(indexed)
    status = _status(indexed, env)
    assert status["changed_files"] == [] and status["state"] == "READY", status
    assert ODD in _search_paths(indexed, env, "zebrafish")
    assert "app/main.py" in _search_paths(indexed, env, "marmalade")
    assert not (indexed.parent.parent / "x.py").exists()


def test_an_index_of_a_backslash_name_takes_it_literally(indexed, env):
    (indexed / ODD).write_text("def odd_name():\n    return 'quokka'\n")
    proc = lx(indexed, env, "index", "-q", ODD)
    assert proc.returncode == 0, proc.stderr
    assert ODD in _search_paths(indexed, env, "quokka")
    # A path that does lead out is still refused, by name.
    proc = lx(indexed, env, "index", "-q", "..")
    assert proc.returncode == 2 and "outside the repository" in proc.stderr


def _wait_for(root, env_, query, path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while path not in _search_paths(root, env_, query):
        assert time.monotonic() < deadline, f"{path} was not reindexed with {query!r}"
        time.sleep(0.3)


@pytest.mark.parametrize("watch", ["0", "1"])
def test_a_daemon_takes_a_backslash_name_from_the_hooks_and_the_watcher(indexed, env, watch):
    """With ``watch`` off, the hook hands the daemon the paths (``index/reindex``); with it on, the watcher's batch
    carries them too: both update the odd file and the ordinary one of the same commit."""
    env = dict(env, LOCALIDX_WATCH=watch, LOCALIDX_DAEMON_IDLE_S="120")
    proc = lx(indexed, env, "daemon", "start")
    assert proc.returncode == 0, proc.stderr
    try:
        (indexed / ODD).write_text("def odd_name():\n    return 'axolotl'\n")
        (indexed / "app" / "main.py").write_text("def main():\n    return 'tamarind'\n")
        git(indexed, env, "add", "-A")
        git(indexed, env, "commit", "-q", "-m", "both")
        wait_idle(indexed)
        _wait_for(indexed, env, "axolotl", ODD)
        _wait_for(indexed, env, "tamarind", "app/main.py")
        status = _status(indexed, env)
        assert status["changed_files"] == [], status
    finally:
        lx(indexed, env, "daemon", "stop")
