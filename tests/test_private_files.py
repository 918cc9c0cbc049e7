"""What localidx writes about a user's code is private: index directories 0700 and files 0600 whatever the umask,
an older index readable by others tightened by the next run, and checked as another user would meet them.

As root (CI runs as root) the test makes a second user (``useradd``; ``nobody`` where that is missing) and reads
as that user, from a child process that has dropped to its uid: the repository's own files are readable to it (so
the check can see), the index is not. Elsewhere the modes alone are checked.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import init_repo

OTHER_USER = "localidx-other"


def _lx(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    # The umask a careless shell has: group and others may read what it makes.
    proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    return proc


def _other_user() -> tuple[int, int] | None:
    """(uid, gid) of a user other than this one, made when running as root; None when there is none to use."""
    if os.getuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:
        if shutil.which("useradd"):
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                           capture_output=True, check=False)
        try:
            entry = pwd.getpwnam(OTHER_USER)
        except KeyError:
            try:
                entry = pwd.getpwnam("nobody")
            except KeyError:
                return None
    return entry.pw_uid, entry.pw_gid


def _as(user: tuple[int, int], *command: str) -> subprocess.CompletedProcess:
    uid, gid = user

    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return subprocess.run(list(command), capture_output=True, timeout=60, preexec_fn=drop)


def _modes(top: Path) -> list[str]:
    """Every directory and file under ``top`` (``top`` included) that group or others may use: "path mode"."""
    loose = []
    for path in [top, *top.rglob("*")]:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            continue
        if stat.S_IMODE(st.st_mode) & 0o077:
            loose.append(f"{path} {stat.S_IMODE(st.st_mode):o}")
    return loose


@pytest.fixture
def shared_place():
    """A directory anyone may enter, as /home/alice/src is to other users on most machines."""
    place = Path(tempfile.mkdtemp(prefix="localidx-private-"))
    os.chmod(place, 0o755)
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _env(place: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCALIDX_HOME", "XDG_"))}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_WATCH": "0", "HOME": str(place / "home"),
                "XDG_DATA_HOME": str(place / "data"), "LOCALIDX_CONFIG_DIR": str(place / "home" / "config"),
                "LOCALIDX_REGISTRY": str(place / "data" / "localidx" / "registry.json")})
    return env


def _readable_repo(place: Path, name: str) -> Path:
    old = os.umask(0o022)
    try:
        root = init_repo(place / name, {"src/secret_sauce.py": "def recipe():\n    return 'sauce'\n",
                                        ".localidx.toml": "max_tokens = 256\n"})
    finally:
        os.umask(old)
    os.chmod(place / name, 0o755)
    return root


def test_an_index_is_0700_and_0600_and_another_user_cannot_read_it(shared_place):
    env = _env(shared_place)
    root = _readable_repo(shared_place, "repo")
    _lx(root, env, "index", "-q")
    _lx(root, env, "trust")
    state = root / ".git" / "localidx"
    assert _modes(state) == [] and _modes(shared_place / "home" / "config") == []
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    catalog = next(state.rglob("catalog.sqlite"))
    data = next(state.rglob("*.lance"))
    registry = shared_place / "data" / "localidx" / "registry.json"
    assert _modes(registry.parent) == []
    other = _other_user()
    if other is None:
        pytest.skip("not root: the modes are checked, not another user's view")
    # The control: the other user reads the repository's own files, so a refusal below is the index's modes.
    assert _as(other, "cat", str(root / "src" / "secret_sauce.py")).returncode == 0
    for target in (catalog, data, registry, shared_place / "home" / "config" / "trusted.json"):
        denied = _as(other, "cat", str(target))
        assert denied.returncode != 0 and b"ermission denied" in denied.stderr, target
    listing = _as(other, "ls", str(state))
    assert listing.returncode != 0 and b"ermission denied" in listing.stderr


def test_an_index_an_older_localidx_left_readable_is_tightened_by_the_next_run(shared_place):
    env = _env(shared_place)
    root = _readable_repo(shared_place, "repo")
    _lx(root, env, "index", "-q")
    state = root / ".git" / "localidx"
    for path in [state, *state.rglob("*")]:  # as localidx wrote it before: 0755 directories, 0644 files
        if path.is_dir():
            os.chmod(path, 0o755)
        elif path.is_file():
            os.chmod(path, 0o644)
    (state / ".private").unlink()
    assert _modes(state)
    (root / "src" / "more.py").write_text("def more():\n    return 1\n")
    _lx(root, env, "index", "-q")
    assert _modes(state) == []


def test_a_directory_outside_git_is_indexed_into_a_private_per_user_dir(shared_place):
    env = _env(shared_place)
    plain = shared_place / "plain"
    plain.mkdir(mode=0o755)
    (plain / "notes.py").write_text("def note():\n    return 1\n")
    os.chmod(plain / "notes.py", 0o644)
    (shared_place / "data" / "localidx").mkdir(parents=True, mode=0o755)  # left by an older localidx
    _lx(plain, env, "index", "-q")
    data = shared_place / "data" / "localidx"
    assert (data / "repos").is_dir() and _modes(data) == []
