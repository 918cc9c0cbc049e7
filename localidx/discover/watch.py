"""The watcher: file-system events under a work tree, turned into batches of paths for the indexer.

Place in the flow: the live half of *discover*. ``files.discover`` says which files exist; the watcher says which of
them changed since, so the daemon can pass exactly those to ``indexer.sync_work_tree(only=...)``. It never reads file content
and never touches the index.

Invariants:

- ``on_change`` runs on the watcher's own thread, at most once per debounce window, with a non-empty set of
  root-relative posix paths. Events are coalesced per path until ``debounce_s`` passes without a new one, or
  ``MAX_WAIT_FACTOR`` times that since the first, so a constant trickle still flushes.
- A path is reported only if discovery could list it: never anything under ``.git/``, nothing git ignores (the same
  ``gitrepo`` rules ``discover`` applies: ``core.excludesFile``, ``info/exclude``, every ``.gitignore``, tracked files
  excepted), nothing ``.localidxignore`` removes, nothing inside a nested repository. Lock files, secrets and other
  path-based skips are *not* filtered here; discovery records those as skipped.
- Most paths are files (changed, created, deleted, either side of a move). A path may also name a **directory**,
  meaning "anything under it may have changed": a directory deleted or moved away (its files cannot be listed any
  more), a directory whose ``.gitignore`` changed, or, after lost events or a new root ``.gitignore``, every entry of
  the root. ``indexer.sync_work_tree(only=...)`` already treats a directory as everything under it.
- The watcher is never silent: when the kernel refuses inotify watches (ENOSPC) or instances (EMFILE), at start or
  later, it logs a WARNING and polls discovery instead (``mode == "polling"``). Events lost to a queue overflow are
  answered with a rescan; overflows that keep coming switch to polling too.

Watches: watchdog's inotify observer with an ``event_filter`` (without one, trees over ~4k directories overflow the
kernel queue forever), one non-recursive watch on the root plus one recursive watch per top-level directory that
discovery would enter, so ``.git/``, ``node_modules/``, ``.venv/`` and other ignored top-level trees cost no watches.
Ignored directories *nested* inside a watched one are still watched (watchdog cannot prune them); their events are
dropped by the filter.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import stat
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver, ObservedWatch

from localidx import gitrepo
from localidx.config import Settings
from localidx.discover.files import LOCALIDXIGNORE, discover, own_state_dirs

log = logging.getLogger(__name__)

# Only these reach the handler. Open and close-without-write events are what overflow the inotify queue on big trees
# (watchdog opens every directory while it adds watches) and what the indexer's own reads would produce.
EVENT_FILTER = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
MAX_WAIT_FACTOR = 10  # a batch is flushed at the latest this many debounce periods after its first event
# Each schedule is an emitter thread. Past this many top-level directories one recursive watch on the root is
# cheaper in threads than saving the watches of .git/ and ignored top-level trees.
MAX_SCHEDULES = 32
POLL_INTERVAL_S = 2.0
POLL_CPU_SHARE = 0.1  # a polling scan that takes t seconds runs at most every t / POLL_CPU_SHARE seconds
# Lost events are answered with a rescan; losing them this often means inotify cannot keep up: poll instead.
OVERFLOW_LIMIT = 5
OVERFLOW_WINDOW_S = 60.0
_IDLE_WAKE_S = 0.5  # how often an idle watcher checks for lost events or a refused watch
_LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
_STOP = object()

# watchdog warns when `mkdir -p` makes it watch a new directory twice (once while walking its parent, once for the
# directory's own event); harmless, and attributed to _InotifyFD.add_callback in this module.
warnings.filterwarnings(
    "ignore", message="Callback with id .* already exists", category=RuntimeWarning, module=__name__
)


class _LimitReached(Exception):
    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


if sys.platform.startswith("linux"):
    from watchdog.observers.inotify import InotifyEmitter
    from watchdog.observers.inotify_c import InotifyEvent, InotifyFD

    class _InotifyFD(InotifyFD):
        """watchdog's inotify instance, made to tell what it swallows.

        watchdog ignores a failure to watch any directory below a watch's root, ENOSPC included, and recovers from a
        queue overflow with nothing more than a log line. This records both, and counts the live watches. With
        ``watch_limit`` it refuses every watch past that many with the kernel's own ENOSPC error (tests use it to
        reach the polling fallback without exhausting the real, per-user limit).
        """

        def __init__(self, watch_limit: int | None = None) -> None:
            super().__init__()
            self.watch_limit = watch_limit
            self.wds: set[int] = set()
            self.limit_error: OSError | None = None
            self.overflowed = False

        def add_callback(self, path, mask, callback, id_):
            if self.watch_limit is not None and len(self.wds) >= self.watch_limit:
                error = OSError(errno.ENOSPC, "inotify watch limit reached")
            else:
                try:
                    wd = super().add_callback(path, mask, callback, id_)
                except OSError as exc:
                    error = exc
                else:
                    self.wds.add(wd)
                    return wd
            if error.errno in _LIMIT_ERRNOS and self.limit_error is None:
                self.limit_error = error
            raise error

        def handle_event(self, event: InotifyEvent) -> None:
            if event.is_queue_overflow:
                self.overflowed = True
            elif event.is_ignored:  # the kernel dropped the watch (removed, or its directory deleted)
                self.wds.discard(event.wd)
            super().handle_event(event)

    class _Observer(BaseObserver):
        """watchdog's InotifyObserver, on an ``_InotifyFD``."""

        def __init__(self, fd: _InotifyFD) -> None:
            self._fd = fd
            fd.start()
            super().__init__(InotifyEmitter, inotify_fd=fd)

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self._fd.stop()
            self._fd.join()

    def _new_observer(watch_limit: int | None) -> tuple[BaseObserver, _InotifyFD | None]:
        fd = _InotifyFD(watch_limit)  # EMFILE when the user's inotify instances are used up
        return _Observer(fd), fd

    _NATIVE_MODE = "inotify"
else:  # untested: watchdog's FSEvents / kqueue / Windows observers, without limit detection

    def _new_observer(watch_limit: int | None) -> tuple[BaseObserver, None]:
        from watchdog.observers import Observer

        return Observer(), None

    _NATIVE_MODE = "native"


class Watcher:
    """Reports the paths under ``root`` that change, in debounced batches, to ``on_change``.

    ``on_change(paths)`` is called from the watcher's thread with a non-empty set of root-relative posix paths (see
    the module docstring: most are files, some may be directories). ``debounce_s`` defaults to
    ``settings.watch_debounce_s``. ``poll_interval_s`` is the polling fallback's period. ``watch_limit`` makes the
    watcher behave as if the kernel allowed only that many inotify watches (for tests; None: the real limit).

    ``mode`` is set by ``start()``: "inotify", or "polling" after the kernel refused watches; "native" on platforms
    other than Linux.
    """

    def __init__(
        self,
        root: Path,
        settings: Settings,
        on_change: Callable[[set[str]], None],
        debounce_s: float | None = None,
        *,
        poll_interval_s: float = POLL_INTERVAL_S,
        watch_limit: int | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.settings = settings
        self.debounce_s = settings.watch_debounce_s if debounce_s is None else max(0.0, debounce_s)
        self.mode = ""
        self._on_change = on_change
        self._poll_interval_s = poll_interval_s
        self._watch_limit = watch_limit
        self._root_str = str(self.root)
        self._prefix = self._root_str.rstrip(os.sep) + os.sep
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._handler = _Handler(self._events.put)
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._observer: BaseObserver | None = None
        self._fd = None
        self._split = True  # root watched non-recursively, top-level directories each recursively
        self._scheduled: dict[str, ObservedWatch] = {}
        self._rules: _Rules | None = None
        # path -> whether its first event in this batch created it (a created path gone by the flush was transient)
        self._pending: dict[str, bool] = {}
        self._first_at = 0.0
        self._last_at = 0.0
        self._snapshot: dict[str, tuple[int, int]] = {}
        self._overflows: list[float] = []
        # localidx's own state inside the tree (LOCALIDX_HOME=.lxstate): its writes are never changes to index.
        self._own_state = own_state_dirs(self.root, gitrepo.open_repo(self.root) is not None, settings)

    @property
    def pending(self) -> bool:
        """Whether changes were seen that are not reported yet (waiting for the quiet time)."""
        return bool(self._pending)

    @property
    def watch_count(self) -> int:
        """The inotify watches this watcher holds now (0 when polling or off Linux)."""
        fd = self._fd
        return len(fd.wds) if fd is not None and self._observer is not None else 0

    def start(self) -> None:
        """Add the watches (or take the polling baseline) and start the watcher's thread.

        Changes made after this returns are reported. Raises RuntimeError on a second call or after ``stop()``,
        OSError when the root cannot be watched for a reason other than the kernel's limits.
        """
        with self._lock:
            if self._started or self._stopping:
                raise RuntimeError("a Watcher can be started once, and not after stop()")
            self._started = True
        began = time.perf_counter()
        self._rules = _Rules(self.root)
        try:
            self._start_native()
            limit_error = self._fd.limit_error if self._fd is not None else None
        except OSError as exc:
            self._stop_observer()
            if exc.errno not in _LIMIT_ERRNOS:
                raise
            limit_error = exc
        if limit_error is not None:
            self._stop_observer()
            self._start_polling(limit_error)
        else:
            self.mode = _NATIVE_MODE
        self._thread = threading.Thread(target=self._run, name="localidx-watch", daemon=True)
        self._thread.start()
        log.info(
            "watching %s (%s, %d inotify watches), started in %.2f s",
            self.root, self.mode, self.watch_count, time.perf_counter() - began,
        )

    def stop(self) -> None:
        """Stop watching and join every thread the watcher started. Idempotent; pending changes are dropped.

        Safe to call from ``on_change``; the watcher's own thread then ends once the callback returns.
        """
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self._stop_event.set()
        self._events.put(_STOP)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._stop_observer()

    # Starting and stopping the watches.

    def _start_native(self) -> None:
        self._observer, self._fd = _new_observer(self._watch_limit)
        names = self._rules.top_dirs()
        self._split = len(names) <= MAX_SCHEDULES
        if self._split:
            self._observer.schedule(self._handler, self._root_str, recursive=False, event_filter=EVENT_FILTER)
            for name in names:
                self._scheduled[name] = self._observer.schedule(
                    self._handler, os.path.join(self._root_str, name), recursive=True, event_filter=EVENT_FILTER
                )
        else:
            log.info("%d top-level directories: one recursive watch on %s", len(names), self.root)
            self._observer.schedule(self._handler, self._root_str, recursive=True, event_filter=EVENT_FILTER)
        self._observer.start()  # adds every watch before it returns

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        self._scheduled.clear()
        if observer is None:
            return
        observer.stop()
        if observer.ident is not None:
            observer.join()

    def _start_polling(self, error: OSError) -> None:
        log.warning(
            "cannot watch %s with inotify (%s); polling every %.1f s or more instead. Raise "
            "fs.inotify.max_user_watches / max_user_instances to watch without polling",
            self.root, error.strerror or error, self._poll_interval_s,
        )
        self.mode = "polling"
        self._snapshot = self._scan()

    def _fall_back(self, error: OSError) -> None:
        """Switch a running watcher to polling; what changed while watches were missing is reported as a rescan."""
        self._stop_observer()
        self._start_polling(error)
        self._rescan()
        self._flush()

    def _schedule(self, name: str) -> bool:
        """Watch the top-level directory ``name`` recursively; False when it vanished first."""
        if self._observer is None or name in self._scheduled or f"{name}/" in self._own_state:
            return False
        try:
            self._scheduled[name] = self._observer.schedule(
                self._handler, os.path.join(self._root_str, name), recursive=True, event_filter=EVENT_FILTER
            )
        except OSError as exc:
            if exc.errno in _LIMIT_ERRNOS:
                raise _LimitReached(exc) from None
            log.debug("not watching %s: %s", name, exc)
            return False
        return True

    def _unschedule(self, name: str) -> None:
        watch = self._scheduled.pop(name, None)
        if watch is not None and self._observer is not None:
            try:
                self._observer.unschedule(watch)
            except KeyError:
                pass

    def _reconcile(self) -> None:
        """Watch exactly the top-level directories discovery would enter now (ignore rules or the index changed)."""
        if self._observer is None or not self._split:
            return
        wanted = set(self._rules.top_dirs())
        for name in [n for n in self._scheduled if n not in wanted]:
            self._unschedule(name)
        for name in sorted(wanted - self._scheduled.keys()):
            if self._schedule(name):
                self._add(name, born=False)

    # The watcher's thread.

    def _run(self) -> None:
        if self.mode != "polling":
            try:
                self._watch_loop()
            except Exception as exc:  # a bug here must not leave the daemon blind: poll instead
                log.exception("the watcher of %s failed", self.root)
                if not self._stop_event.is_set():
                    try:
                        self._fall_back(OSError(0, f"watcher error: {exc}"))
                    except Exception:
                        log.exception("cannot poll %s either; changes are no longer reported", self.root)
                        return
        if self.mode == "polling":
            try:
                self._poll_loop()
            except Exception:
                log.exception("polling %s failed; changes are no longer reported", self.root)

    def _watch_loop(self) -> None:
        while not self._stop_event.is_set():
            try:
                item = self._events.get(timeout=self._wait_s())
            except queue.Empty:
                item = None
            try:
                if item is not None:
                    if self._rules.refresh_tracked():
                        self._reconcile()
                    while item is not None:
                        if item is _STOP:
                            return
                        self._handle(*item)
                        if self._pending and self._due():
                            break  # a flood: flush what the cap allows, the rest stays queued
                        try:
                            item = self._events.get_nowait()
                        except queue.Empty:
                            item = None
                self._check_lost_events()
            except _LimitReached as exc:
                self._fall_back(exc.error)
                return
            if self._pending and self._due():
                self._flush()

    def _check_lost_events(self) -> None:
        fd = self._fd
        if fd is None or self._observer is None:
            return
        if fd.limit_error is not None:
            raise _LimitReached(fd.limit_error)
        if fd.overflowed:
            fd.overflowed = False
            now = time.monotonic()
            self._overflows = [t for t in self._overflows if now - t < OVERFLOW_WINDOW_S] + [now]
            if len(self._overflows) >= OVERFLOW_LIMIT:
                raise _LimitReached(OSError(errno.EOVERFLOW, "the inotify queue keeps overflowing"))
            log.warning("inotify queue overflowed under %s; events were lost, asking for a rescan", self.root)
            self._rescan()

    def _poll_loop(self) -> None:
        interval = self._poll_interval_s
        while not self._stop_event.wait(interval):
            began = time.perf_counter()
            try:
                snapshot = self._scan()
            except Exception as exc:  # e.g. the root was deleted; keep the last good picture
                log.warning("cannot scan %s: %s", self.root, exc)
                continue
            interval = max(self._poll_interval_s, (time.perf_counter() - began) / POLL_CPU_SHARE)
            old, self._snapshot = self._snapshot, snapshot
            changed = {p for p in old.keys() | snapshot.keys() if old.get(p) != snapshot.get(p)}
            if changed:
                self._deliver(changed)

    def _scan(self) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of every path discovery lists, skipped ones included (a change may un-skip them)."""
        found = discover(self.root, self.settings)
        paths = [f.path for f in found.files]
        paths.extend(s.path for s in found.skipped if s.reason != "localidxignore" and s.path != ".")
        out = {}
        for path in paths:
            try:
                st = os.stat(os.path.join(self._root_str, path))
            except OSError:
                continue
            out[path] = (st.st_mtime_ns, st.st_size)
        return out

    # Events.

    def _rel(self, path: str) -> str | None:
        if not path.startswith(self._prefix):
            return None  # the root itself, or a move from outside it
        rel = path[len(self._prefix) :]
        rel = rel if os.sep == "/" else rel.replace(os.sep, "/")
        if self._own_state and (rel + "/").startswith(self._own_state):
            return None
        return rel

    def _handle(self, kind: str, src: str, dest: str, is_dir: bool) -> None:
        rel = self._rel(src)
        if kind == "moved":
            if rel is not None:
                self._gone(rel, is_dir)
            dest_rel = self._rel(dest)
            if dest_rel is not None:
                self._came(dest_rel, is_dir, born=True)
        elif rel is None:
            if kind == "deleted" and src == self._root_str:
                log.warning("the watched root %s was deleted", self.root)
        elif kind == "deleted":
            self._gone(rel, is_dir)
        else:
            self._came(rel, is_dir, born=kind == "created")

    def _gone(self, rel: str, is_dir: bool) -> None:
        if not is_dir:
            self._file(rel, born=False)
        elif self._is_git_entry(rel):
            return
        else:
            self._rules.invalidate(rel)
            if "/" not in rel:
                # The old watch's own report of the deletion can come after the root's report of a new directory of
                # the same name (a checkout deletes and recreates): end up watching whatever is there now.
                self._unschedule(rel)
                if _is_real_dir(os.path.join(self._root_str, rel)):
                    self._watch_top_dir(rel)
            if self._rules.dir_wanted(rel):
                self._add(rel, born=False)  # its files can no longer be listed: report the directory

    def _came(self, rel: str, is_dir: bool, born: bool) -> None:
        if not is_dir:
            self._file(rel, born)
        elif self._is_git_entry(rel):
            return
        else:
            self._rules.invalidate(rel)
            # Below a recursive watch watchdog reports the files of a new directory itself; the root's own watch is
            # not recursive, so a new top-level directory is watched and listed here.
            if "/" not in rel:
                self._watch_top_dir(rel)

    def _watch_top_dir(self, name: str) -> None:
        """(Re)watch a new top-level directory and report its files; listed after the watch exists, to miss none."""
        if not self._split or self._observer is None:
            return
        self._unschedule(name)  # a watch of a deleted directory of that name would be reused, dead, by schedule()
        if self._rules.dir_wanted(name) and self._schedule(name):
            for path in self._rules.list_under(name):
                self._add(path, born=True)

    def _is_git_entry(self, rel: str) -> bool:
        """Whether ``rel`` is a ``.git`` entry; one appearing or vanishing makes its directory a nested repo or not."""
        parent, _, name = rel.rpartition("/")
        if name != ".git":
            return False
        self._rules.invalidate(parent)
        return True

    def _file(self, rel: str, born: bool) -> None:
        parent, _, name = rel.rpartition("/")
        if name == ".gitignore" and not self._rules.dir_excluded(parent):
            self._rules.invalidate(parent)
            if parent:
                self._add(parent, born=False)
            else:
                self._rescan()
                self._reconcile()
        elif rel == LOCALIDXIGNORE:
            self._rules.reload_localidxignore()
            self._rescan()
            self._reconcile()
        if self._rules.wanted(rel):
            self._add(rel, born)

    def _rescan(self) -> None:
        """Ask for everything: each entry of the root (a directory standing for everything under it)."""
        try:
            with os.scandir(self.root) as it:
                names = [entry.name for entry in it if entry.name != ".git"]
        except OSError as exc:
            log.warning("cannot list %s: %s", self.root, exc)
            return
        for name in names:
            self._add(name, born=False)

    # Batches.

    def _add(self, rel: str, born: bool) -> None:
        now = time.monotonic()
        if not self._pending:
            self._first_at = now
        self._pending.setdefault(rel, born)
        self._last_at = now

    def _wait_s(self) -> float:
        if not self._pending:
            return _IDLE_WAKE_S
        due = min(self._last_at + self.debounce_s, self._first_at + MAX_WAIT_FACTOR * self.debounce_s)
        return min(_IDLE_WAKE_S, max(0.0, due - time.monotonic()))

    def _due(self) -> bool:
        now = time.monotonic()
        return now - self._last_at >= self.debounce_s or now - self._first_at >= MAX_WAIT_FACTOR * self.debounce_s

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        # A path created in this batch and gone by now (an editor's temp file, a vim backup) was never indexed.
        paths = {
            rel for rel, born in pending.items() if not born or os.path.lexists(os.path.join(self._root_str, rel))
        }
        if paths:
            self._deliver(paths)

    def _deliver(self, paths: set[str]) -> None:
        if self._stop_event.is_set():
            return
        log.debug("%d changed paths under %s", len(paths), self.root)
        try:
            self._on_change(paths)
        except Exception:
            log.exception("on_change failed for %d paths under %s", len(paths), self.root)


class _Handler(FileSystemEventHandler):
    """Runs on watchdog's dispatcher thread: drops ``.git/`` internals and queues the rest, nothing more."""

    def __init__(self, put: Callable[[tuple[str, str, str, bool]], None]) -> None:
        super().__init__()
        self._put = put

    def dispatch(self, event: FileSystemEvent) -> None:
        src = os.fsdecode(event.src_path)
        dest = os.fsdecode(event.dest_path) if event.dest_path else ""
        inner = os.sep + ".git" + os.sep
        if inner in src and (not dest or inner in dest):
            return
        self._put((event.event_type, src, dest, event.is_directory))


class _Rules:
    """Whether discovery could list a path, answered per event with ``gitrepo``'s rules; cached per directory.

    Used from the watcher's thread only. Paths given and returned are root-relative; git paths are relative to the
    work-tree top (they differ when the root is a directory inside the work tree).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = gitrepo.open_repo(root)
        self.sub = ""
        self._base: tuple[gitrepo.IgnoreLevel, ...] = ()
        self._index_file: str | None = None
        self.top = root
        if self.repo is not None:
            self.top = gitrepo.work_root(self.repo)
            if root != self.top and root.is_relative_to(self.top):
                self.sub = root.relative_to(self.top).as_posix()
            # core.excludesFile and info/exclude, in git's precedence: the levels listed_files starts from.
            self._base = gitrepo._repo_exclude_levels(self.repo)
            self._index_file = os.path.join(self.repo.path, "index")
        # git dir -> (ignore levels that apply inside it, whether discovery skips its untracked content)
        self._dirs: dict[str, tuple[tuple[gitrepo.IgnoreLevel, ...], bool]] = {}
        self._tracked: frozenset[str] = frozenset()
        self._tracked_dirs: frozenset[str] = frozenset()
        self._index_stamp: tuple[int, int, int] | None = None
        self.refresh_tracked()
        self._localidx = None
        self._localidx_covers_dirs = False
        self.reload_localidxignore()

    def git_path(self, rel: str) -> str:
        if not self.sub:
            return rel
        return f"{self.sub}/{rel}" if rel else self.sub

    def refresh_tracked(self) -> bool:
        """Reload the tracked paths when git rewrote its index; True when it did."""
        if self._index_file is None:
            return False
        try:
            st = os.stat(self._index_file)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self._index_stamp:
            return False
        self._index_stamp = stamp
        self._tracked = frozenset(gitrepo.blob_ids(self.repo))
        self._tracked_dirs = frozenset(gitrepo.parent_dirs(self._tracked))
        return True

    def reload_localidxignore(self) -> None:
        spec = gitrepo.read_ignore_file(self.root / LOCALIDXIGNORE)
        self._localidx = spec
        # A directory the file matches can be left unwatched only if no pattern could re-include a file below it.
        self._localidx_covers_dirs = spec is not None and all(p.include is not False for p in spec.patterns)

    def invalidate(self, rel_dir: str) -> None:
        """Forget the cached rules of a directory and everything below it (a .gitignore or .git there changed)."""
        gdir = self.git_path(rel_dir)
        if gdir not in self._dirs:
            return  # descendants are cached only together with their ancestors
        if not gdir:
            self._dirs.clear()
            return
        below = gdir + "/"
        self._dirs = {d: s for d, s in self._dirs.items() if d != gdir and not d.startswith(below)}

    def wanted(self, rel: str) -> bool:
        """Whether discovery would list the file ``rel`` (if it exists)."""
        gpath = self.git_path(rel)
        if gpath not in self._tracked:
            levels, excluded = self._dir_state(gpath.rpartition("/")[0])
            if excluded or gitrepo.is_ignored(gpath, False, levels):
                return False
        return self._localidx is None or not self._localidx.match_file(rel)

    def dir_excluded(self, rel_dir: str) -> bool:
        """Whether discovery skips the untracked content of the directory ``rel_dir``."""
        return self._dir_state(self.git_path(rel_dir))[1]

    def dir_wanted(self, rel_dir: str) -> bool:
        """Whether discovery could list anything below the directory ``rel_dir``."""
        gdir = self.git_path(rel_dir)
        if self._dir_state(gdir)[1] and gdir not in self._tracked_dirs:
            return False
        return not (self._localidx_covers_dirs and self._localidx.match_file(rel_dir + "/"))

    def top_dirs(self) -> list[str]:
        """The root's subdirectories (not symlinks) that discovery would enter."""
        names = []
        with os.scandir(self.root) as it:
            for entry in it:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir and entry.name != ".git" and self.dir_wanted(entry.name):
                    names.append(entry.name)
        return sorted(names)

    def list_under(self, rel_dir: str) -> list[str]:
        """The files discovery lists below ``rel_dir``, root-relative."""
        if self.repo is not None:
            cut = len(self.sub) + 1 if self.sub else 0
            paths = [p[cut:] for p in gitrepo.listed_files(self.repo, within=[self.git_path(rel_dir)])]
        else:
            paths, _ = gitrepo.walk_unignored(self.root, within=[rel_dir])
        if self._localidx is None:
            return paths
        return [p for p in paths if not self._localidx.match_file(p)]

    def _dir_state(self, gdir: str) -> tuple[tuple[gitrepo.IgnoreLevel, ...], bool]:
        state = self._dirs.get(gdir)
        if state is not None:
            return state
        chain = []  # from gdir up to the nearest cached ancestor, then filled in top-down
        d = gdir
        while d not in self._dirs:
            chain.append(d)
            if not d:
                break
            d = d.rpartition("/")[0]
        for d in reversed(chain):
            self._dirs[d] = self._compute(d)
        return self._dirs[gdir]

    def _compute(self, gdir: str) -> tuple[tuple[gitrepo.IgnoreLevel, ...], bool]:
        # The decisions gitrepo.walk_unignored takes on its way down, for one directory.
        if not gdir:
            levels = self._base
        else:
            parent, _, name = gdir.rpartition("/")
            levels, excluded = self._dirs[parent]
            if excluded:
                return levels, True
            if (
                name == ".git"
                or gitrepo.is_ignored(gdir, True, levels)
                or (self.repo is not None and os.path.lexists(os.path.join(self.top, gdir, ".git")))
            ):
                return levels, True
        spec = gitrepo.read_ignore_file(self.top / gdir / ".gitignore")
        return (levels + ((gdir, spec),) if spec is not None else levels), False


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


