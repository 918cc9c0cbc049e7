"""The daemon process: the socket, an event loop over every connection, a small pool of request workers, the idle
clocks and an orderly shutdown.

``run_daemon`` is ``localidx daemon run``. In order: log to ``daemon.log``; take the write lock (held until exit);
load the embedder once and warm it; start the writer thread with a full reconcile as its first job; listen on the
socket (0600, in a 0700 dir); write the status file; start the watcher; serve until ``daemon/stop``, a signal or
the idle timeout. Shutdown removes the status file and the socket first (so a new daemon can start at once), stops
the watcher and the writer, lets requests in flight finish (bounded), then releases the lock by exiting.

**Threads are bounded.** One event loop (the main thread, ``selectors``) accepts, reads and writes every connection;
complete request frames go to ``WORKERS`` request threads. A connection costs a buffer, not a thread: an idle client,
or one that sent half a frame and went quiet, costs nothing else. Requests of one connection are handled one at a
time, in order (each gets exactly one response, in order); requests of different connections run side by side on the
workers. A request that waits for the writer (``index/reindex`` with ``wait``) holds no worker: its handler returns a
``Future`` and the response goes out when it resolves. Past ``daemon_max_connections`` open connections a new one
is answered ``OVERLOADED`` and closed. The listen backlog is the system's maximum, and the accept loop drains it at
once, so a burst of clients waits in the queue instead of being refused.

**Frames.** Requests are at most ``MAX_FRAME_BYTES``: an oversize line is answered with ``PARSE_ERROR`` and the rest
of it discarded. Responses are limited by the connection's frame limit, which ``daemon/hello`` may raise (localidx's
own clients raise it to 1 GiB); a response over it is answered with ``RESPONSE_TOO_LARGE``, naming the size. A
connection that pipelines more than ``MAX_QUEUED`` requests, or does not read its answers, is not read from until it
catches up (backpressure, not memory).

**Notifications.** ``daemon/subscribe`` makes a connection a subscriber: the writer's phase changes and progress are
published to it as ``index/progress`` notifications (the index's state, computed cheaply in a worker and throttled
to the subscriber's interval; a change of state goes out at once). Notifications are not activity: a subscribed
editor does not keep the daemon from releasing its model or idling out.

**Idle release.** After ``daemon_release_s`` without a request that reads the index or a writer run, the readers'
LanceDB connection (and its index caches) and the writer's open index are dropped and freed memory is returned to
the system; the next query opens them again. The model is dropped too when loading it cost more than
``KEEP_MODEL_MB``: the default model costs about 55 MB and a reload about 0.3 s, most of the first query after a
release (measured at 100k chunks: 150-160 ms with the model kept, 470-550 ms with it dropped), so it stays. After
``daemon_idle_s`` without any request or change the daemon exits. It exits too when its work tree or its state
dir is deleted (checked every ``GONE_CHECK_S``): nothing is left for it to serve.

**Idle trim.** Requests leave freed memory in the allocator's heap (``index/status`` alone reads every row's kind
and language); ``TRIM_AFTER_S`` after the last request, with nothing in flight, it is given back to the system, so
an idle daemon's RSS is what it holds, not what its busiest moment needed.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import os
import selectors
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from localidx import protocol
from localidx.config import Settings
from localidx.daemon import lifecycle, memory
from localidx.daemon.frames import as_protocol_error, encode_frame, max_connections, one_line, oversize
from localidx.errors import LocalidxError
from localidx.protocol import (DEFAULT_INTERVAL_MS, INTERNAL_ERROR, MAX_FRAME_BYTES, OVERLOADED, PARSE_ERROR,
                               SHUTTING_DOWN, ProtocolError)

log = logging.getLogger(__name__)

LOG_MAX_BYTES = 1_000_000  # one rotated file kept: at most about 2 MB of logs per work tree
TICK_S = 0.5  # how often the loop wakes up by itself to look at the stop flag and the idle clocks
GONE_CHECK_S = 5.0  # how often the loop looks whether the work tree and the state dir still exist
DRAIN_S = 5.0  # how long shutdown waits for requests in flight to be answered
WRITER_JOIN_S = 30.0  # how long shutdown waits for the writer to end its run (it stops between embedding batches)
LOCK_WAIT_S = 10.0  # a daemon that is stopping still holds the lock for a moment: a restart waits for it
WORKERS = 4  # request threads: queries are CPU-bound, so more than a few only queue inside ONNX Runtime and LanceDB
KEEP_MODEL_MB = 100.0  # the idle release keeps a model whose load added at most this much (see the docstring)
TRIM_AFTER_S = 2.0  # quiet time after a request before the heap's free pages are given back
READ_CHUNK = 256 * 1024
SEND_CHUNK = 1024 * 1024
MAX_QUEUED = 64  # frames of one connection waiting to be handled before the loop stops reading it
# Bytes of answers a connection has not read before the loop stops reading it and handing its frames to workers:
# what one connection holds is bounded by this plus one answer, however much it sends without reading.
MAX_PENDING_OUT = 1024 * 1024
STALLED_S = 30.0  # a connection over MAX_PENDING_OUT that has read nothing for this long is closed
# Methods that do not use the model or the index: they do not restart the release clock (they still count as
# activity for the idle exit, except the passive ones below).
_LIGHT = {"daemon/hello", "daemon/stop", "daemon/subscribe", "index/reindex"}
# Methods that are no activity for the idle exit: a window that is only open subscribes, and `daemon status`,
# `daemon list` and every client say hello; a daemon is kept up by the requests that follow, not by being looked at.
_PASSIVE = {"daemon/hello", "daemon/subscribe"}


class Session:
    """One client connection, as the event loop sees it. The loop thread owns every field, except that the
    ``daemon/hello`` and ``daemon/subscribe`` handlers set ``max_frame_bytes`` and ``interval_s`` on a worker before
    their response is queued (the loop reads them only after that)."""

    def __init__(self, sock: socket.socket, number: int):
        self.sock = sock
        self.number = number
        self.inbuf = bytearray()
        self.discarding = False  # inside an oversize line: drop bytes until its newline
        self.queue: deque = deque()  # frames (bytes) and ready answers (_Ready) waiting their turn
        self.busy = False  # one of its requests is with a worker (or waits on a Future)
        self.out: deque = deque()  # encoded frames not yet sent
        self.out_offset = 0
        self.out_bytes = 0
        self.stalled_since: float | None = None  # over MAX_PENDING_OUT and nothing read by the client since then
        self.eof = False  # the client half-closed: answer what it sent, then close
        self.closed = False
        self.mask = 0
        self.max_frame_bytes = MAX_FRAME_BYTES
        self.interval_s: float | None = None  # set by daemon/subscribe
        self.subscribed = False
        self.last_notified = 0.0
        # Held while sending: a worker sends its answer itself when nothing is queued before it (no hand-off to
        # the loop on the way out), and the loop sends everything else.
        self.send_lock = threading.Lock()


class _Ready:
    """An answer decided by the loop itself (an oversize frame), kept in the queue to stay in order."""

    __slots__ = ("response",)

    def __init__(self, response: dict):
        self.response = response


class Deferred:
    """A handler's answer that comes later (``index/reindex`` with ``wait``): the worker is free meanwhile."""

    def __init__(self, id_, method: str, future: Future):
        self.id = id_
        self.method = method
        self.future = future


class Daemon:
    """The state handlers see: the work tree, settings, the writer, a reader factory, and the stop switch."""

    def __init__(self, root: Path, in_git: bool, settings: Settings, paths: lifecycle.DaemonPaths, index_paths,
                 embedder, writer):
        self.root = root
        self.in_git = in_git
        self.settings = settings
        from localidx.config import fingerprint

        self.settings_fingerprint = fingerprint(settings)
        self.paths = paths
        self.index_paths = index_paths
        self.embedder = embedder
        self.writer = writer
        self.pid = os.getpid()
        self.version = lifecycle.package_version()
        self.started_at = time.time()
        self.watcher_mode = "off"
        self.watcher = None  # set once it runs (``_start_watcher``)
        self._stop = threading.Event()
        self._stop_reason = ""
        self._lock = threading.Lock()
        self._last_activity = time.monotonic()
        self._last_use = time.monotonic()  # the model or the index was used (the release clock)
        self._in_flight = 0
        self._listener: socket.socket | None = None
        self._socket_ino: int | None = None
        self._released_files = False
        self._store = None  # the readers' shared ChunkStore (see reader)
        self._local = threading.local()
        # The event loop's state (loop thread only, except the completion queue and the wake-up pipe).
        self._selector: selectors.BaseSelector | None = None
        self._sessions: dict[int, Session] = {}
        self._numbers = 0
        self._completions: deque = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._pool: ThreadPoolExecutor | None = None
        self.max_connections = max_connections(settings)
        self.refused = 0  # connections answered OVERLOADED
        # Notifications and the idle release.
        self._status_dirty = False
        self._status_urgent = False
        self._status_job = False
        self._status_seq = 0
        self._last_state: str | None = None
        self._last_status: dict | None = None
        self._last_publish = 0.0
        self.released = False  # the model and the caches are released until the next query
        self.releases = 0
        self._release_job = False
        self._trimmed_at = time.monotonic()
        self._gone_checked = time.monotonic()
        self._trim_job = False
        self.trims = 0

    # -- for handlers ---------------------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def touch(self) -> None:
        """Record activity (a request, a change): the idle clock starts again."""
        self._last_activity = time.monotonic()

    def used(self) -> None:
        """The model or the index is in use (a query, a run): the release clock starts again."""
        self._last_use = time.monotonic()
        self.released = False

    def session(self) -> Session | None:
        """The connection whose request this thread is handling (None outside the socket, in tests)."""
        return getattr(self._local, "session", None)

    @contextlib.contextmanager
    def reader(self):
        """A read-only Index for this request around the shared warm embedder and the shared read-only store.

        Sharing one LanceDB connection keeps its index caches warm: opening a connection per request re-read the
        full-text and ANN indexes every time (search through the socket took 168 ms instead of ~40 ms at 115k
        chunks: benchmarks/context.py). The catalog connection is the request thread's own (SQLite connections
        belong to their thread) and is kept between requests: opening one cost 2.5 ms a request. In autocommit mode
        every read sees what the writer has committed. A new generation, or the idle release, makes each thread
        open a fresh one on its next request. (A hybrid search embeds its query while its BM25 arm runs:
        ``retrieve.search`` does that itself.)"""
        from localidx.store.catalog import Catalog
        from localidx.store.index import Index

        self.used()
        store = self._reader_store()
        local = self._local
        key = (store.generation, self.releases)
        if getattr(local, "catalog_key", None) != key:
            if getattr(local, "catalog", None) is not None:
                with contextlib.suppress(Exception):
                    local.catalog.close()
            path = self.index_paths.catalog_for(store.generation)
            local.catalog = Catalog(path, create=False)
            # A catalog that does not exist yet reads as empty: look again next time rather than keep that.
            local.catalog_key = key if path.exists() else None
        yield Index(paths=self.index_paths, settings=self.settings, catalog=local.catalog, store=store,
                    embedder=self.embedder, generation=store.generation)

    def _reader_store(self):
        """The readers' ChunkStore, made on first use (and after a release), again while the index directory does
        not exist yet, and again when the writer has switched to a rebuilt generation."""
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
            "idle_s": round(time.monotonic() - self._last_activity, 1),
            "release_after_s": self.settings.daemon_release_s, "model": self.embedder.model_id,
            "watcher": self.watcher_mode, "writer": self.writer.describe(),
            "connections": {"open": len(self._sessions), "max": self.max_connections, "refused": self.refused,
                            "subscribed": sum(1 for s in list(self._sessions.values()) if s.subscribed)},
            "memory": {**memory.usage(), "released": self.released, "releases": self.releases, "trims": self.trims,
                       "model_loaded": bool(getattr(self.embedder, "loaded", True)),
                       "model_loads": getattr(self.embedder, "loads", None),
                       "model_mb": getattr(self.embedder, "load_mb", None), "in_memory": _in_memory()},
        }

    def update_pending(self) -> bool:
        """Whether a change is seen but not yet searchable: paths queued for the writer, a run chunking changed
        files, or file events the watcher is still gathering. A full pass that has found no change yet (the start-up
        check) is not one."""
        writer = self.writer
        if writer.queued() > 0 or (writer.busy and writer.phase == "chunk"):
            return True
        return bool(getattr(self.watcher, "pending", False))

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
            if self._released_files:
                return
            self._released_files = True
        status = lifecycle.read_status(self.paths.status)
        if status is not None and status.get("pid") == self.pid:
            lifecycle.unlink_quietly(self.paths.status)
        try:
            if self._socket_ino is not None and os.stat(self.paths.socket).st_ino == self._socket_ino:
                lifecycle.unlink_quietly(self.paths.socket)
        except FileNotFoundError:
            pass

    def request_stop(self, reason: str) -> None:
        """Begin shutdown (the loop notices at once); requests arriving now get SHUTTING_DOWN."""
        if not self._stop.is_set():
            self._stop_reason = reason
            log.info("stopping: %s", reason)
            self._stop.set()
            self._wake()

    # -- notifications ------------------------------------------------------------------------------------------

    def notify(self, urgent: bool = False) -> None:
        """The index or the writer changed (any thread): subscribers get a fresh ``index/progress`` soon, at once
        when ``urgent`` (a phase or state change), else within their interval."""
        self._status_dirty = True
        if urgent:
            self._status_urgent = True
        self._wake()

    def light_status(self) -> dict:
        """The ``index/progress`` notification's params: the state without a work-tree walk or a table scan."""
        from localidx.store.catalog import Catalog

        writer = self.writer.describe()
        chunks = 0
        table = self._reader_store().snapshot()
        if table is not None:
            chunks = table.count_rows()
        catalog = Catalog(self.index_paths.catalog_for(self.index_paths.generation()), create=False)
        try:
            files = catalog.connection.execute("SELECT COUNT(*) FROM files WHERE skipped = ''").fetchone()[0]
        finally:
            catalog.close()
        pending = min(chunks, max(0, int(writer.get("pending_vectors") or 0)))
        if self.writer.busy:
            state = "INDEXING"
        elif not files or not chunks:
            state = "EMPTY"
        elif pending:
            state = "STALE"
        else:
            state = "READY"
        progress = writer.get("progress") or {}
        percent = None
        if state == "INDEXING" and isinstance(progress.get("done"), int) and progress.get("total"):
            percent = min(100, int(100 * progress["done"] / progress["total"]))
        with self._lock:
            self._status_seq += 1
            seq = self._status_seq
        status = {"seq": seq, "state": state, "files": files, "chunks": chunks, "chunks_with_vectors": chunks - pending,
                  "embedding_progress": round((chunks - pending) / chunks, 4) if chunks else 0.0, "percent": percent,
                  "writer": {k: v for k, v in writer.items() if k != "last_run"},
                  "memory": {"released": self.released, "rss_mb": memory.usage().get("rss_mb")}}
        self._last_status = status
        return status

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
        # The system's maximum backlog (net.core.somaxconn caps it): a burst of clients queues instead of being
        # refused while the loop accepts them.
        listener.listen(socket.SOMAXCONN)
        listener.setblocking(False)
        os.replace(staging, path)
        self._listener = listener
        self._socket_ino = os.stat(path).st_ino
        lifecycle.write_status(self.paths.status, self.status_record())
        log.info("listening on %s (pid %d, localidx %s, protocol %d, up to %d connections)", path, self.pid,
                 self.version, protocol.PROTOCOL_VERSION, self.max_connections)

    def serve(self) -> None:
        """Run the event loop until asked to stop."""
        assert self._listener is not None
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="localidx-request")
        while not self._stop.is_set():
            self._turn(self._timeout())
            self._check_idle()
            self._drop_stalled()

    def _timeout(self) -> float:
        if self._status_dirty and self._subscribers():
            wait = self._last_publish + self._publish_interval() - time.monotonic()
            return max(0.0, min(TICK_S, wait))
        return TICK_S

    def _turn(self, timeout: float) -> None:
        """One pass of the loop: wait for sockets (at most ``timeout`` s), then serve what is ready."""
        assert self._selector is not None
        try:
            events = self._selector.select(timeout)
        except InterruptedError:
            events = []
        for key, mask in events:
            if key.data is None:
                self._accept()
            elif key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 4096):
                        pass
            else:
                session = key.data
                if mask & selectors.EVENT_READ and not session.closed:
                    self._read(session)
                if mask & selectors.EVENT_WRITE and not session.closed:
                    self._flush(session)
                    if not session.closed:
                        self._pump(session)  # frames held back while its answers were unread
                        self._update_mask(session)
        self._apply_completions()
        self._maybe_publish()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accept failed: %s", exc)  # the connection waits in the backlog
                    return
                if self._stop.is_set():
                    return
                log.warning("accept failed: %s", exc)
                return
            if len(self._sessions) >= self.max_connections or self._stop.is_set():
                self._refuse(conn)
                continue
            conn.setblocking(False)
            self._numbers += 1
            session = Session(conn, self._numbers)
            self._sessions[conn.fileno()] = session
            self._set_mask(session, selectors.EVENT_READ)

    def _refuse(self, conn: socket.socket) -> None:
        if self._stop.is_set():
            err = ProtocolError(SHUTTING_DOWN, "the daemon is stopping")
        else:
            self.refused += 1
            err = ProtocolError(OVERLOADED, f"the daemon serves {self.max_connections} connections already "
                                            f"(daemon_max_connections); try again later")
            if self.refused in (1, 10, 100) or self.refused % 1000 == 0:
                log.warning("refused a connection: %d open (%d refused so far)", len(self._sessions), self.refused)
        with contextlib.suppress(OSError):
            conn.setblocking(False)
            conn.send(protocol.encode(protocol.error(None, err)))
        with contextlib.suppress(OSError):
            conn.close()

    def _set_mask(self, session: Session, mask: int) -> None:
        assert self._selector is not None
        if session.closed or mask == session.mask:
            return
        if mask == 0:
            self._selector.unregister(session.sock)
        elif session.mask == 0:
            self._selector.register(session.sock, mask, session)
        else:
            self._selector.modify(session.sock, mask, session)
        session.mask = mask

    def _update_mask(self, session: Session) -> None:
        reading = not session.eof and len(session.queue) < MAX_QUEUED and session.out_bytes < MAX_PENDING_OUT
        mask = (selectors.EVENT_READ if reading else 0) | (selectors.EVENT_WRITE if session.out else 0)
        self._set_mask(session, mask)

    def _read(self, session: Session) -> None:
        try:
            data = session.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("connection %d dropped: %s", session.number, exc)
            self._close(session)
            return
        if not data:
            session.eof = True
            if session.inbuf and not session.discarding:
                session.queue.append(bytes(session.inbuf))  # a last line without a newline still counts
            session.inbuf.clear()
        else:
            self._split(session, data)
        self._pump(session)
        self._update_mask(session)
        self._maybe_close(session)

    def _split(self, session: Session, data: bytes) -> None:
        """Cut what arrived into frames (``session.queue``), keeping a partial line in ``inbuf``."""
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            piece = data[start:newline + 1]
            start = newline + 1
            if session.discarding:
                session.discarding = False
                continue
            if session.inbuf:
                session.inbuf += piece
                line = bytes(session.inbuf)
                session.inbuf.clear()
            else:
                line = piece
            if len(line) > MAX_FRAME_BYTES:
                session.queue.append(_Ready(oversize()))
            elif line.strip():
                session.queue.append(line)  # a blank line is no frame (someone pressed Enter in socat)
        rest = data[start:]
        if rest and not session.discarding:
            session.inbuf += rest
            if len(session.inbuf) >= MAX_FRAME_BYTES:  # with its newline it would be over the limit
                session.inbuf.clear()
                session.discarding = True
                session.queue.append(_Ready(oversize()))

    def _pump(self, session: Session) -> None:
        """Hand the session's next frame to a worker, unless one of its requests is already there or its unread
        answers are over ``MAX_PENDING_OUT`` (a client that does not read gets no more answers made for it)."""
        while not session.busy and session.queue and not session.closed and session.out_bytes < MAX_PENDING_OUT:
            item = session.queue.popleft()
            if isinstance(item, _Ready):
                self._queue_out(session, protocol.encode(item.response))
                continue
            session.busy = True
            self._in_flight += 1
            assert self._pool is not None
            try:
                self._pool.submit(self._work, session, item)
            except RuntimeError:  # the pool is shut down: the daemon is on its way out
                session.busy = False
                self._in_flight -= 1
                self._queue_out(session, protocol.encode(protocol.error(
                    None, ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))))

    def _work(self, session: Session, frame: bytes) -> None:
        """On a worker: one frame -> its response (now, or when its Future resolves)."""
        self._local.session = session
        try:
            answer = self._answer(frame)
        except BaseException as exc:  # _answer never raises; a slip must still answer and free the session
            log.exception("a request failed outside its handler")
            answer = protocol.error(None, ProtocolError(INTERNAL_ERROR, one_line(exc)))
        finally:
            self._local.session = None
        if isinstance(answer, Deferred):
            deferred = answer
            deferred.future.add_done_callback(
                lambda future: self._complete(session, self._settle(deferred)))
            return
        self._complete(session, answer)

    def _complete(self, session: Session, response: dict) -> None:
        """Any thread: the session's current request is answered. When nothing waits to be sent before it, the
        answer goes out from this thread at once (what the socket takes); the loop sends the rest and moves on."""
        data = encode_frame(response, session.max_frame_bytes)
        with session.send_lock:
            if not session.out and not session.closed:
                try:
                    data = data[session.sock.send(data):]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    pass  # the loop finds out when it sends or reads
        self._completions.append((session, data, True))
        self._wake()

    def _apply_completions(self) -> None:
        while self._completions:
            session, data, done = self._completions.popleft()
            if session is None:  # a notification for every subscriber
                self._broadcast(data)
                continue
            if done:
                self._in_flight -= 1
                session.busy = False
                if session.interval_s is not None and not session.subscribed and not session.closed:
                    session.subscribed = True  # after its subscribe answer: notifications follow it
            if session.closed:
                continue
            self._queue_out(session, data)
            self._pump(session)
            self._update_mask(session)
            self._maybe_close(session)

    def _queue_out(self, session: Session, data: bytes) -> None:
        if not data:
            return
        with session.send_lock:
            session.out.append(data)
            session.out_bytes += len(data)
        self._flush(session)

    def _flush(self, session: Session) -> None:
        failed: OSError | None = None
        with session.send_lock:
            while session.out and not session.closed:
                first = session.out[0]
                view = memoryview(first)[session.out_offset:session.out_offset + SEND_CHUNK]
                try:
                    sent = session.sock.send(view)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    failed = exc
                    break
                session.out_offset += sent
                session.out_bytes -= sent
                if sent:
                    session.stalled_since = None
                if session.out_offset >= len(first):
                    session.out.popleft()
                    session.out_offset = 0
        if failed is not None:
            log.debug("client %d went away before its answer: %s", session.number, failed)
            self._close(session)
            return
        if session.out_bytes >= MAX_PENDING_OUT and session.stalled_since is None:
            session.stalled_since = time.monotonic()
        elif session.out_bytes < MAX_PENDING_OUT:
            session.stalled_since = None
        self._update_mask(session)
        self._maybe_close(session)

    def _drop_stalled(self) -> None:
        """Close the connections whose clients have read nothing of their unread answers for ``STALLED_S``."""
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.stalled_since is not None and now - session.stalled_since >= STALLED_S and not session.closed:
                log.warning("closing connection %d: %d bytes of answers unread for %.0f s", session.number,
                            session.out_bytes, now - session.stalled_since)
                self._close(session)

    def _maybe_close(self, session: Session) -> None:
        if session.eof and not session.busy and not session.queue and not session.out and not session.closed:
            self._close(session)

    def _close(self, session: Session) -> None:
        if session.closed:
            return
        self._set_mask(session, 0)
        session.closed = True
        self._sessions.pop(session.sock.fileno(), None)
        with contextlib.suppress(OSError):
            session.sock.close()
        session.out.clear()
        session.queue.clear()

    # -- requests ---------------------------------------------------------------------------------------------

    def handle_frame(self, frame: bytes) -> dict:
        """One request frame -> its one response (never raises); waits for a deferred answer."""
        answer = self._answer(frame)
        return self._settle(answer) if isinstance(answer, Deferred) else answer

    def _answer(self, frame: bytes):
        try:
            id_, method, params = protocol.decode_request(frame)
        except ProtocolError as exc:
            found = exc.data.get("id") if isinstance(exc.data, dict) else None
            return protocol.error(found, ProtocolError(exc.code, exc.message))
        except Exception as exc:  # decode_request raises only ProtocolError; a slip there must not drop the frame
            log.exception("cannot decode a frame")
            return protocol.error(None, ProtocolError(PARSE_ERROR, one_line(exc)))
        return self.dispatch(id_, method, params)

    def dispatch(self, id_, method: str, params: dict):
        """Run the handler of a decoded request; its exceptions become error responses. A handler that returns a
        ``Future`` answers when it resolves: this returns a ``Deferred`` then."""
        from localidx.daemon.routes import ROUTES

        if self._stop.is_set():
            return protocol.error(id_, ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))
        if method not in _PASSIVE:
            self.touch()
        if method not in _LIGHT:
            self.used()
        started = time.perf_counter()
        try:
            value = ROUTES[method](self, params)
        except ProtocolError as exc:
            return protocol.error(id_, exc)
        except Exception as exc:
            return protocol.error(id_, as_protocol_error(exc, method))
        finally:
            log.debug("%s handled in %.1f ms", method, (time.perf_counter() - started) * 1e3)
        if isinstance(value, Future):
            return Deferred(id_, method, value)
        return protocol.result(id_, value)

    def _settle(self, deferred: Deferred) -> dict:
        try:
            value = deferred.future.result()
        except ProtocolError as exc:
            return protocol.error(deferred.id, exc)
        except Exception as exc:
            return protocol.error(deferred.id, as_protocol_error(exc, deferred.method))
        self.touch()
        return protocol.result(deferred.id, value)

    # -- subscribers --------------------------------------------------------------------------------------------

    def _subscribers(self) -> list[Session]:
        return [s for s in self._sessions.values() if s.subscribed and not s.closed]

    def _publish_interval(self) -> float:
        intervals = [s.interval_s for s in self._subscribers() if s.interval_s]
        return min(intervals) if intervals else DEFAULT_INTERVAL_MS / 1000

    def _maybe_publish(self) -> None:
        if not self._status_dirty or self._status_job or self._stop.is_set():
            return
        if not self._subscribers():
            self._status_dirty = self._status_urgent = False
            return
        now = time.monotonic()
        if not self._status_urgent and now < self._last_publish + self._publish_interval():
            return
        self._status_dirty = self._status_urgent = False
        self._status_job = True
        self._last_publish = now
        assert self._pool is not None
        try:
            self._pool.submit(self._publish)
        except RuntimeError:
            self._status_job = False

    def _publish(self) -> None:
        """On a worker: compute the status once and queue it for every subscriber."""
        try:
            status = self.light_status()
            if status["state"] != self._last_state:
                self._last_state = status["state"]
            data = protocol.encode(protocol.notification("index/progress", status))
        except Exception:  # noqa: BLE001 - a failed status is skipped; the next change publishes again
            log.exception("cannot compute the status for subscribers")
            data = None
        self._completions.append((None, data, False))
        self._wake()

    def _broadcast(self, data: bytes | None) -> None:
        self._status_job = False
        if data is None:
            return
        for session in self._subscribers():
            session.last_notified = time.monotonic()
            self._queue_out(session, data)

    # -- idle clocks ----------------------------------------------------------------------------------------------

    def _check_idle(self) -> None:
        now = time.monotonic()
        if now - self._gone_checked >= GONE_CHECK_S:
            self._gone_checked = now
            gone = next((p for p in (self.root, self.paths.worktree) if not os.path.isdir(p)), None)
            if gone is not None:
                self.request_stop(f"{gone} was deleted")
                return
        from localidx.store import hot

        if self._in_flight or self.writer.busy or hot.loading():
            return
        idle_s = self.settings.daemon_idle_s
        if idle_s > 0 and now - self._last_activity >= idle_s:
            self.request_stop(f"idle for {idle_s:g} s")
            return
        release_s = self.settings.daemon_release_s
        # a table version just loaded into memory counts as a use: it is not dropped the moment it is ready
        last_use = max(self._last_use, hot.loaded_at())
        if release_s > 0 and not self.released and not self._release_job and now - last_use >= release_s:
            self._release_job = True
            assert self._pool is not None
            self._pool.submit(self._release)
        elif self._last_activity > self._trimmed_at and now - self._last_activity >= TRIM_AFTER_S \
                and not self._trim_job and not self._release_job:
            self._trim_job = True
            self._trimmed_at = now
            assert self._pool is not None
            self._pool.submit(self._trim)

    def _trim(self) -> None:
        """On a worker: give the heap's free pages back (the idle trim, see the module docstring)."""
        try:
            memory.trim()
            self.trims += 1
        finally:
            self._trim_job = False

    def _release(self) -> None:
        """On a worker: drop the readers' tables (and leases), the writer's index (compacted first), a large model."""
        try:
            before = memory.usage().get("rss_mb")
            with self._lock:
                self._store = None
            from localidx.store import hot
            from localidx.store.lance import release_pinned

            hot.drop_all()  # the in-memory copy and the pinned tables: loaded again by the next query
            release_pinned()
            gc.collect()
            self.writer.release()
            release, cost = getattr(self.embedder, "release", None), getattr(self.embedder, "load_mb", None)
            if release is not None and (cost is None or cost > KEEP_MODEL_MB):
                release()
            gc.collect()
            memory.trim()
            if time.monotonic() - self._last_use >= self.settings.daemon_release_s:
                self.released = True
                self.releases += 1
            log.info("released the index caches%s after %g s without queries: RSS %s -> %s MB",
                     "" if getattr(self.embedder, "loaded", False) else " and the model",
                     self.settings.daemon_release_s, before, memory.usage().get("rss_mb"))
            self.notify(urgent=True)
        except Exception:  # noqa: BLE001 - a failed release leaves things loaded, which still works
            log.exception("releasing memory failed")
        finally:
            self._release_job = False

    # -- shutdown -----------------------------------------------------------------------------------------------

    def shutdown(self, watcher) -> None:
        """Stop in order: files, watcher, writer, requests in flight, connections, the writer thread."""
        self._stop.set()
        self.release_files()
        if self._listener is not None and self._selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._listener)
        if watcher is not None:
            with contextlib.suppress(Exception):
                watcher.stop()
        self.writer.stop()
        if self._selector is not None and self._subscribers():
            # The last word to subscribers: why the connection is about to end (an editor shows "idle", not "down").
            with self._lock:
                self._status_seq += 1
                seq = self._status_seq
            last = self._last_status or {"state": self._last_state or "READY"}
            self._broadcast(protocol.encode(protocol.notification(
                "index/progress", {**last, "seq": seq, "stopping": self._stop_reason or "shutdown"})))
        deadline = time.monotonic() + DRAIN_S
        if self._selector is not None:
            while time.monotonic() < deadline:
                pending = self._in_flight or any(s.out for s in self._sessions.values())
                if not pending and not self._completions:
                    break
                self._turn(0.05)
        if self._listener is not None:
            self._listener.close()
        for session in list(self._sessions.values()):
            with contextlib.suppress(OSError):
                session.sock.shutdown(socket.SHUT_RDWR)
            self._close(session)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.writer.join(WRITER_JOIN_S)
        if self.writer.is_alive():
            log.warning("the writer did not finish within %.0f s; exiting anyway (the next run resumes)",
                        WRITER_JOIN_S)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        log.info("stopped (%s)", self._stop_reason or "shutdown")


def _in_memory() -> dict:
    from localidx.store import hot

    return hot.describe()
