"""Where a work tree's daemon lives and how to find, start and tidy after it; shared by the daemon and its clients.

Cheap to import (no lancedb, no tree-sitter): the CLI and the git hooks use it on every call.

- **Status file**: ``<state>/worktrees/<key>/daemon.json`` (next to the catalog and ``write.lock``) with the pid,
  socket path, protocol and package versions and start time. It is written once the socket listens, and removed
  before the daemon answers ``daemon/stop`` (as dmypy does), so a client that starts a new daemon right after never
  has its fresh status file deleted by the old one.
- **Socket**: ``$LOCALIDX_SOCK`` if set, else ``$XDG_RUNTIME_DIR/localidx/<worktree key>.sock``, else
  ``/tmp/localidx-<uid>/<worktree key>.sock``; with a ``home`` set the key also holds a hash of that state dir, so
  each index of a work tree has its own daemon. The directory must be ours and private: localidx creates its own
  runtime dir with mode 0700 and refuses one owned by someone else or writable by group or others (whoever can
  write there could put a socket of their own in our place). Anyone can make ``/tmp/localidx-<uid>`` before us: when
  that one is not ours, the runtime dir is ``run`` in the per-user cache dir instead (under the home directory, where
  no one else can make it), so another user cannot turn the daemon off. ``sun_path`` holds 104 bytes on macOS and
  the BSDs (108 on Linux), so a long name is replaced by a hash of it. Every client checks the directory before it
  connects (``daemon stop`` too), and ``stop`` believes only the pid the kernel reports for the socket's peer.
- **Starting**: whoever starts the daemon first claims ``daemon.starting`` (made by a hard link, so it appears
  whole or not at all): of several commands racing to start one, exactly one spawns it, and the marker names the
  process on its way up until it listens, so ``daemon stop`` and ``daemon status`` count a daemon being started as
  running. A marker whose process is gone, or older than ``STARTING_WINDOW_S``, is stale.
- **Stale state**: a crash leaves the status file and the socket behind. They are stale when nothing listens on the
  socket and the work tree's write lock is free (a live daemon holds it from before it listens until it exits);
  ``clean_stale`` removes them. A daemon that holds the lock but does not answer is busy or hung, not dead, and is
  left alone.

``LOCALIDX_FAKE_VERSION`` (tests only) makes a process, daemon or client, claim another package version: a daemon
started with it is one "left running by another version", which a client without it must restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localidx import lazylog
from localidx import __version__
from localidx.config import Settings
from localidx.errors import ConfigError

if TYPE_CHECKING:
    import subprocess

log = lazylog.getLogger(__name__)

STATUS_NAME = "daemon.json"
FAILED_NAME = "daemon.failed"  # when the last start failed (the log says why); removed once a daemon listens
LOG_NAME = "daemon.log"
STARTING_NAME = "daemon.starting"  # a daemon on its way up (see the module docstring); removed once it listens
STARTING_WINDOW_S = 90.0  # a start that has not listened by then has failed (the client waits 60 s)
SOCK_ENV = "LOCALIDX_SOCK"
FAKE_VERSION_ENV = "LOCALIDX_FAKE_VERSION"
MAX_SOCKET_PATH = 103  # bytes; the smallest sun_path (104, macOS and BSD) less its terminating NUL
TMP = Path("/tmp")


def package_version() -> str:
    """The localidx version this process speaks for, daemon or client (``LOCALIDX_FAKE_VERSION`` overrides it, to
    test the restart of a daemon left running by another version)."""
    return os.environ.get(FAKE_VERSION_ENV) or __version__


@dataclass(frozen=True)
class DaemonPaths:
    """The files of one work tree's daemon."""

    root: Path  # the work tree
    state: Path  # the index's state dir
    worktree: Path  # this work tree's own state dir (catalog, write lock, status file, log)
    worktree_key: str
    socket: Path

    @property
    def status(self) -> Path:
        return self.worktree / STATUS_NAME

    @property
    def log(self) -> Path:
        return self.worktree / LOG_NAME

    @property
    def lock(self) -> Path:
        return self.worktree / "write.lock"


def daemon_paths(root: Path, in_git: bool, settings: Settings) -> DaemonPaths:
    """The daemon files for the work tree at ``root``. Raises ConfigError when no safe socket path can be made."""
    from localidx.paths import index_paths

    paths = index_paths(root, in_git, settings.home)
    key = paths.worktree_key
    if settings.home:
        # Another state dir is another index with a daemon of its own: a second terminal with its own
        # LOCALIDX_HOME must not find (and restart) the daemon the first one uses.
        key += "-h" + hashlib.sha256(str(paths.state).encode()).hexdigest()[:8]
    return DaemonPaths(root=paths.root, state=paths.state, worktree=paths.worktree, worktree_key=paths.worktree_key,
                       socket=socket_path(key))


def runtime_dir() -> Path:
    """localidx's own runtime dir: under ``$XDG_RUNTIME_DIR``, else a per-user dir in /tmp, else (that one made by
    someone else) ``run`` in the per-user cache dir."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "localidx"
    # Not tempfile.gettempdir(): $TMPDIR can be long enough (macOS) to break the socket path limit.
    tmp = TMP / f"localidx-{os.getuid()}"
    if _private_or_absent(tmp):
        return tmp
    return fallback_runtime_dir()


def fallback_runtime_dir() -> Path:
    """The runtime dir when ``/tmp/localidx-<uid>`` is taken by someone else: under the user's cache dir."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("localidx")) / "run"


def _private_or_absent(directory: Path) -> bool:
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process at the other end of a connected Unix socket, as the kernel reports it (None where
    it cannot say); a pid the peer states itself proves nothing."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    try:
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None
    return pid if uid == os.getuid() else None


def socket_path(worktree_key: str) -> Path:
    """The socket of the daemon for a work tree (see the module docstring). Raises ConfigError when too long."""
    override = os.environ.get(SOCK_ENV, "")
    if override:
        path = Path(override).expanduser().absolute()
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ConfigError(f"{SOCK_ENV}={override} is over {MAX_SOCKET_PATH} bytes, too long for a Unix socket")
        return path
    base = runtime_dir()
    path = base / f"{worktree_key}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        path = base / f"{hashlib.sha256(worktree_key.encode()).hexdigest()[:16]}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ConfigError(f"the runtime dir {base} is too long for a Unix socket path; set {SOCK_ENV} to a short path")
    return path


def check_socket_dir(sock: Path, create: bool) -> None:
    """Make sure the socket's directory is private to this user; with ``create``, make localidx's own dir (0700).

    Raises ConfigError for a directory that is a symlink, not a directory, owned by another user, or writable by
    group or others. A missing directory is fine when not creating (no daemon can be listening there)."""
    directory = sock.parent
    own = directory == runtime_dir() and not os.environ.get(SOCK_ENV)
    if create:
        try:
            if directory == fallback_runtime_dir() and own:
                from localidx.safety.private import private_dir

                private_dir(directory)  # under the user's cache dir, which may not exist yet
            elif own:
                os.mkdir(directory, 0o700)  # not parents: $XDG_RUNTIME_DIR is the login's, made by the system
            else:
                directory.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ConfigError(f"cannot make the socket dir {directory}: {exc.strerror}; set {SOCK_ENV}") from None
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        if create:
            raise
        return
    hint = f"use a private directory (chmod 700) or set {SOCK_ENV}"
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"socket dir {directory} is not a directory (or is a symlink): {hint}")
    if st.st_uid != os.getuid():
        raise ConfigError(f"socket dir {directory} belongs to uid {st.st_uid}, not to you: {hint}")
    if st.st_mode & 0o022:
        raise ConfigError(f"socket dir {directory} is writable by others (mode {stat.S_IMODE(st.st_mode):o}): {hint}")
    if own and stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(directory, 0o700)  # ours, and only readable by others: tighten rather than refuse


# -- the status file --------------------------------------------------------------------------------------------


def read_status(path: Path) -> dict | None:
    """The status file's contents, or None when it is missing or not one of ours (a torn or foreign file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not isinstance(data.get("socket"), str):
        return None
    return data


def write_status(path: Path, info: dict) -> None:
    """Write the status file atomically (a reader sees the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def record_start_failure(paths: DaemonPaths) -> None:
    """Note that a daemon failed to start now (a command that would start one in the background waits a while)."""
    write_status(paths.worktree / FAILED_NAME, {"pid": os.getpid(), "socket": str(paths.socket), "at": time.time()})


def start_failure(paths: DaemonPaths) -> float | None:
    """When (epoch seconds) a daemon last failed to start, unless one has listened since; None when none failed."""
    found = read_status(paths.worktree / FAILED_NAME)
    at = found.get("at") if found else None
    return float(at) if isinstance(at, (int, float)) else None


def claim_start(paths: DaemonPaths) -> bool:
    """Whether this process may start the work tree's daemon: True for exactly one of several processes racing to,
    False while another start is under way. The winner names the daemon it spawns with ``note_starting``."""
    marker = paths.worktree / STARTING_NAME
    paths.worktree.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".{STARTING_NAME}.{os.getpid()}")
    write_status(tmp, {"pid": os.getpid(), "socket": str(paths.socket), "at": time.time()})
    try:
        for _attempt in range(2):
            try:
                os.link(tmp, marker)  # atomic and exclusive: a reader never sees a half-written claim
                return True
            except FileExistsError:
                if starting_pid(paths) is not None:
                    return False
                unlink_quietly(marker)  # stale: its daemon died before listening
        return False
    finally:
        unlink_quietly(tmp)


def note_starting(paths: DaemonPaths, pid: int) -> None:
    """Name the daemon process this claim started (``claim_start``); nothing when it already listens (and removed
    the claim)."""
    if not (paths.worktree / STARTING_NAME).exists():
        return
    write_status(paths.worktree / STARTING_NAME, {"pid": pid, "socket": str(paths.socket), "at": time.time()})


def starting_pid(paths: DaemonPaths) -> int | None:
    """The pid of a daemon (or of the command starting one) on its way up, or None when no start is under way."""
    found = read_status(paths.worktree / STARTING_NAME)
    if found is None:
        return None
    at = found.get("at")
    fresh = isinstance(at, (int, float)) and 0 <= time.time() - at < STARTING_WINDOW_S
    pid = found["pid"]
    return pid if fresh and pid_alive(pid) and is_localidx_process(pid) else None


def unlink_quietly(path: Path) -> bool:
    """Remove a file; True when there was one."""
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # Field 3 of /proc/<pid>/stat is the state; "Z" is a dead child its parent has not reaped yet.
        text = Path(f"/proc/{pid}/stat").read_text()
        return text[text.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def is_localidx_process(pid: int) -> bool:
    """Best effort against a recycled pid: whether its command line mentions localidx (True where /proc is absent)."""
    try:
        return b"localidx" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return False


def socket_listening(path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        return True
    except socket.timeout:
        return True  # the backlog is full: someone is there, just busy
    except OSError:
        return False
    finally:
        sock.close()


def clean_stale(paths: DaemonPaths) -> dict | None:
    """Remove the status file and socket of a daemon that is gone; returns the stale status ({} when only a socket
    was left), else None.

    A daemon takes the write lock before it listens and holds it until it exits, so files are stale exactly when
    nothing listens on the socket and the lock is free; they are removed while holding the lock, so a daemon
    starting meanwhile cannot lose its fresh files. While the lock is held (a daemon starting or hung, or an
    indexing run) nothing is removed."""
    from localidx.store.lock import IndexBusy, WriteLock

    status = read_status(paths.status)
    sock = Path(status["socket"]) if status else paths.socket
    if not (paths.status.exists() or sock.is_socket()) or socket_listening(sock):
        return None
    try:
        with WriteLock(paths.lock):
            removed = unlink_quietly(paths.status)
            if sock.is_socket() and not socket_listening(sock):
                removed = unlink_quietly(sock) or removed
    except IndexBusy:
        return None
    if not removed:
        return None
    log.info("removed stale daemon files (pid %s)", status["pid"] if status else "?")
    return status or {}


# -- starting ---------------------------------------------------------------------------------------------------


def spawn(paths: DaemonPaths) -> subprocess.Popen:
    """Start ``localidx daemon run`` detached (its own session, stdio to the log) in the work tree; returns at once."""
    import subprocess  # here: a client that finds its daemon running starts none

    from localidx.safety.private import private_dir

    private_dir(paths.worktree)
    # Two malloc arenas instead of glibc's 8 per core: the same speed, a few hundred MB less (daemon/memory.py).
    env = {**os.environ, "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2")}
    if paths.log.is_symlink():
        paths.log.unlink()  # our own directory: a link planted there must not carry the log elsewhere
    fd = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "ab") as log_file:
        # stderr to the log too: a crash before logging is set up (an import error) still leaves its traceback there.
        return subprocess.Popen(
            [sys.executable, "-m", "localidx", "daemon", "run", "--detached"],
            cwd=str(paths.root), stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
            start_new_session=True, close_fds=True, env=env,
        )


def log_tail(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a log file (empty when there is none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))  # the tail is enough; a log is capped at about 1 MB anyway
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:] if lines > 0 else []


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
