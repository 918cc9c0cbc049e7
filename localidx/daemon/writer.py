"""The daemon's writer thread: the only code in the daemon that mutates the index.

Change requests (repo-relative paths, or ``None`` for everything) go into one queue. The thread takes everything
queued at once, coalesces it into a single ``indexer.sync_work_tree`` call (``only`` = the union of the paths, or ``None``),
and runs it with ``should_stop`` true as soon as new work is queued or the daemon stops: ``sync_work_tree`` then ends after
the current embedding batch, with vectors still pending, and the next run (which embeds every pending row, not only
its own) carries on. So a burst of edits is indexed promptly even while a large backlog is being embedded.

The thread opens the writable ``Index`` itself (sqlite connections belong to the thread that made them) around the
daemon's shared embedder; the caller holds the write lock for the daemon's life. ``release()`` asks it to close that
index while it is idle (the daemon's idle release: LanceDB's caches go with the connection); the next run opens it
again. Before closing it the thread compacts the index (``indexer.compact_idle``): the versions the readers were
on during the last run are free by then.

Hooks the daemon sets: ``on_activity`` (a run ended: the idle clock restarts), ``on_use`` (a run starts: the model
and the index are in use) and ``on_change(urgent)`` (a phase changed or progress was made: subscribers are told).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from localidx.config import Settings
from localidx.protocol import SHUTTING_DOWN, ProtocolError

log = logging.getLogger(__name__)

# Past this many queued paths a full update is cheaper: ``sync_work_tree`` matches every catalog entry against ``only``.
FULL_SCAN_OVER = 1000


class Writer(threading.Thread):
    """Runs queued index updates one at a time; see the module docstring."""

    def __init__(self, root: Path, index_paths, settings: Settings, embedder, on_activity=lambda: None):
        super().__init__(name="localidx-writer", daemon=True)
        self.root = root
        self.index_paths = index_paths
        self.settings = settings
        self.embedder = embedder
        self.on_activity = on_activity
        self.on_use = lambda: None
        self.on_change = lambda urgent=False: None
        self._release = False
        self._released = threading.Event()
        self.ready = threading.Event()  # set once the index is open (or failed to open: see ``open_error``)
        self.open_error: BaseException | None = None
        self._cond = threading.Condition()
        self._paths: set[str] = set()
        self._everything = False
        self._rebuild = False  # the next run rebuilds (asked for); taken with the queue
        self._rebuilding = False  # the run in progress was asked to rebuild
        self._waiters: list[Future] = []
        self._reasons: set[str] = set()
        self._stopping = False
        self._running = False
        self.phase = "starting"  # starting, idle, scan, chunk, written, embed
        self.progress: dict = {}
        self.runs = 0
        self.last_run: dict | None = None
        self.last_error: str | None = None
        self.pending_vectors = 0

    # -- the queue (any thread) ---------------------------------------------------------------------------------

    def submit(self, paths: list[str] | None, reason: str = "", wait: bool = False,
               rebuild: bool = False) -> Future | None:
        """Queue ``paths`` (None: everything). With ``wait``, a Future resolved with the record of the run that
        covers them (``RunStats.to_dict()``), or failed with that run's error. ``rebuild``: the next run builds the
        index again beside the current one (``localidx index --rebuild`` asked of the daemon) and switches to it."""
        future: Future | None = Future() if wait else None
        with self._cond:
            if self._stopping:
                if future is not None:
                    future.set_exception(ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))
                return future
            if paths is None or rebuild:
                self._everything = True
                self._rebuild = self._rebuild or rebuild
            else:
                self._paths.update(paths)
            if reason:
                self._reasons.add(reason)
            if future is not None:
                self._waiters.append(future)
            self._cond.notify_all()
        self.on_change(True)  # queued work makes the state INDEXING
        return future

    def stop(self) -> None:
        """Ask the thread to finish: the current run stops after its embedding batch; queued waiters are failed."""
        with self._cond:
            self._stopping = True
            waiters, self._waiters = self._waiters, []
            self._cond.notify_all()
        for future in waiters:
            future.set_exception(ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))

    def release(self, timeout: float = 30.0) -> bool:
        """Ask the thread to close its index once it is idle (it opens it again for the next run); waits up to
        ``timeout`` seconds. True when it was closed."""
        with self._cond:
            if self._stopping or not self.ready.is_set():
                return False
            self._released.clear()
            self._release = True
            self._cond.notify_all()
        return self._released.wait(timeout)

    def queued(self) -> int:
        """How many paths wait for the next run (-1: everything)."""
        with self._cond:
            return -1 if self._everything else len(self._paths)

    @property
    def busy(self) -> bool:
        """Whether a run is in progress or waiting to start."""
        with self._cond:
            return self._running or self._everything or bool(self._paths)

    def describe(self) -> dict:
        """The writer's state for ``daemon/hello`` and ``index/status``."""
        with self._cond:
            queued = -1 if self._everything else len(self._paths)
            running = self._running
        return {"state": self.phase if running else ("starting" if not self.ready.is_set() else "idle"),
                "queued": queued, "progress": dict(self.progress), "runs": self.runs,
                "pending_vectors": self.pending_vectors, "last_run": self.last_run, "last_error": self.last_error}

    def _has_work(self) -> bool:
        return self._everything or bool(self._paths)

    def _should_stop(self) -> bool:
        with self._cond:
            return self._stopping or self._has_work()

    def _take(self) -> tuple[list[str] | None, list[Future], str]:
        only = None if self._everything or len(self._paths) > FULL_SCAN_OVER else sorted(self._paths)
        waiters, reasons = self._waiters, ",".join(sorted(self._reasons))
        self._paths, self._everything, self._waiters, self._reasons = set(), False, [], set()
        self._rebuilding, self._rebuild = self._rebuild, False
        return only, waiters, reasons

    # -- the thread ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            from localidx.index.indexer import open_for_writing

            index = open_for_writing(self.index_paths, self.settings, embedder=self.embedder)
        except BaseException as exc:  # reported by the server, which then exits
            log.exception("cannot open the index for writing")
            self.open_error = exc
            self.ready.set()
            return
        self.phase = "idle"
        self.ready.set()
        try:
            while True:
                with self._cond:
                    while not self._stopping and not self._has_work() and not self._release:
                        self._cond.wait()
                    if self._stopping:
                        break
                    if self._release and not self._has_work():
                        self._release = False
                        if index is not None:
                            self._compact(index)
                            index.close()
                            index = None
                        self._released.set()
                        continue
                    self._release = False
                    only, waiters, reasons = self._take()
                    self._running = True
                self.on_use()
                if index is None:
                    try:
                        index = open_for_writing(self.index_paths, self.settings, embedder=self.embedder)
                    except BaseException as exc:
                        self._fail(waiters, exc, "cannot open the index for writing")
                        if not isinstance(exc, Exception):
                            raise
                        continue
                self._run_once(index, only, waiters, reasons)
        finally:
            with self._cond:
                self._running = False
                self._stopping = True
                waiters, self._waiters = self._waiters, []
            for future in waiters:
                future.set_exception(ProtocolError(SHUTTING_DOWN, "the daemon is stopping"))
            if index is not None:
                index.close()
            self.phase = "stopped"
            self._released.set()

    def _compact(self, index) -> None:
        """Idle: delete the table versions the readers have let go of since the last run, rewrite the fragments
        if they need it (``indexer.compact_idle``)."""
        try:
            from localidx.index.indexer import compact_idle

            compact_idle(index, self.settings)
        except Exception:  # noqa: BLE001 - an index not compacted is only larger; the next pass tries again
            log.exception("compacting the index failed")

    def _fail(self, waiters: list[Future], exc: BaseException, what: str) -> None:
        log.exception(what)
        self.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        for future in waiters:
            future.set_exception(exc)
        with self._cond:
            self._running = False
        self.on_change(True)

    def _run_once(self, index, only: list[str] | None, waiters: list[Future], reasons: str) -> None:
        from localidx.errors import IndexDamaged
        from localidx.index.indexer import sync_work_tree

        what = "everything" if only is None else f"{len(only)} paths"
        log.info("update: %s (%s)", what, reasons or "request")
        started = time.monotonic()
        failure: BaseException | None = None
        record: dict | None = None
        try:
            try:
                stats = sync_work_tree(index, self.root, self.settings, only=only, embed=True,
                                       progress=self._progress, should_stop=self._should_stop,
                                       rebuild=self._rebuilding)
            except IndexDamaged as exc:  # found while writing: marked, and the next pass repairs it; run it now
                log.warning("%s: repairing", exc)
                stats = sync_work_tree(index, self.root, self.settings, embed=True, progress=self._progress,
                                       should_stop=self._should_stop)
        except BaseException as exc:
            log.exception("update of %s failed", what)
            if isinstance(exc, Exception):  # a full disk is said as such (SQLite's words name no directory)
                from localidx.errors import disk_full

                exc = disk_full(exc, self.index_paths.state) or exc
            self.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            failure = exc
            if not isinstance(exc, Exception):
                raise
        else:
            record = stats.to_dict()
            self.last_run, self.last_error, self.pending_vectors = record, None, stats.chunks_pending
            log.info("update done in %.2f s: %d chunked, %d deleted, %d embedded, %d pending", time.monotonic() -
                     started, stats.files_processed, stats.files_deleted, stats.chunks_embedded, stats.chunks_pending)
        finally:
            self.runs += 1
            self.progress = {}
            from localidx.daemon import memory

            memory.trim()  # a run's chunks, rows and batches are garbage now: give their pages back
            with self._cond:
                self._running = False
            # Waiters are answered once the run is over: a client that asks for the status next must not find
            # the writer still running (it read INDEXING right after its own reindex returned).
            for future in waiters:
                if failure is not None:
                    future.set_exception(failure)
                elif record is not None:
                    future.set_result(record)
            self.on_use()
            self.on_activity()
            self.on_change(True)

    def _progress(self, event: str, **data) -> None:
        changed = event != self.phase
        self.phase = event
        self.progress = {"phase": event, **data}
        self.on_change(changed)
