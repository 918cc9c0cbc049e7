"""Git hooks as a user meets them: real repositories, real commits, checkouts, merges and rebases firing the
installed hooks, and the index catching up in the background (no daemon unless a test says so)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ScriptedServer, daemon_like
from localidx import gitrepo, protocol
from localidx.config import load_settings
from localidx.daemon import lifecycle
from localidx.interface import githooks
from localidx.paths import index_paths
from localidx.store.catalog import Catalog

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
FOREIGN_POST_COMMIT = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/../foreign-ran\"\n"
FOREIGN_POST_REWRITE = (
    "#!/bin/sh\n"
    "cat > \"$(git rev-parse --git-dir)/../rewritten-seen\"\n"
    "echo \"$1\" >> \"$(git rev-parse --git-dir)/../rewrite-arg\"\n"
)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean environment for git, the hooks and localidx: own HOME and state dir, the fake embedder."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "LOCALIDX"}
    values.update(HOME=str(tmp_path / "home"), GIT_CONFIG_NOSYSTEM="1", LOCALIDX_HOME=str(tmp_path / "state"),
                  LOCALIDX_EMBED_MODEL="fake")
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("LOCALIDX_HOME", values["LOCALIDX_HOME"])
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    return values


def git(cwd: Path, env: dict, *args: str, **extra) -> str:
    run_env = dict(env, **extra.pop("env_extra", {}))
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, env=run_env, check=True, capture_output=True,
                          text=True, timeout=120, **extra).stdout


def lx(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text, encoding="utf-8")


def commit_file(root: Path, env: dict, rel: str, text: str, message: str | None = None, **extra) -> None:
    write(root, rel, text)
    git(root, env, "add", "-A")
    git(root, env, "commit", "-q", "-m", message or f"change {rel}", **extra)


@pytest.fixture
def repo(tmp_path, env):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, env, "init", "-q")
    commit_file(root, env, "app/main.py", "def main():\n    return 'hello'\n", "initial")
    yield root
    wait_idle(root)  # no background pass may outlive the test's temp dir


@pytest.fixture
def indexed(repo, env):
    """The repository with an index built and the hooks installed."""
    proc = lx(repo, env, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    proc = lx(repo, env, "hooks", "install")
    assert proc.returncode == 0, proc.stderr
    return repo


def wait_idle(root: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not githooks.is_idle(root):
        assert time.monotonic() < deadline, "the hooks' background work did not finish"
        time.sleep(0.05)


def indexed_files(root: Path) -> set[str]:
    catalog = Catalog(index_paths(root, True, os.environ["LOCALIDX_HOME"]).catalog, create=False)
    try:
        return {p for p, rec in catalog.files().items() if not rec.skipped}
    finally:
        catalog.close()


def passes(root: Path) -> list[str]:
    log = index_paths(root, True, os.environ["LOCALIDX_HOME"]).worktree / "hooks.log"
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if "index pass:" in line]


def hook_states(root: Path, env: dict) -> dict[str, str]:
    proc = lx(root, env, "hooks", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    return {h["type"]: h["state"] for h in json.loads(proc.stdout)["hooks"]}


def add_foreign_hooks(root: Path) -> dict[str, str]:
    texts = {"post-commit": FOREIGN_POST_COMMIT, "post-rewrite": FOREIGN_POST_REWRITE}
    for name, text in texts.items():
        path = root / ".git" / "hooks" / name
        path.write_text(text)
        path.chmod(0o755)
    return texts


# -- install, uninstall, status --------------------------------------------------------------------------------


def test_install_writes_marked_executable_hooks_and_status_lists_them(repo, env):
    assert set(hook_states(repo, env).values()) == {"missing"}
    proc = lx(repo, env, "hooks", "install")
    assert proc.returncode == 0, proc.stderr
    for hook_type in githooks.HOOK_TYPES:
        path = repo / ".git" / "hooks" / hook_type
        assert githooks.MARKER in path.read_text()
        assert path.stat().st_mode & stat.S_IXUSR
        assert f"hook_type={hook_type}" in path.read_text()
    assert hook_states(repo, env) == dict.fromkeys(githooks.HOOK_TYPES, "ours")
    report = json.loads(lx(repo, env, "hooks", "status", "--json").stdout)
    assert all(h["python"] == sys.executable and h["python_exists"] for h in report["hooks"])


def test_installing_twice_changes_nothing(repo, env):
    lx(repo, env, "hooks", "install")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (repo / ".git" / "hooks").iterdir()}
    proc = lx(repo, env, "hooks", "install", "--json")
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)["actions"].values()) == {"unchanged"}
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (repo / ".git" / "hooks").iterdir()}
    assert after == before
    assert not list((repo / ".git" / "hooks").glob("*.localidx-legacy"))


def test_uninstall_removes_only_our_hooks(repo, env):
    lx(repo, env, "hooks", "install")
    foreign = repo / ".git" / "hooks" / "post-merge"
    foreign.unlink()
    foreign.write_text("#!/bin/sh\nexit 0\n")
    proc = lx(repo, env, "hooks", "uninstall", "--json")
    assert proc.returncode == 0, proc.stderr
    actions = json.loads(proc.stdout)["actions"]
    assert actions["post-merge"] == "foreign, left alone" and actions["post-commit"] == "removed"
    assert foreign.read_text() == "#!/bin/sh\nexit 0\n"
    assert hook_states(repo, env) == {"post-commit": "missing", "post-checkout": "missing", "post-merge": "foreign",
                                      "post-rewrite": "missing"}


def test_a_foreign_hook_is_chained_with_args_and_stdin_and_restored_on_uninstall(repo, env):
    texts = add_foreign_hooks(repo)
    assert lx(repo, env, "index", "-q").returncode == 0
    assert lx(repo, env, "hooks", "install").returncode == 0
    states = hook_states(repo, env)
    assert states["post-commit"] == states["post-rewrite"] == "chained" and states["post-merge"] == "ours"

    commit_file(repo, env, "app/extra.py", "X = 1\n")
    assert (repo / "foreign-ran").read_text() == "ran\n"
    old = git(repo, env, "rev-parse", "HEAD").strip()
    write(repo, "app/extra.py", "X = 2\n")
    git(repo, env, "commit", "-q", "-a", "--amend", "-m", "amended")
    new = git(repo, env, "rev-parse", "HEAD").strip()
    assert (repo / "foreign-ran").read_text() == "ran\nran\n"
    assert (repo / "rewrite-arg").read_text() == "amend\n"
    assert (repo / "rewritten-seen").read_text().split() == [old, new]
    wait_idle(repo)
    assert "app/extra.py" in indexed_files(repo)  # and our part ran too

    proc = lx(repo, env, "hooks", "uninstall")
    assert proc.returncode == 0, proc.stderr
    for name, text in texts.items():
        assert (repo / ".git" / "hooks" / name).read_text() == text
    assert not list((repo / ".git" / "hooks").glob("*.localidx-legacy"))


def test_the_chained_hook_exit_status_is_passed_through(repo, env):
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 3\n")
    hook.chmod(0o755)
    lx(repo, env, "hooks", "install")
    proc = subprocess.run([str(hook), "0" * 40, "0" * 40, "0"], cwd=repo, env=dict(env, LOCALIDX="0"))
    assert proc.returncode == 3


def test_core_hooks_path_is_refused_with_a_recipe_and_force_installs_there(repo, env):
    git(repo, env, "config", "core.hooksPath", ".husky")
    proc = lx(repo, env, "hooks", "install")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "git config --unset core.hooksPath" in lines[0] and "localidx hooks install --force" in lines[0]
    assert not (repo / ".husky").exists()
    assert not any((repo / ".git" / "hooks" / t).exists() for t in githooks.HOOK_TYPES)

    proc = lx(repo, env, "hooks", "install", "--force")
    assert proc.returncode == 0, proc.stderr
    assert all(githooks.is_ours(repo / ".husky" / t) for t in githooks.HOOK_TYPES)
    assert hook_states(repo, env) == dict.fromkeys(githooks.HOOK_TYPES, "ours")


def test_core_hooks_path_set_to_the_default_directory_is_not_refused(repo, env):
    git(repo, env, "config", "core.hooksPath", ".git/hooks")
    proc = lx(repo, env, "hooks", "install")
    assert proc.returncode == 0, proc.stderr


def test_a_linked_worktree_shares_the_hooks_and_keeps_its_own_index(indexed, env, tmp_path):
    repo = indexed
    other = tmp_path / "other"
    git(repo, env, "worktree", "add", "-q", "-b", "side", str(other))
    wait_idle(other)  # `worktree add` checks out through our post-checkout: the new worktree gets its index
    report = json.loads(lx(other, env, "hooks", "status", "--json").stdout)
    assert Path(report["hooks_dir"]) == (repo / ".git" / "hooks").resolve()
    assert {h["state"] for h in report["hooks"]} == {"ours"}

    commit_file(other, env, "side.py", "def side():\n    return 2\n")
    wait_idle(other)
    assert "side.py" in indexed_files(other)
    assert "side.py" not in indexed_files(repo)


# -- the index follows git -------------------------------------------------------------------------------------


def test_a_commit_through_the_hook_indexes_the_new_file(indexed, env):
    commit_file(indexed, env, "app/users.py", "def list_users():\n    return []\n")
    wait_idle(indexed)
    assert "app/users.py" in indexed_files(indexed)
    assert len(passes(indexed)) == 1


def test_a_commit_of_what_is_already_indexed_is_a_pass_with_nothing_to_do(indexed, env):
    """The committed file was indexed before the commit (``localidx index``, or a daemon): the hook's pass finds
    that from the catalog alone, without opening the index (its log says so)."""
    write(indexed, "app/users.py", "def list_users():\n    return []\n")
    assert lx(indexed, env, "index", "-q").returncode == 0
    git(indexed, env, "add", "-A")
    git(indexed, env, "commit", "-q", "-m", "users")
    wait_idle(indexed)
    log = index_paths(indexed, True, os.environ["LOCALIDX_HOME"]).worktree / "hooks.log"
    lines = log.read_text().splitlines()
    assert any("nothing to do" in line for line in lines), lines[-5:]
    assert passes(indexed)[-1].endswith(" s") and "files_processed=0" in passes(indexed)[-1]


def test_checking_out_another_branch_and_back(indexed, env):
    repo = indexed
    git(repo, env, "checkout", "-q", "-b", "feature", env_extra={"LOCALIDX": "0"})
    commit_file(repo, env, "feature.py", "def feature():\n    return 1\n", env_extra={"LOCALIDX": "0"})
    git(repo, env, "checkout", "-q", "main")
    wait_idle(repo)
    assert "feature.py" not in indexed_files(repo)
    git(repo, env, "checkout", "-q", "feature")
    wait_idle(repo)
    assert "feature.py" in indexed_files(repo)
    git(repo, env, "checkout", "-q", "main")
    wait_idle(repo)
    assert "feature.py" not in indexed_files(repo)


def test_a_merge_indexes_what_it_brought(indexed, env):
    repo = indexed
    git(repo, env, "checkout", "-q", "-b", "feature", env_extra={"LOCALIDX": "0"})
    commit_file(repo, env, "merged.py", "def merged():\n    return 1\n", env_extra={"LOCALIDX": "0"})
    git(repo, env, "checkout", "-q", "main", env_extra={"LOCALIDX": "0"})
    commit_file(repo, env, "main_only.py", "A = 1\n", env_extra={"LOCALIDX": "0"})
    wait_idle(repo)
    git(repo, env, "merge", "-q", "--no-edit", "feature")
    wait_idle(repo)
    assert "merged.py" in indexed_files(repo)
    assert passes(repo)[-1].split("reason=")[1].startswith("post-merge")


def test_a_rebase_of_20_commits_is_one_index_pass(indexed, env):
    repo = indexed
    quiet = {"LOCALIDX": "0"}
    git(repo, env, "checkout", "-q", "-b", "feature", env_extra=quiet)
    for i in range(20):
        commit_file(repo, env, f"feature/f{i}.py", f"def f{i}():\n    return {i}\n", env_extra=quiet)
    git(repo, env, "checkout", "-q", "main", env_extra=quiet)
    commit_file(repo, env, "app/base.py", "BASE = 1\n", env_extra=quiet)
    git(repo, env, "checkout", "-q", "feature", env_extra=quiet)
    before = len(passes(repo))

    git(repo, env, "rebase", "-q", "main")
    wait_idle(repo)
    new_passes = passes(repo)[before:]
    assert len(new_passes) == 1, new_passes
    assert "post-rewrite" in new_passes[0]
    files = indexed_files(repo)
    assert "app/base.py" in files and {f"feature/f{i}.py" for i in range(20)} <= files


def test_a_fast_forward_rebase_is_indexed(indexed, env):
    repo = indexed
    quiet = {"LOCALIDX": "0"}
    git(repo, env, "checkout", "-q", "-b", "behind", env_extra=quiet)
    git(repo, env, "checkout", "-q", "main", env_extra=quiet)
    commit_file(repo, env, "ahead.py", "AHEAD = 1\n", env_extra=quiet)
    git(repo, env, "checkout", "-q", "behind", env_extra=quiet)
    git(repo, env, "rebase", "-q", "main")  # fires post-checkout only: nothing is rewritten
    wait_idle(repo)
    assert "ahead.py" in indexed_files(repo)


def test_an_amend_is_one_pass_and_covers_a_reverted_file(indexed, env):
    repo = indexed
    commit_file(repo, env, "app/keep.py", "def keep():\n    return 1\n", env_extra={"LOCALIDX": "0"})
    write(repo, "app/main.py", "def main():\n    return 'changed'\n")
    write(repo, "app/keep.py", "def keep():\n    return 2\n")
    git(repo, env, "commit", "-q", "-a", "-m", "both", env_extra={"LOCALIDX": "0"})
    wait_idle(repo)
    assert lx(repo, env, "index", "-q").returncode == 0
    before = len(passes(repo))

    # The amend takes app/main.py back to its parent's content: the amended commit no longer touches it, so
    # post-commit alone would miss it; post-rewrite(amend) names it, and both land in one pass.
    git(repo, env, "checkout", "HEAD~1", "--", "app/main.py", env_extra={"LOCALIDX": "0"})
    write(repo, "app/keep.py", "def keep():\n    return 3\n")
    git(repo, env, "commit", "-q", "-a", "--amend", "-m", "amended")
    wait_idle(repo)
    new_passes = passes(repo)[before:]
    assert len(new_passes) == 1, new_passes
    assert "reason=post-commit+post-rewrite paths=2 " in new_passes[0]
    proc = lx(repo, env, "status", "--json")
    assert json.loads(proc.stdout)["changed_files"] == []


def test_localidx_0_skips_our_part_but_not_the_chained_hook(repo, env):
    add_foreign_hooks(repo)
    assert lx(repo, env, "index", "-q").returncode == 0
    assert lx(repo, env, "hooks", "install").returncode == 0
    before = len(passes(repo))
    commit_file(repo, env, "skipped.py", "S = 1\n", env_extra={"LOCALIDX": "0"})
    assert (repo / "foreign-ran").exists()
    assert not list((repo / ".git" / githooks.QUEUE_DIR).glob("event.*"))
    wait_idle(repo)
    assert len(passes(repo)) == before
    assert "skipped.py" not in indexed_files(repo)


def test_the_hook_script_returns_in_milliseconds(indexed, env):
    repo = indexed
    hook = repo / ".git" / "hooks" / "post-commit"
    timings = []
    for _ in range(5):
        # Through a shell that outlives the hook, as git does: the background run waits for its parent to exit.
        started = time.perf_counter()
        subprocess.run(["sh", "-c", '"$0"; true', str(hook)], cwd=repo, env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        timings.append(time.perf_counter() - started)
    wait_idle(repo)
    assert sorted(timings)[2] < 0.2, timings


def test_pre_commit_framework_mode_queues_from_its_variables(indexed, env):
    repo = indexed
    git(repo, env, "checkout", "-q", "-b", "feature", env_extra={"LOCALIDX": "0"})
    commit_file(repo, env, "pc.py", "PC = 1\n", env_extra={"LOCALIDX": "0"})
    head = git(repo, env, "rev-parse", "HEAD").strip()
    base = git(repo, env, "rev-parse", "main").strip()
    wait_idle(repo)
    proc = lx(repo, dict(env, PRE_COMMIT="1", PRE_COMMIT_FROM_REF=base, PRE_COMMIT_TO_REF=head,
                         PRE_COMMIT_CHECKOUT_TYPE="1"), "hook-run", "--pre-commit")
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""
    wait_idle(repo)
    assert "pc.py" in indexed_files(repo)
    assert "reason=post-checkout" in passes(repo)[-1]


def test_hook_run_never_fails_or_prints(tmp_path, env):
    proc = lx(tmp_path, env, "hook-run", "post-commit")  # not a repository at all
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


# -- which paths each hook reports -----------------------------------------------------------------------------


@pytest.fixture
def history(tmp_path, env):
    """c1 (root): a, b, c, d. c2: a modified, b deleted, c renamed to c2, e added."""
    repo = tmp_path / "history"
    repo.mkdir()
    git(repo, env, "init", "-q")
    for name in ("a", "b", "c", "d"):
        write(repo, f"{name}.py", f"def {name}():\n    return '{name}' * 40\n")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "root")
    c1 = git(repo, env, "rev-parse", "HEAD").strip()
    write(repo, "a.py", "def a():\n    return 'changed'\n")
    (repo / "b.py").unlink()
    (repo / "c.py").rename(repo / "c2.py")
    write(repo, "e.py", "E = 1\n")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "second")
    c2 = git(repo, env, "rev-parse", "HEAD").strip()
    return repo, c1, c2


SECOND = ["a.py", "b.py", "c.py", "c2.py", "e.py"]


def test_post_commit_paths_are_the_commit_against_its_parent(history):
    repo, c1, c2 = history
    r = gitrepo.open_repo(repo)
    assert githooks.event_paths(r, githooks.HookEvent("post-commit", head=c2)) == SECOND
    assert githooks.event_paths(r, githooks.HookEvent("post-commit", head=c1)) == ["a.py", "b.py", "c.py", "d.py"]


def test_post_checkout_paths(history):
    repo, c1, c2 = history
    r = gitrepo.open_repo(repo)
    assert githooks.event_paths(r, githooks.HookEvent("post-checkout", args=[c1, c2, "1"])) == SECOND
    assert githooks.event_paths(r, githooks.HookEvent("post-checkout", args=[c2, c1, "1"])) == SECOND
    assert githooks.event_paths(r, githooks.HookEvent("post-checkout", args=[c2, c2, "1"])) == []
    # A file checkout does not say which files; a checkout from nothing (a clone) changed everything.
    assert githooks.event_paths(r, githooks.HookEvent("post-checkout", args=[c2, c2, "0"])) is None
    assert githooks.event_paths(r, githooks.HookEvent("post-checkout", args=["0" * 40, c2, "1"])) is None


def test_post_merge_paths(history):
    repo, c1, c2 = history
    r = gitrepo.open_repo(repo)
    assert githooks.event_paths(r, githooks.HookEvent("post-merge", head=c2, orig=c1, args=["0"])) == SECOND
    assert githooks.event_paths(r, githooks.HookEvent("post-merge", head=c2, orig=c1, args=["1"])) is None


def test_post_rewrite_paths(history, env):
    repo, c1, c2 = history
    r = gitrepo.open_repo(repo)
    rebase = githooks.HookEvent("post-rewrite", head=c2, orig=c1, args=["rebase"])
    assert githooks.event_paths(r, rebase) == SECOND
    from_stdin = githooks.HookEvent("post-rewrite", head=c2, args=["rebase"], rewritten=[(c1, c2)])
    assert githooks.event_paths(r, from_stdin) == SECOND

    write(repo, "e.py", "E = 2\n")
    git(repo, env, "commit", "-q", "-a", "--amend", "-m", "amended")
    c3 = git(repo, env, "rev-parse", "HEAD").strip()
    amend = githooks.HookEvent("post-rewrite", head=c3, args=["amend"], rewritten=[(c2, c3)])
    assert githooks.event_paths(r, amend) == ["e.py"]
    # Under pre-commit there is no stdin: the amend is read from HEAD's reflog.
    assert githooks.event_paths(r, githooks.HookEvent("post-rewrite", head=c3, args=["amend"])) == ["e.py"]


def test_event_files_round_trip_and_incomplete_ones_wait():
    event = githooks.HookEvent("post-rewrite", head="b" * 40, orig="a" * 40, args=["rebase"],
                               rewritten=[("1" * 40, "2" * 40)])
    parsed = githooks.parse_event(event.to_text())
    assert (parsed.type, parsed.head, parsed.orig, parsed.args, parsed.rewritten) == (
        "post-rewrite", "b" * 40, "a" * 40, ["rebase"], [("1" * 40, "2" * 40)])
    assert githooks.parse_event(event.to_text().replace("end\n", "")) is None
    assert githooks.parse_event("") is None


# -- with a daemon ---------------------------------------------------------------------------------------------


def test_with_a_daemon_the_paths_go_to_index_reindex(indexed, env, monkeypatch, caplog):
    repo = indexed
    caplog.set_level(logging.INFO, logger="localidx.interface.githooks")
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    monkeypatch.delenv(lifecycle.SOCK_ENV, raising=False)
    sent = []
    answer = daemon_like(repo)

    def respond(message, line):
        if message and message.get("method") != "daemon/hello":
            sent.append((message["method"], message["params"]))
            return protocol.result(message["id"], {"queued": len(message["params"].get("paths", [])), "full": False})
        return answer(message, line)

    server = ScriptedServer(lifecycle.daemon_paths(repo, True, load_settings(repo)).socket, respond)
    try:
        r = gitrepo.open_repo(repo)
        commit_file(repo, env, "daemon.py", "D = 1\n", env_extra={"LOCALIDX": "0"})
        githooks.record(r, "post-commit", [])
        assert githooks.process_queue(repo) == 1
    finally:
        server.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    assert sent == [("index/reindex", {"reason": "post-commit", "paths": ["daemon.py"]})]
    assert "daemon.py" not in indexed_files(repo)  # the daemon, not this process, writes the index
    assert "paths=1 via=daemon" in caplog.text


def test_with_a_running_daemon_a_commit_is_sent_to_it(repo, env, monkeypatch):
    pytest.importorskip("localidx.interface.client")
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    env = dict(env, XDG_RUNTIME_DIR=str(run_dir), LOCALIDX_WATCH="0", LOCALIDX_DAEMON_IDLE_S="300")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    started = lx(repo, env, "daemon", "start")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("pid ")[1].split(",")[0])
    try:
        assert lx(repo, env, "index", "-q").returncode == 0
        assert lx(repo, env, "hooks", "install").returncode == 0
        commit_file(repo, env, "app/daemon_side.py", "def via_daemon():\n    return 1\n")
        wait_idle(repo)
        assert "via=daemon" in passes(repo)[-1]
        deadline = time.monotonic() + 60
        while "app/daemon_side.py" not in indexed_files(repo):
            assert time.monotonic() < deadline, "the daemon did not index the committed file"
            time.sleep(0.1)
    finally:
        lx(repo, env, "daemon", "stop")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_rebase_stopped_by_a_conflict_waits_and_is_indexed_once_it_ends(indexed, env):
    repo = indexed
    quiet = {"LOCALIDX": "0"}
    git(repo, env, "checkout", "-q", "-b", "feature", env_extra=quiet)
    commit_file(repo, env, "app/main.py", "def main():\n    return 'feature'\n", env_extra=quiet)
    commit_file(repo, env, "feature.py", "F = 1\n", env_extra=quiet)
    git(repo, env, "checkout", "-q", "main", env_extra=quiet)
    commit_file(repo, env, "app/main.py", "def main():\n    return 'main'\n", env_extra=quiet)
    git(repo, env, "checkout", "-q", "feature", env_extra=quiet)
    wait_idle(repo)
    before = len(passes(repo))

    stopped = subprocess.run(["git", *IDENTITY, "rebase", "main"], cwd=repo, env=env, capture_output=True)
    assert stopped.returncode != 0  # the conflict in app/main.py stops it
    log = index_paths(repo, True, os.environ["LOCALIDX_HOME"]).worktree / "hooks.log"
    deadline = time.monotonic() + 60
    while "a rebase is in progress" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the runner did not defer to the stopped rebase"
        time.sleep(0.05)
    assert len(passes(repo)) == before

    write(repo, "app/main.py", "def main():\n    return 'resolved'\n")
    git(repo, env, "add", "app/main.py")
    git(repo, env, "rebase", "--continue", env_extra={"GIT_EDITOR": "true"})
    wait_idle(repo)
    new_passes = passes(repo)[before:]
    assert len(new_passes) == 1 and "post-checkout+post-rewrite" in new_passes[0], new_passes
    assert "feature.py" in indexed_files(repo)
    assert json.loads(lx(repo, env, "status", "--json").stdout)["changed_files"] == []


def test_the_pre_commit_manifest_declares_the_four_stages():
    yaml = pytest.importorskip("yaml")
    manifest = Path(__file__).resolve().parents[1] / ".pre-commit-hooks.yaml"
    (hook,) = yaml.safe_load(manifest.read_text())
    assert hook["id"] == "localidx" and hook["entry"] == "localidx hook-run --pre-commit"
    assert hook["stages"] == list(githooks.HOOK_TYPES)
    assert hook["always_run"] is True and hook["pass_filenames"] is False and hook["language"] == "python"
