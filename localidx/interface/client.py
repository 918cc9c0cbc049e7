"""The client side of the socket protocol: connect, hello, request. Used by the CLI, the git hooks and the MCP server.

Light to import (sockets, json and ``localidx.protocol``; no lancedb, no tree-sitter): a hook runs it on every commit.

- ``connect`` opens a connection to the work tree's daemon and shakes hands. A daemon of another protocol or package
  version is restarted once and the handshake retried (dmypy's rule); with ``start=True`` a missing daemon is
  started. Without one it raises ``DaemonUnavailable``. A daemon that is there but busy is waited for, within the
  timeout: a full listen queue (the connect is retried) or an ``OVERLOADED`` answer (the hello is retried).
- The hello raises the connection's response limit (``max_frame_bytes``) to ``MAX_NEGOTIATED_FRAME_BYTES``, so any
  response the daemon makes reaches the caller. Notifications (after ``subscribe``) are kept in
  ``Client.notifications`` and never mistaken for answers; ``next_notification`` waits for one.
- ``Client.request`` sends one request and returns its result; an error response raises the matching
  ``LocalidxError`` (``IndexNotReady``, ``UsageError``, else ``DaemonError``) with the daemon's message.
- ``connect_as_is`` is for callers that must never fail, wait long or restart anything (git hooks): the daemon
  running now, whatever its settings, or ``None`` when none answers.
- Whether to use a daemon at all, and what to do without one, is ``localidx.interface.backend``'s decision, not this
  module's.
- ``start_daemon``, ``stop_daemon`` and ``probe`` are what ``localidx daemon start|stop|status`` do.
"""

from __future__ import annotations

import collections
import errno
import itertools
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localidx import lazylog
from localidx import protocol
from localidx.config import Settings
from localidx.daemon import lifecycle
from localidx.errors import LocalidxError, UsageError

log = lazylog.getLogger(__name__)

START_TIMEOUT_S = 60.0  # a daemon's start loads the index and the model before it listens
RETRY_START_S = 300.0  # after a daemon failed to start, commands start none for this long (start_in_background)
STOP_TIMEOUT_S = 40.0  # a stopping daemon lets its writer finish an embedding batch (server.WRITER_JOIN_S)


_DEFAULT = object()  # "the client's own timeout", distinct from None ("no timeout")


class DaemonUnavailable(LocalidxError):
    """No daemon answers for this work tree (none runs, it went away, or it did not answer in time)."""

    exit_code = 2  # an error to act on: `localidx daemon logs` says why


class DaemonTimeout(DaemonUnavailable):
    """The daemon did not answer within the timeout; the connection is closed (a late answer would be out of step)."""


class DaemonBusy(DaemonUnavailable):
    """The daemon serves as many connections as it may (``OVERLOADED``): try again later."""


class DaemonError(LocalidxError):
    """An error response without a more specific exception; ``code`` and ``data`` are the protocol's."""

    def __init__(self, message: str, code: int = protocol.INTERNAL_ERROR, data: Any = None):
        super().__init__(message)
        self.code = code
        self.data = data


class VersionMismatch(DaemonError):
    """The daemon runs another protocol or package version: restart it."""


class OtherSettings(VersionMismatch):
    """The daemon runs with other settings than this client's, and no settings file changed since it started: the
    difference is this client's own (its ``LOCALIDX_*`` environment, another user config), so the daemon, which others
    use as it is, is left alone; the caller answers in its own process (``localidx daemon restart`` switches the
    daemon to this client's settings). ``names``: the settings that differ."""

    def __init__(self, message: str, names: list[str], pid: int | None):
        super().__init__(message, protocol.VERSION_MISMATCH)
        self.names = names
        self.pid = pid


def _error_from_response(error: dict) -> LocalidxError:
    code = error.get("code")
    message = str(error.get("message", "error"))
    data = error.get("data")
    if code == protocol.INDEX_NOT_READY:
        from localidx.errors import IndexNotReady

        exc: LocalidxError = IndexNotReady(message)
    elif code in (protocol.USAGE_ERROR, protocol.INVALID_PARAMS):
        exc = UsageError(message)
    elif code == protocol.VERSION_MISMATCH:
        return VersionMismatch(message, code, data)
    else:
        return DaemonError(message, code if isinstance(code, int) else protocol.INTERNAL_ERROR, data)
    exc.code = code  # type: ignore[attr-defined]
    exc.data = data  # type: ignore[attr-defined]
    return exc


class Client:
    """One connection to a daemon. Requests are answered in order; use it from one thread at a time."""

    def __init__(self, sock: socket.socket, timeout: float | None = 5.0):
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._ids = itertools.count(1)
        self.timeout = timeout
        self.hello: dict = {}
        self.max_frame_bytes = protocol.MAX_FRAME_BYTES  # what this client reads; the hello raises it
        self.notifications: collections.deque = collections.deque()

    @classmethod
    def open(cls, path: Path, timeout: float | None = 5.0) -> "Client":
        """Connect to the socket at ``path``; raises DaemonUnavailable when nothing listens there.

        A listen queue that is full (a burst of clients; the daemon accepts them as fast as it can) makes a Unix
        socket's connect fail with EAGAIN at once: that is retried until ``timeout``, then DaemonTimeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.002
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(str(path))
                return cls(sock, timeout)
            except socket.timeout:
                sock.close()
                raise DaemonTimeout(f"the daemon at {path} did not accept the connection in {timeout} s") from None
            except BlockingIOError:
                sock.close()  # EAGAIN: the listen queue is full; someone is there
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EAGAIN:
                    raise DaemonUnavailable(f"no daemon listens on {path} ({exc.strerror or exc})") from None
            if deadline is not None and time.monotonic() + delay > deadline:
                raise DaemonTimeout(f"the daemon at {path} did not accept the connection in {timeout} s "
                                    f"(its listen queue stayed full)")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def request(self, method: str, params: dict | None = None, timeout: Any = _DEFAULT) -> Any:
        """Send one request and return its result. ``timeout``: seconds, None to wait as long as it takes; left out,
        the client's. Raises the error response as a LocalidxError; DaemonUnavailable when the
        connection fails or the answer is not one; DaemonTimeout when no answer comes in time."""
        if self._sock is None:
            raise DaemonUnavailable("the connection to the daemon is closed")
        id_ = next(self._ids)
        self._sock.settimeout(self.timeout if timeout is _DEFAULT else timeout)
        frame = protocol.encode(protocol.request(id_, method, params))
        if len(frame) > protocol.MAX_FRAME_BYTES:
            raise UsageError(f"the {method} request is {len(frame):,} bytes, over the protocol's limit of "
                             f"{protocol.MAX_FRAME_BYTES:,} (a query is read up to {protocol.MAX_QUERY_CHARS:,} "
                             "characters anyway)")
        try:
            self._sock.sendall(frame)
        except socket.timeout:
            self.close()
            raise DaemonTimeout(f"the daemon did not answer {method} in time") from None
        except OSError as exc:
            self._raise_if_refused()
            self.close()
            raise DaemonUnavailable(f"lost the connection to the daemon: {exc.strerror or exc}") from None
        while True:
            response = self._read_frame(method)
            if not protocol.is_notification(response):
                break
            self.notifications.append(response)
        if response.get("id") is None and isinstance(response.get("error"), dict) and \
                response["error"].get("code") == protocol.OVERLOADED:
            self.close()
            raise DaemonBusy(str(response["error"].get("message", "the daemon is overloaded")))
        if response.get("id") != id_:
            self.close()
            raise DaemonUnavailable(f"the daemon answered request {response.get('id')!r}, expected {id_}")
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {"message": str(response["error"])}
            raise _error_from_response(error)
        return response["result"]

    def _raise_if_refused(self) -> None:
        """After a failed send: a daemon that refused the connection (OVERLOADED) said so before closing it."""
        try:
            self._sock.settimeout(0.5)
            line = self._reader.readline(protocol.MAX_FRAME_BYTES)
            message = protocol.decode_response(line) if line else {}
        except (OSError, protocol.ProtocolError):
            return
        error = message.get("error")
        if message.get("id") is None and isinstance(error, dict) and error.get("code") == protocol.OVERLOADED:
            self.close()
            raise DaemonBusy(str(error.get("message", "the daemon is overloaded")))

    def subscribe(self, interval_ms: int | None = None) -> dict:
        """``daemon/subscribe``: from now on the daemon sends ``index/progress`` notifications here; returns the
        current status."""
        return self.request("daemon/subscribe", {} if interval_ms is None else {"interval_ms": interval_ms})

    def next_notification(self, timeout: float | None = None) -> dict:
        """The next notification (``{"method", "params"}``), waiting up to ``timeout`` seconds (DaemonTimeout)."""
        if self.notifications:
            return self.notifications.popleft()
        if self._sock is None:
            raise DaemonUnavailable("the connection to the daemon is closed")
        self._sock.settimeout(timeout)
        message = self._read_frame("a notification")
        if not protocol.is_notification(message):
            self.close()
            raise DaemonUnavailable(f"the daemon sent an answer nobody asked for (id {message.get('id')!r})")
        return message

    def _read_frame(self, what: str) -> dict:
        """One frame from the daemon (a response or a notification); failures close the connection."""
        assert self._sock is not None
        try:
            line = self._reader.readline(self.max_frame_bytes + 1)
        except socket.timeout:
            self.close()
            raise DaemonTimeout(f"the daemon did not answer {what} in time") from None
        except OSError as exc:
            self.close()
            raise DaemonUnavailable(f"lost the connection to the daemon: {exc.strerror or exc}") from None
        if not line:
            self.close()
            raise DaemonUnavailable(f"the daemon closed the connection during {what}")
        if len(line) > self.max_frame_bytes or not line.endswith(b"\n"):
            self.close()
            raise DaemonUnavailable(f"the daemon sent a frame over {self.max_frame_bytes} bytes during {what}")
        # A frame that is not a response means the peer is no working daemon: unavailable, like a dropped connection.
        try:
            return protocol.decode_response(line)
        except protocol.ProtocolError as exc:
            self.close()
            raise DaemonUnavailable(f"the daemon sent a bad frame: {exc.message}") from None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._sock is not None:
            try:
                self._reader.close()
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _handshake(paths: lifecycle.DaemonPaths, timeout: float | None, package: bool = True,
               settings: Settings | None = None) -> Client:
    """Connect and say hello; ``package`` asks for this package's version too (else the protocol's only), and
    ``settings`` for a daemon running with these settings (``config.fingerprint``). A daemon that answers
    OVERLOADED is asked again until ``timeout``."""
    lifecycle.check_socket_dir(paths.socket, create=False)
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            return _hello(paths, timeout, package, settings)
        except DaemonBusy:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


def _hello(paths: lifecycle.DaemonPaths, timeout: float | None, package: bool,
           settings: Settings | None = None) -> Client:
    client = Client.open(paths.socket, timeout)
    params = {"protocol_version": protocol.PROTOCOL_VERSION, "client": "localidx",
              "max_frame_bytes": protocol.MAX_NEGOTIATED_FRAME_BYTES}
    version = lifecycle.package_version()
    if package:
        params["package_version"] = version
    if settings is not None:
        from localidx.config import fingerprint

        params["settings_fingerprint"] = fingerprint(settings)
    try:
        try:
            hello = client.request("daemon/hello", params)
        except UsageError as exc:
            # An older daemon refuses a hello parameter it does not know: that is another version, restart it.
            if getattr(exc, "code", None) == protocol.INVALID_PARAMS:
                raise VersionMismatch(f"the daemon does not understand this client's hello ({exc})") from None
            raise
        client.max_frame_bytes = max(protocol.MAX_FRAME_BYTES, int(hello.get("max_frame_bytes") or 0))
        if package and hello.get("package_version") != version:
            raise VersionMismatch(f"the daemon runs localidx {hello.get('package_version')}, the client {version}")
        if Path(str(hello.get("root", ""))).resolve() != paths.root.resolve():
            raise DaemonUnavailable(f"the daemon on {paths.socket} serves {hello.get('root')}, not {paths.root} "
                                    f"(is {lifecycle.SOCK_ENV} shared between work trees?)")
    except BaseException:
        client.close()
        raise
    client.hello = hello
    return client


def connect(root: Path, in_git: bool, settings: Settings, start: bool = False, timeout: float = 5.0,
            restart: bool = True) -> Client:
    """A connection to the daemon of the work tree at ``root``, after the hello handshake.

    A daemon of another version, or one started before a settings file it reads was edited (``.localidx.toml``,
    ``[tool.localidx]``, the user's config), is restarted once (without ``restart``: ``VersionMismatch`` is raised);
    one whose settings differ only by this client's own (its environment) is left running: ``OtherSettings``. With
    ``start``, a missing daemon is started (and waited for). Raises DaemonUnavailable when none runs and ``start``
    is False, or when starting fails."""
    paths = lifecycle.daemon_paths(root, in_git, settings)
    restarted = started = False
    while True:
        try:
            return _handshake(paths, timeout, settings=settings)
        except VersionMismatch as exc:
            other = _own_settings(exc, paths, root, settings)
            if other is not None:
                raise other from None
            if restarted or not restart:
                raise
            reason = restart_reason(exc, settings)
            log.info("restarting the daemon: %s", reason)
            print(f"localidx: restarting the daemon: {reason}", file=sys.stderr)
            stop_daemon(paths)
            _spawn_and_wait(paths, settings=settings)
            restarted = True
        except DaemonTimeout:
            raise
        except DaemonUnavailable:
            if not start or started:
                raise
            lifecycle.clean_stale(paths)
            _spawn_and_wait(paths, settings=settings)
            started = True


def _own_settings(exc: VersionMismatch, paths: lifecycle.DaemonPaths, root: Path,
                  settings: Settings) -> OtherSettings | None:
    """``OtherSettings`` when ``exc`` is a settings mismatch and no settings file changed since the daemon started
    (so the difference is this client's own), else None (another version, or an edit everyone's commands should
    see: the daemon is restarted)."""
    data = exc.data if isinstance(exc.data, dict) else {}
    if "settings" not in data:
        return None
    status = lifecycle.read_status(paths.status) or {}
    started = status.get("started_at")
    if not isinstance(started, (int, float)) or _settings_edited_since(root, started):
        return None
    from localidx.config import differing_settings, setting_digests

    names = differing_settings(setting_digests(settings), data["settings"])
    said = f" ({', '.join(names)})" if names else ""
    return OtherSettings(f"this work tree's daemon runs with other settings than this command's{said}; `localidx "
                         "daemon restart` switches it to them", names, status.get("pid"))


def _settings_edited_since(root: Path, started: float) -> bool:
    """Whether a settings file read for ``root`` (the user's config, the repository's ``.localidx.toml`` or
    ``pyproject.toml``) was written after ``started`` (a time.time())."""
    from localidx.config import repository_files, user_file

    try:
        files = [f for f in [user_file(), *repository_files(root)] if f is not None]
    except LocalidxError:
        return True  # a file that cannot be read now: it changed, and the daemon is restarted to say so
    for file in files:
        try:
            if Path(file.source.removesuffix(" [tool.localidx]")).stat().st_mtime > started:
                return True
        except OSError:
            return True
    return False


def restart_reason(exc: VersionMismatch, settings: Settings) -> str:
    """Why a daemon is restarted, in a few words: the settings that differ, or the versions."""
    data = exc.data if isinstance(exc.data, dict) else {}
    if "settings" in data:
        from localidx.config import differing_settings, setting_digests

        names = differing_settings(setting_digests(settings), data["settings"])
        return "its settings differ" + (f" ({', '.join(names)})" if names else "")
    return str(exc)


def connect_as_is(root: Path, in_git: bool, settings: Settings, timeout: float = 2.0) -> Client | None:
    """A connection to the daemon running now, after the hello handshake, or None when none answers (none runs,
    another version runs, it is unreachable or too slow). Never starts or restarts one, and sends no settings
    fingerprint: a daemon started with other settings is used as it is."""
    try:
        paths = lifecycle.daemon_paths(root, in_git, settings)
        return _handshake(paths, timeout)
    except (LocalidxError, OSError) as exc:
        log.debug("no daemon for %s: %s", root, exc)
        return None


# -- lifecycle commands ---------------------------------------------------------------------------------------


@dataclass
class Probe:
    """What ``localidx daemon status`` finds: ``state`` is running, starting (on its way up: it counts as running),
    unreachable (a live pid whose socket does not answer) or stopped; ``cleaned`` holds the status of a crashed daemon whose files were just removed, ``status``
    the status file still there (unreachable, or stale files kept while another process holds the write lock)."""

    state: str
    paths: lifecycle.DaemonPaths
    hello: dict | None = None
    status: dict | None = None
    cleaned: dict | None = None
    problem: str = ""


def probe(root: Path, in_git: bool, settings: Settings, timeout: float = 5.0) -> Probe:
    """Whether a daemon serves the work tree; tidies up after one that crashed."""
    paths = lifecycle.daemon_paths(root, in_git, settings)
    try:
        with _handshake(paths, timeout, package=False) as client:
            return Probe("running", paths, hello=client.hello, status=lifecycle.read_status(paths.status))
    except VersionMismatch as exc:
        return Probe("running", paths, status=lifecycle.read_status(paths.status), problem=str(exc))
    except (DaemonUnavailable, DaemonError) as exc:
        problem = str(exc)
    starting = lifecycle.starting_pid(paths)
    if starting is not None:
        return Probe("starting", paths, status={"pid": starting}, problem="on its way up: loading the index and model")
    cleaned = lifecycle.clean_stale(paths)
    status = lifecycle.read_status(paths.status)
    if status is not None and lifecycle.pid_alive(status["pid"]):
        return Probe("unreachable", paths, status=status, problem=problem)
    return Probe("stopped", paths, status=status, cleaned=cleaned)


def start_daemon(root: Path, in_git: bool, settings: Settings) -> tuple[dict, bool]:
    """Start the work tree's daemon unless one runs; returns (its hello, whether this call started it)."""
    try:
        with connect(root, in_git, settings) as client:
            return client.hello, False
    except DaemonTimeout:
        raise
    except DaemonUnavailable:
        pass
    with connect(root, in_git, settings, start=True, timeout=START_TIMEOUT_S) as client:
        return client.hello, True


def stop_daemon(paths: lifecycle.DaemonPaths, timeout: float = STOP_TIMEOUT_S) -> int | None:
    """Stop the daemon (``daemon/stop``, else SIGTERM to the recorded pid) and wait for its process to end.

    Returns the pid stopped, or None when none ran. Raises DaemonUnavailable when it is still alive after
    ``timeout`` seconds."""
    lifecycle.check_socket_dir(paths.socket, create=False)  # as every connect does: never a socket of another user
    wait_for_a_start(paths)
    status = lifecycle.read_status(paths.status)
    pid = status["pid"] if status else None
    try:
        with Client.open(paths.socket, 5.0) as client:
            # No hello first: a daemon of another version still understands stop. The pid waited for is the one the
            # kernel reports for the socket's peer, not one the answer claims.
            peer = lifecycle.peer_pid(client._sock)
            answer = client.request("daemon/stop")
            if peer is not None:
                pid = peer
            elif isinstance(answer, dict) and isinstance(answer.get("pid"), int) and answer["pid"] == pid:
                pid = answer["pid"]
    except (DaemonUnavailable, DaemonError) as exc:
        log.debug("daemon/stop failed (%s); trying the recorded pid", exc)
        if pid is None or not lifecycle.pid_alive(pid) or not lifecycle.is_localidx_process(pid):
            lifecycle.clean_stale(paths)
            return None
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if pid is not None and not lifecycle.wait_until(lambda: not lifecycle.pid_alive(pid), timeout):
        raise DaemonUnavailable(f"the daemon (pid {pid}) is still stopping after {timeout:.0f} s")
    lifecycle.clean_stale(paths)
    return pid


def list_daemons(timeout: float = 2.0) -> list[dict]:
    """Every daemon of this user that answers in localidx's runtime dir (``LOCALIDX_SOCK`` ones aside): the
    ``daemon`` part of each hello (root, pid, socket, memory, idle_s, ...), longest idle first. A hello is no
    activity: looking does not keep a daemon up."""
    directory = lifecycle.runtime_dir()
    try:
        lifecycle.check_socket_dir(directory / "probe.sock", create=False)
        sockets = sorted(directory.glob("*.sock"))
    except (LocalidxError, OSError):
        return []
    found = []
    for sock in sockets:
        try:
            with Client.open(sock, timeout) as client:
                hello = client.request("daemon/hello", {"protocol_version": protocol.PROTOCOL_VERSION,
                                                        "client": "localidx"})
        except (LocalidxError, OSError):
            continue
        if isinstance(hello, dict) and isinstance(hello.get("daemon"), dict):
            found.append(hello["daemon"])
    return sorted(found, key=lambda d: -float(d.get("idle_s") or 0))


def _make_room(paths: lifecycle.DaemonPaths, settings: Settings) -> None:
    """Before a daemon starts: stop the daemons idle longest until fewer than ``daemon_max_running`` run (a busy one
    is never stopped)."""
    running = [d for d in list_daemons() if d.get("socket") != str(paths.socket)]
    extra = len(running) - (settings.daemon_max_running - 1)
    for daemon in running:
        if extra <= 0:
            break
        writer = daemon.get("writer") or {}
        if writer.get("state") not in ("idle", None) or (daemon.get("connections") or {}).get("subscribed"):
            continue
        try:  # asked, not waited for: it finishes its own way out while this command goes on
            with Client.open(Path(daemon["socket"]), 2.0) as client:
                client.request("daemon/stop")
        except (LocalidxError, OSError) as exc:
            log.debug("could not stop the daemon of %s to make room: %s", daemon["root"], exc)
            continue
        log.info("stopped the daemon of %s (idle %.0f s): at most %d run at once", daemon["root"],
                 daemon.get("idle_s") or 0, settings.daemon_max_running)
        extra -= 1


def wait_for_a_start(paths: lifecycle.DaemonPaths, timeout: float = START_TIMEOUT_S) -> None:
    """A daemon on its way up counts as running: wait until it listens (or its start fails) before acting on it."""
    if lifecycle.starting_pid(paths) is None:
        return
    lifecycle.wait_until(lambda: lifecycle.starting_pid(paths) is None or lifecycle.socket_listening(paths.socket),
                         timeout)


def start_in_background(root: Path, in_git: bool, settings: Settings) -> bool:
    """Start the work tree's daemon and return at once, without waiting for it (the caller does its own work
    meanwhile); True when one was started. Nothing is started while the work tree's write lock is held (a daemon
    on its way up holds it, and so does an indexer: a second daemon would only wait for it and give up), nor for
    ``RETRY_START_S`` after a daemon failed to start (its log says why; ``localidx daemon start`` tries at once)."""
    from localidx.store.lock import IndexBusy, WriteLock

    paths = lifecycle.daemon_paths(root, in_git, settings)
    failed = lifecycle.start_failure(paths)
    if failed is not None and time.time() - failed < RETRY_START_S:
        log.debug("not starting the daemon: it failed to start %.0f s ago (see %s)", time.time() - failed, paths.log)
        return False
    lifecycle.clean_stale(paths)
    try:
        with WriteLock(paths.lock):
            pass
    except IndexBusy:
        return False
    if not lifecycle.claim_start(paths):
        return False  # another command is starting it: that one says so
    _make_room(paths, settings)
    _children[:] = [p for p in _children if p.poll() is None]  # reap daemons of this process that have ended
    process = lifecycle.spawn(paths)
    _children.append(process)
    lifecycle.note_starting(paths, process.pid)
    return True


# Daemons this process started, kept so that their Popen objects are not collected while they run (a warning).
_children: list = []


def _spawn_and_wait(paths: lifecycle.DaemonPaths, timeout: float = START_TIMEOUT_S,
                    settings: Settings | None = None) -> None:
    """Start ``localidx daemon run`` detached and wait until a daemon answers hello (it or one started alongside).
    A full disk under the work tree's state dir (where the start is claimed and the daemon logs) is ``DiskFull``."""
    try:
        _spawn_and_wait_or_fail(paths, timeout, settings)
    except OSError as exc:
        from localidx.errors import disk_full

        raise (disk_full(exc, paths.worktree) or exc) from None


def _spawn_and_wait_or_fail(paths: lifecycle.DaemonPaths, timeout: float, settings: Settings | None) -> None:
    _children[:] = [p for p in _children if p.poll() is None]  # reap daemons of this process that have ended
    if lifecycle.claim_start(paths):
        if settings is not None:
            _make_room(paths, settings)
        process = lifecycle.spawn(paths)
        _children.append(process)
        lifecycle.note_starting(paths, process.pid)
    else:
        process = None  # another command is starting it: wait for that one
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _handshake(paths, 2.0, package=False).close()
            return
        except DaemonUnavailable:
            pass
        if process is None and lifecycle.starting_pid(paths) is None:
            try:
                _handshake(paths, 2.0, package=False).close()
                return
            except DaemonUnavailable:
                raise DaemonUnavailable(f"the daemon another command started did not start (see {paths.log})") from None
        if process is not None and process.poll() is not None:
            # It exited: the reason is the last thing it logged. A daemon started alongside may still answer.
            try:
                _handshake(paths, 2.0, package=False).close()
                return
            except DaemonUnavailable:
                tail = [line for line in lifecycle.log_tail(paths.log, 20) if line.strip()]
                # Its stderr goes to the log: the last line is usually the CLI's own "localidx: error: ...".
                reason = tail[-1].removeprefix("localidx: error: ") if tail else f"exit status {process.returncode}"
                raise DaemonUnavailable(f"the daemon did not start: {reason} (see {paths.log})") from None
        time.sleep(0.05)
    raise DaemonTimeout(f"the daemon did not answer within {timeout:.0f} s of starting (see {paths.log})")
