"""The daemon's start: ``run_daemon`` (``localidx daemon run``) sets up the log, takes the write lock, loads the
model, starts the writer, listens, starts the watcher and hands over to the event loop (``localidx.daemon.server``)
until it stops.

Place in the flow: serve. The order of the start and of the shutdown is described in ``localidx.daemon.server``'s
docstring; the loop itself, its connections and its bounds live there.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from logging.handlers import RotatingFileHandler
from pathlib import Path

from localidx.config import Settings
from localidx.daemon import lifecycle, memory
from localidx.daemon.frames import one_line
from localidx.daemon.server import LOCK_WAIT_S, LOG_MAX_BYTES, Daemon
from localidx.errors import LocalidxError

log = logging.getLogger(__name__)


def _setup_logging(path: Path, to_stderr: bool) -> list[logging.Handler]:
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("localidx")
    logger.setLevel(logging.DEBUG if os.environ.get("LOCALIDX_DEBUG") == "1" else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s")
    handlers: list[logging.Handler] = [RotatingFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=1,
                                                           encoding="utf-8")]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    from localidx.safety.redact import LogFilter

    for handler in handlers:
        handler.setFormatter(fmt)
        handler.addFilter(LogFilter())  # no secret an error message carried reaches the log
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
    daemon.watcher = watcher
    return watcher


def run_daemon(root: Path, in_git: bool, settings: Settings, log_to_stderr: bool = True) -> None:
    """Serve the work tree at ``root`` until stopped (``localidx daemon run``); see the module docstring.

    Raises LocalidxError when another daemon already serves it, the socket dir is unsafe, or the lock is held."""
    from localidx.paths import index_paths
    from localidx.store.lock import IndexBusy, WriteLock

    if "MALLOC_ARENA_MAX" not in os.environ:
        memory.limit_arenas()  # a daemon started by hand; lifecycle.spawn sets the variable for its own
    from localidx.store import compact, hot

    hot.set_eager()  # each table version's first query starts loading it into memory (store/hot.py)
    compact.USE_PYLANCE = False  # see there: a daemon's old versions go when it is idle, pylance kept out of memory
    paths = lifecycle.daemon_paths(root, in_git, settings)
    ipaths = index_paths(root, in_git, settings.home)
    try:
        lifecycle.check_socket_dir(paths.socket, create=True)
    except LocalidxError:
        lifecycle.record_start_failure(paths)  # commands start none in the background for a while
        raise
    status = lifecycle.read_status(paths.status)
    if status is not None and lifecycle.socket_listening(Path(status["socket"])):
        raise LocalidxError(f"a daemon already serves {root} (pid {status['pid']}, socket {status['socket']})")
    handlers = _setup_logging(paths.log, log_to_stderr)
    listened: list[bool] = []
    try:
        with WriteLock(paths.lock, wait_s=LOCK_WAIT_S):
            _serve(root, in_git, settings, paths, ipaths, on_listening=lambda: listened.append(True))
    except IndexBusy as exc:  # another process holds the index: not this daemon's failure
        log.error("cannot serve %s: %s", root, exc)
        raise
    except LocalidxError as exc:
        log.error("cannot serve %s: %s", root, exc)  # one line: the client that started it shows the last one
        if not listened:
            lifecycle.record_start_failure(paths)  # commands start none in the background for a while
        raise
    except Exception:
        log.exception("the daemon failed")
        if not listened:
            lifecycle.record_start_failure(paths)
        raise
    finally:
        for handler in handlers:
            logging.getLogger("localidx").removeHandler(handler)
            handler.close()


def _serve(root: Path, in_git: bool, settings: Settings, paths: lifecycle.DaemonPaths, ipaths,
           on_listening=lambda: None) -> None:
    from localidx.daemon.model import SharedModel
    from localidx.daemon.writer import Writer
    from localidx.embed import get_embedder

    log.info("starting for %s (localidx %s, pid %d)", root, lifecycle.package_version(), os.getpid())
    embedder = SharedModel(lambda: get_embedder(settings.embed_model, threads=settings.embed_threads or None))
    # Load the model now, once: the first query finds it warm (after an idle release, the next query loads it).
    embedder.load()
    log.info("model %s ready; %s", embedder.model_id, memory.usage())

    writer = Writer(root, ipaths, settings, embedder)
    daemon = Daemon(root, in_git, settings, paths, ipaths, embedder, writer)
    writer.on_activity = daemon.touch  # a run that ends restarts the idle clock
    writer.on_use = daemon.used  # a run uses the model and the index: the release clock starts again
    writer.on_change = daemon.notify  # subscribers hear about phases and progress
    writer.submit(None, reason="reconcile on start")  # what changed while no daemon ran
    writer.start()
    writer.ready.wait()
    if writer.open_error is not None:
        raise LocalidxError(f"cannot open the index: {one_line(writer.open_error)}")

    previous = {sig: signal.signal(sig, lambda signum, _frame: daemon.request_stop(signal.Signals(signum).name))
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    watcher = None
    try:
        daemon.listen()
        lifecycle.unlink_quietly(paths.worktree / lifecycle.FAILED_NAME)
        lifecycle.unlink_quietly(paths.worktree / lifecycle.STARTING_NAME)
        on_listening()
        watcher = _start_watcher(daemon, writer)
        daemon.serve()
    finally:
        daemon.shutdown(watcher)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
