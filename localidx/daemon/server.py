"""The daemon process: the socket, one thread per connection, the idle clock and an orderly shutdown.

``run_daemon`` is ``localidx daemon run``. In order: log to ``daemon.log``; take the write lock (held until exit);
load the embedder once and warm it; start the writer thread with a full reconcile as its first job; listen on the
socket (0600, in a 0700 dir); write the status file; start the watcher; serve until ``daemon/stop``, a signal or
the idle timeout. Shutdown removes the status file and the socket first (so a new daemon can start at once), stops
the watcher and the writer, lets requests in flight finish (bounded), then releases the lock by exiting.

Each connection reads frames with a bounded ``readline`` (an oversize line is answered with ``PARSE_ERROR`` and the
rest of it discarded), answers each with exactly one frame, and survives anything a client sends. Handlers are
looked up in ``routes.ROUTES`` and called as ``handler(daemon, params)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path

from localidx import protocol
from localidx.config import Settings
from localidx.daemon import lifecycle
from localidx.errors import LocalidxError, UsageError
from localidx.protocol import (INDEX_NOT_READY, INTERNAL_ERROR, MAX_FRAME_BYTES, PARSE_ERROR, SHUTTING_DOWN,
                               USAGE_ERROR, ProtocolError)

log = logging.getLogger(__name__)

LOG_MAX_BYTES = 1_000_000  # one rotated file kept: at most about 2 MB of logs per work tree
ACCEPT_TICK_S = 0.5  # how often the accept loop wakes up to look at the stop flag and the idle clock
DRAIN_S = 5.0  # how long shutdown waits for requests in flight to be answered
WRITER_JOIN_S = 30.0  # how long shutdown waits for the writer to end its run (it stops between embedding batches)
LOCK_WAIT_S = 10.0  # a daemon that is stopping still holds the lock for a moment: a restart waits for it


class Daemon:
    """The state handlers see: the work tree, settings, the writer, a reader factory, and the stop switch."""

    def __init__(self, root: Path, in_git: bool, settings: Settings, paths: lifecycle.DaemonPaths, index_paths,
                 embedder, writer):
        self.root = root
        self.in_git = in_git
        self.settings = settings
        self.paths = paths
        self.index_paths = index_paths
        self.embedder = embedder
        self.writer = writer
        self.pid = os.getpid()
        self.version = lifecycle.package_version()
        self.started_at = time.time()
        self.watcher_mode = "off"
        self._stop = threading.Event()
        self._stop_reason = ""
        self._lock = threading.Lock()
        self._last_activity = time.monotonic()
        self._in_flight = 0
        self._connections: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._socket_ino: int | None = None
        self._released = False
        self._store = None  # the readers' shared ChunkStore (see reader)

    # -- for handlers ---------------------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def touch(self) -> None:
        """Record activity (a request, a change): the idle clock starts again."""
        self._last_activity = time.monotonic()

    @contextlib.contextmanager
    def reader(self):
        """A read-only Index for this thread (its own catalog connection) around the shared warm embedder and the
        shared read-only store; closed on exit. Sharing one LanceDB connection keeps its index caches warm: opening
        a connection per request re-read the full-text and ANN indexes every time (search through the socket took
        168 ms instead of ~40 ms at 115k chunks: benchmarks/context.py)."""
        from localidx.store.index import open_index_at

        index = open_index_at(self.index_paths, self.settings, read_only=True, embedder=self.embedder,
                              store=self._reader_store())
        try:
            yield index
        finally:
            index.close()

    def _reader_store(self):
        """The readers' ChunkStore, made on first use, again while the index directory does not exist yet, and again
        when the writer has switched to a rebuilt generation."""
        with self._lock:
            generation = self.index_paths.generation()
            if self._store is None or self._store._db is None or self._store.generation != generation:
                from localidx.store.index import open_store

                self._store = open_store(self.index_paths, self.settings, self.embedder, read_only=True,
                                         generation=generation)
            return self._store

    def describe(self) -> dict:
        """The daemon's own state, for ``daemon/hello`` and ``index/status``."""
        return {
            "pid": self.pid, "socket": str(self.paths.socket), "root": str(self.root), "index": str(self.paths.state),
            "status_file": str(self.paths.status), "log": str(self.paths.log), "package_version": self.version,
            "protocol_version": protocol.PROTOCOL_VERSION, "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 1), "idle_timeout_s": self.settings.daemon_idle_s,
            "model": self.embedder.model_id, "watcher": self.watcher_mode, "writer": self.writer.describe(),
        }

    def status_record(self) -> dict:
        """What the status file holds."""
        return {"pid": self.pid, "socket": str(self.paths.socket), "protocol_version": protocol.PROTOCOL_VERSION,
                "package_version": self.version, "started_at": self.started_at, "root": str(self.root),
                "log": str(self.paths.log)}

    def release_files(self) -> None:
        """Remove the status file, then the socket path, if they are still this daemon's (idempotent).

        Called before answering ``daemon/stop``: the client may start a new daemon as soon as it has the answer,
        and the new one's files must not be removed by this one on its way out. Connections already open stay
        open; no new client can reach this daemon once its socket path is gone."""
        with self._lock:
            if self._released:
                return
            self._released = True
        status = lifecycle.read_status(self.paths.status)
        if status is not None and status.get("pid") == self.pid:
            lifecycle.unlink_quietly(self.paths.status)
        try:
            if self._socket_ino is not None and os.stat(self.paths.socket).st_ino == self._socket_ino:
                lifecycle.unlink_quietly(self.paths.socket)
        except FileNotFoundError:
            pass

    def request_stop(self, reason: str) -> None:
        """Begin shutdown (the accept loop notices within ACCEPT_TICK_S); requests arriving now get SHUTTING_DOWN."""
        if not self._stop.is_set():
            self._stop_reason = reason
            log.info("stopping: %s", reason)
            self._stop.set()

    # -- the socket ---------------------------------------------------------------------------------------------

    def listen(self) -> None:
        """Bind the socket (0600, in a private dir) and write the status file."""
        path = self.paths.socket
        lifecycle.check_socket_dir(path, create=True)
        if path.is_socket() or path.exists():
            if lifecycle.socket_listening(path):
                raise LocalidxError(f"another daemon listens on {path} (set LOCALIDX_SOCK per work tree?)")
            if not path.is_socket():
                raise LocalidxError(f"{path} exists and is not a socket; remove it or set LOCALIDX_SOCK")
            lifecycle.unlink_quietly(path)  # left by a daemon that crashed
        # Bound under a temporary name and renamed into place once listening: a socket file that exists but refuses
        # connections is always a dead daemon's, which lets clients tell stale from starting.
        staging = path.with_name(f".{self.pid}.sock")
        lifecycle.unlink_quietly(staging)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # No umask games (the writer thread is already creating files); the socket is made 0600 before it listens,
        # and it is reachable under its real name only after that.
        listener.bind(str(staging))
        os.chmod(staging, 0o600)
        listener.listen(64)
        listener.settimeout(ACCEPT_TICK_S)
        os.replace(staging, path)
        self._listener = listener
        self._socket_ino = os.stat(path).st_ino
        lifecycle.write_status(self.paths.status, self.status_record())
        log.info("listening on %s (pid %d, localidx %s, protocol %d)", path, self.pid, self.version,
                 protocol.PROTOCOL_VERSION)

    def serve(self) -> None:
        """Accept connections until asked to stop; each gets a thread."""
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                self._check_idle()
                continue
            except OSError as exc:
                if self._stop.is_set():
                    break
                log.warning("accept failed: %s", exc)
                time.sleep(0.1)  # out of file descriptors, say: do not spin
                continue
            conn.settimeout(None)
            with self._lock:
                self._connections.add(conn)
            threading.Thread(target=self._serve_connection, args=(conn,), name="localidx-conn", daemon=True).start()

    def _check_idle(self) -> None:
        idle_s = self.settings.daemon_idle_s
        if idle_s <= 0 or self._in_flight or self.writer.busy:
            return
        if time.monotonic() - self._last_activity >= idle_s:
            self.request_stop(f"idle for {idle_s:g} s")

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            reader = conn.makefile("rb")
            while True:
                line = reader.readline(MAX_FRAME_BYTES + 1)
                if not line:
                    return
                if len(line) > MAX_FRAME_BYTES:
                    if not line.endswith(b"\n"):
                        _discard_line(reader)
                    response = protocol.error(None, ProtocolError(PARSE_ERROR, f"frame over {MAX_FRAME_BYTES} bytes"))
                    if not _send(conn, response):
                        return
                    continue
                if not line.strip():
                    continue  # a blank line is no frame (someone pressed Enter in socat)
                with self._counting():
                    if not _send(conn, self.handle_frame(line)):
                        return
        except OSError as exc:
            log.debug("connection dropped: %s", exc)
        except Exception:  # the connection's own bug must not end the daemon
            log.exception("connection failed")
        finally:
            with self._lock:
                self._connections.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    @contextlib.contextmanager
    def _counting(self):
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
            self.touch()

    def handle_frame(self, frame: bytes) -> dict:
        """One request frame -> its one response (never raises)."""
        try:
            id_, method, params = protocol.decode_request(frame)
        except ProtocolError as exc:
            found = exc.data.get("id") if isinstance(exc.data, dict) else None
            return protocol.error(found, ProtocolError(exc.code, exc.message))
        except Exception as exc:  # decode_request raises only ProtocolError; a slip there must not drop the frame
            log.exception("cannot decode a frame")
            return protocol.error(None, ProtocolError(PARSE_ERROR, _one_line(exc)))
        return self.dispatch(id_, method, params)

    def dispatch(self, id_, method: str, params: dict) -> dict:
        """Run the handler of a decoded request; its exceptions become error responses."""
        from localidx.daemon.routes import ROUTES

        if self._stop.is_set():
            return protocol.error(id_, ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))
        self.touch()
        try:
            return protocol.result(id_, ROUTES[method](self, params))
        except ProtocolError as exc:
            return protocol.error(id_, exc)
        except Exception as exc:
            return protocol.error(id_, _as_protocol_error(exc, method))

    # -- shutdown -----------------------------------------------------------------------------------------------

    def shutdown(self, watcher) -> None:
        """Stop in order: files, watcher, writer, requests in flight, connections, the writer thread."""
        self._stop.set()
        self.release_files()
        if watcher is not None:
            with contextlib.suppress(Exception):
                watcher.stop()
        self.writer.stop()
        lifecycle.wait_until(lambda: self._in_flight == 0, DRAIN_S)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.writer.join(WRITER_JOIN_S)
        if self.writer.is_alive():
            log.warning("the writer did not finish within %.0f s; exiting anyway (the next run resumes)",
                        WRITER_JOIN_S)
        log.info("stopped (%s)", self._stop_reason or "shutdown")


def _discard_line(reader) -> None:
    while True:
        chunk = reader.readline(64 * 1024)
        if not chunk or chunk.endswith(b"\n"):
            return


def _send(conn: socket.socket, response: dict) -> bool:
    """Write one response frame; False when the client is gone."""
    try:
        data = protocol.encode(response)
    except (TypeError, ValueError) as exc:
        log.exception("cannot encode a response")
        data = protocol.encode(protocol.error(response.get("id"), ProtocolError(INTERNAL_ERROR, _one_line(exc))))
    if len(data) > MAX_FRAME_BYTES:
        message = f"the response ({len(data)} bytes) is over the {MAX_FRAME_BYTES}-byte frame limit"
        data = protocol.encode(protocol.error(response.get("id"), ProtocolError(INTERNAL_ERROR, message)))
    try:
        conn.sendall(data)
        return True
    except OSError as exc:
        log.debug("client went away before its answer: %s", exc)
        return False


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _as_protocol_error(exc: Exception, method: str) -> ProtocolError:
    from localidx.retrieve import IndexNotReady

    if isinstance(exc, IndexNotReady):
        return ProtocolError(INDEX_NOT_READY, str(exc))
    if isinstance(exc, UsageError):
        return ProtocolError(USAGE_ERROR, str(exc))
    if isinstance(exc, LocalidxError):
        log.warning("%s failed: %s", method, exc)
        return ProtocolError(INTERNAL_ERROR, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    log.exception("%s failed", method)
    return ProtocolError(INTERNAL_ERROR, _one_line(exc))


# -- the entry point ----------------------------------------------------------------------------------------------


def _setup_logging(path: Path, to_stderr: bool) -> list[logging.Handler]:
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("localidx")
    logger.setLevel(logging.DEBUG if os.environ.get("LOCALIDX_DEBUG") == "1" else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s")
    handlers: list[logging.Handler] = [RotatingFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=1,
                                                           encoding="utf-8")]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    return handlers


def _start_watcher(daemon: Daemon, writer):
    settings = daemon.settings
    if not settings.watch:
        log.info("watching is off (watch = false): changes arrive through git hooks and requests")
        daemon.watcher_mode = "off"
        return None
    try:
        from localidx.discover.watch import Watcher
    except ImportError as exc:
        log.warning("no file watcher (%s): changes arrive through git hooks and requests only", exc)
        daemon.watcher_mode = "unavailable"
        return None

    def on_change(paths: set[str]) -> None:
        daemon.touch()
        writer.submit(sorted(paths), reason="watch")

    try:
        watcher = Watcher(daemon.root, settings, on_change=on_change, debounce_s=settings.watch_debounce_s)
        watcher.start()
    except Exception:
        log.exception("the file watcher did not start: changes arrive through git hooks and requests only")
        daemon.watcher_mode = "failed"
        return None
    daemon.watcher_mode = getattr(watcher, "mode", "on")
    return watcher


def run_daemon(root: Path, in_git: bool, settings: Settings, log_to_stderr: bool = True) -> None:
    """Serve the work tree at ``root`` until stopped (``localidx daemon run``); see the module docstring.

    Raises LocalidxError when another daemon already serves it, the socket dir is unsafe, or the lock is held."""
    from localidx.lock import WriteLock
    from localidx.store.paths import index_paths

    paths = lifecycle.daemon_paths(root, in_git, settings)
    ipaths = index_paths(root, in_git, settings.home)
    lifecycle.check_socket_dir(paths.socket, create=True)
    status = lifecycle.read_status(paths.status)
    if status is not None and lifecycle.socket_listening(Path(status["socket"])):
        raise LocalidxError(f"a daemon already serves {root} (pid {status['pid']}, socket {status['socket']})")
    handlers = _setup_logging(paths.log, log_to_stderr)
    try:
        with WriteLock(paths.lock, wait_s=LOCK_WAIT_S):
            _serve(root, in_git, settings, paths, ipaths)
    except LocalidxError as exc:
        log.error("cannot serve %s: %s", root, exc)  # one line: the client that started it shows the last one
        raise
    except Exception:
        log.exception("the daemon failed")
        raise
    finally:
        for handler in handlers:
            logging.getLogger("localidx").removeHandler(handler)
            handler.close()


def _serve(root: Path, in_git: bool, settings: Settings, paths: lifecycle.DaemonPaths, ipaths) -> None:
    from localidx.daemon.writer import Writer
    from localidx.embed import get_embedder

    log.info("starting for %s (localidx %s, pid %d)", root, lifecycle.package_version(), os.getpid())
    started = time.perf_counter()
    embedder = get_embedder(settings.embed_model, threads=settings.embed_threads or None)
    # Load the model now, once: every later query finds it warm, and readers never race to load it.
    embedder.embed_query("localidx warm-up")
    log.info("model %s ready in %.2f s", embedder.model_id, time.perf_counter() - started)

    writer = Writer(root, ipaths, settings, embedder)
    daemon = Daemon(root, in_git, settings, paths, ipaths, embedder, writer)
    writer.on_activity = daemon.touch  # a run that ends restarts the idle clock
    writer.submit(None, reason="reconcile on start")  # what changed while no daemon ran
    writer.start()
    writer.ready.wait()
    if writer.open_error is not None:
        raise LocalidxError(f"cannot open the index: {_one_line(writer.open_error)}")

    previous = {sig: signal.signal(sig, lambda signum, _frame: daemon.request_stop(signal.Signals(signum).name))
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    watcher = None
    try:
        daemon.listen()
        watcher = _start_watcher(daemon, writer)
        daemon.serve()
    finally:
        daemon.shutdown(watcher)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
