"""Who does the work of an operation: the work tree's daemon or this process. The one place that decides it.

Place in the flow: serve. The callers (``cli.py``, ``githooks.py``, ``mcp_server.py``) hold a ``Backend`` bound to one
work tree and its settings, and call one method per operation, named for the protocol's methods: ``index``
(``index/reindex``), ``status`` (``index/status``), ``search`` (``search/query``), ``context``
(``context/build``) and ``chunks`` (``chunks/show``). Each method either sends the request through
``localidx.interface.client`` or calls the library function the daemon's handler would call (``indexer.run_index``,
``status.index_status``, ``retrieve``, ``preview.chunk_paths``), here.

Why a module of its own and not part of ``client.py``: the client is the wire (connect, hello, request: it knows
no operation and nothing of the library beyond the protocol), while this module knows what each method means
in-process and when a daemon should be used at all. Two ideas, two modules; ``localidx daemon start|stop|status``
use the client alone.

Invariants:

- The same dicts either way. Each method returns the protocol's result for its method (``localidx.protocol``),
  whether a daemon answered or the work was done here. Two differences are the protocol's own: a daemon's
  ``index/status`` also describes the daemon under ``daemon``, and ``index(wait=False)`` answered by a daemon is
  ``{queued, full}`` (queued for its writer) where in-process work always runs and returns the run's record.
- The caller's policy is explicit, one of ``DAEMON_USES``, and decided here only (``command_policy`` picks the
  CLI's from its flag, the ``daemon`` setting and the environment):

    ``"start"``     the daemon, started when none runs, restarted once when its version or settings differ; never
                    in-process (the MCP server: it must not import lancedb or load a model). Failures raise.
    ``"auto"``      the daemon when one runs; when none runs (or it runs another version or other settings), this
                    call is done in-process (a cold daemon loads lancedb and the model first: waiting for it would
                    be slower than doing the work here) and then one is started in the background (after the work,
                    so that the two do not share the cores), so the next call finds it warm (the CLI's ``search``,
                    ``context``, ``ask``, ``status``).
                    Nothing is started for a work tree with nothing indexed (the daemon would index it all,
                    unasked), while its write lock is held (a daemon starting, an indexer), or for
                    ``RETRY_START_S`` after a daemon failed to start. Failures of a daemon that answered raise.
    ``"running"``   the daemon when one runs (restarted once when its version or settings differ), else in-process
                    (``index``, and every command under CI or with ``daemon = "running"``).
    ``"never"``     in-process, whatever runs (``--no-daemon``, ``daemon = "never"``).
    ``"fallback"``  the daemon running now, as it is, asked briefly (``FALLBACK_TIMEOUT_S``; never started,
                    restarted or checked against these settings); anything short of an answer means in-process (the
                    git hooks: a change must never be lost, and a hook never waits on a sick daemon).

- "Settings differ" above means a settings file changed since the daemon started (the edit is everyone's). A
  daemon whose settings differ only by this caller's own (its ``LOCALIDX_*`` environment: ``client.OtherSettings``)
  is used by others as it is: under "start", "auto" and "running" the call is then done in-process, with one line
  on stderr saying why and that ``localidx daemon restart`` switches it; an ``index`` that finds it holding the
  write lock says the same. ``"running"`` waits for a daemon on its way up (it holds the write lock already).
- ``via`` says who did the last call's work: ``"daemon"`` or ``"in-process"``; ``started`` whether a call started a
  daemon in the background (the CLI says so on stderr).
- Light to import: the in-process library (lancedb, the model, tree-sitter) is imported inside the methods that run
  it, only when they do.
"""

from __future__ import annotations

import os
import sys
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, get_args

from localidx import lazylog
from localidx.interface.client import (Client, DaemonUnavailable, OtherSettings, VersionMismatch, connect,
                                       connect_as_is, restart_reason, start_in_background, stop_daemon)
from localidx.config import Settings
from localidx.errors import ConfigError, LocalidxError, UsageError

log = lazylog.getLogger(__name__)

DaemonUse = Literal["start", "auto", "running", "never", "fallback"]
DAEMON_USES: tuple[str, ...] = get_args(DaemonUse)
CI_ENV = "CI"  # set by CI services (GitHub Actions, GitLab, ...): "auto" starts no daemon there

REQUEST_TIMEOUT_S = 300.0  # a daemon's answer: a cold one loads the model first; a hung one must not hang us forever
FALLBACK_TIMEOUT_S = 2.0  # "fallback" connects and is answered within this, else works in-process


def command_policy(settings: Settings, no_daemon: bool = False, starts: bool = True,
                   env: dict | None = None) -> DaemonUse:
    """The policy of a CLI command: ``"never"`` for ``--no-daemon`` or ``daemon = "never"``; ``"running"`` for
    ``daemon = "running"``, for a command that never starts a daemon (``starts`` false: ``index``) and under CI (a
    ``CI`` variable set to anything but ``0``, ``false`` or ``no``); else ``"auto"``."""
    env = os.environ if env is None else env
    if no_daemon or settings.daemon == "never":
        return "never"
    under_ci = env.get(CI_ENV, "").strip().lower() not in ("", "0", "false", "no")
    if settings.daemon == "running" or not starts or under_ci:
        return "running"
    return "auto"


def search_params(query: str, *, k: int = 10, mode: str = "hybrid", language: str | None = None,
                  path_glob: str | None = None, kind: str | None = None, files: bool = False) -> dict:
    """The ``search/query`` request of ``Backend.search``'s arguments (the CLI's fast path sends it too)."""
    return {"query": query, "k": k, "mode": mode,
            **{name: value for name, value in (("lang", language), ("path", path_glob), ("kind", kind),
                                               ("files", files)) if value}}


@dataclass
class Backend:
    """The operations of the work tree at ``root``, done by its daemon or in this process as ``daemon`` says."""

    root: Path
    in_git: bool
    settings: Settings
    daemon: DaemonUse
    via: str | None = field(default=None, init=False)  # "daemon" or "in-process": who did the last call's work
    started: bool = field(default=False, init=False)  # a call started the daemon in the background ("auto")
    _start_after: bool = field(default=False, init=False, repr=False)  # start one once this call's work is done
    _other: OtherSettings | None = field(default=None, init=False, repr=False)  # the daemon left alone, and why

    @property
    def other_settings(self) -> str | None:
        """Why the last call was done in-process beside a daemon of other settings (``OtherSettings``), or None."""
        return None if self._other is None else str(self._other)

    def __post_init__(self) -> None:
        if self.daemon not in DAEMON_USES:
            raise ValueError(f"daemon must be one of {', '.join(DAEMON_USES)}, not {self.daemon!r}")

    def index(self, only: list[str] | None = None, *, rebuild: bool = False, embed: bool = True, wait: bool = True,
              wait_s: float = 0.0, reason: str = "localidx index", progress: Callable | None = None) -> dict:
        """Bring the index up to date (``only``: these repo-relative paths; None: everything). The run's record
        (``RunStats.to_dict()``), or ``{queued, full}`` when a daemon took it and ``wait`` is false.

        A daemon holds the write lock, runs the update itself and always embeds (``embed``, ``wait_s`` apply
        in-process only); ``rebuild`` is asked of it too (its writer builds the index again beside the current one
        and switches to it). ``progress`` gets the indexer's events in-process, and ``("daemon", pid=...)`` before a
        daemon is asked."""

        def announce(hello: dict) -> None:
            if progress is not None:
                progress("daemon", pid=hello["pid"])

        def here() -> dict:
            from localidx.index.indexer import run_index
            from localidx.store.lock import IndexBusy

            try:
                return run_index(self.root, self.in_git, self.settings, only=only, rebuild=rebuild, embed=embed,
                                 wait_s=wait_s, progress=progress).to_dict()
            except IndexBusy as exc:
                raise self._daemon_holds(exc) from None
            except Exception as exc:
                from localidx.errors import disk_full
                from localidx.paths import index_paths

                full = disk_full(exc, index_paths(self.root, self.in_git, self.settings.home).state)
                if full is None:
                    raise
                raise full from None

        params: dict[str, Any] = {"reason": reason, **({"wait": True} if wait else {}),
                                  **({"paths": only} if only is not None else {}),
                                  **({"rebuild": True} if rebuild else {})}
        return self._call("index/reindex", params, here, as_long_as_it_takes=wait, before=announce)

    def _daemon_holds(self, exc):
        """The IndexBusy to show: when the holder is this work tree's daemon, say so and what to do instead."""
        from localidx.daemon import lifecycle
        from localidx.store.lock import IndexBusy

        paths = lifecycle.daemon_paths(self.root, self.in_git, self.settings)
        status = lifecycle.read_status(paths.status)
        daemon_pid = status["pid"] if status else lifecycle.starting_pid(paths)
        if not exc.holder or daemon_pid != exc.holder:
            return exc
        if self._other is not None:
            return IndexBusy(f"this work tree's daemon (pid {exc.holder}) holds the index and runs with other "
                             f"settings ({', '.join(self._other.names) or 'see its log'}): `localidx daemon restart` "
                             "switches it to this command's, or run `localidx index` as it is", exc.holder)
        return IndexBusy(f"this work tree's daemon (pid {exc.holder}) holds the index: run `localidx index` without "
                         "--no-daemon and the daemon does the run, or `localidx daemon stop` first", exc.holder)

    def status(self) -> dict:
        """Where the index is and what it holds (``localidx status --json``); from a daemon, also ``daemon``."""

        def here() -> dict:
            from localidx.index.status import index_status

            return index_status(self.root, self.in_git, self.settings)

        return self._call("index/status", {}, here)

    def search(self, query: str, *, k: int = 10, mode: str = "hybrid", language: str | None = None,
               path_glob: str | None = None, kind: str | None = None, files: bool = False) -> dict:
        """Hybrid search (``localidx search --json``): ``{matches, warnings}``, and ``files`` when asked."""

        def here() -> dict:
            from localidx.index.status import explain_empty_search
            from localidx.retrieve.search import search_response

            return self._read(lambda index: explain_empty_search(index, lambda: search_response(
                index, query, k=k, mode=mode, language=language, path_glob=path_glob, kind=kind, files=files)))

        return self._call("search/query", search_params(query, k=k, mode=mode, language=language, path_glob=path_glob,
                                                        kind=kind, files=files), here)

    def context(self, query: str, *, profile: str | None = None, max_tokens: int | None = None,
                top_k: int | None = None, conversation_context: list[str] | None = None, locale: str | None = None,
                language: str | None = None, path_glob: str | None = None, kind: str | None = None) -> dict:
        """The retrieval pipeline's context pack (``localidx context --json``); left-out options are the profile's."""
        options = {"profile": profile, "max_tokens": max_tokens, "top_k": top_k,
                   "conversation_context": conversation_context, "locale": locale}

        def here() -> dict:
            from localidx.index.status import explain_empty_pack
            from localidx.retrieve.context import build_for_repository

            return self._read(lambda index: explain_empty_pack(index, build_for_repository(
                index, query, settings=self.settings, language=language, path_glob=path_glob, kind=kind, **options)))

        params = {"query": query, **{name: value for name, value in
                                     {**options, "lang": language, "path": path_glob, "kind": kind}.items()
                                     if value is not None}}
        return self._call("context/build", params, here)

    def chunks(self, paths: list[str], *, max_tokens: int | None = None) -> dict:
        """How the work tree's files at ``paths`` (repo-relative) are chunked (``localidx chunks --json``):
        ``{files: [{path, language, skipped, chunks}]}`` (``preview.chunk_paths``)."""

        def here() -> dict:
            from localidx.index.preview import chunk_paths

            return chunk_paths(self.root, paths, self.settings, max_tokens=max_tokens)

        params: dict[str, Any] = {"paths": paths, **({"max_tokens": max_tokens} if max_tokens is not None else {})}
        return self._call("chunks/show", params, here)

    # -- the decision ---------------------------------------------------------------------------------------------

    def _call(self, method: str, params: dict, here: Callable[[], dict], as_long_as_it_takes: bool = False,
              before: Callable[[dict], None] | None = None) -> dict:
        """``method`` answered by the daemon the policy picks, else ``here()``. ``before(hello)`` runs once a daemon
        is picked, before it is asked; it may refuse the call by raising. ``as_long_as_it_takes``: the answer comes
        when the work is done (a waiting reindex), so no timeout, except under "fallback", which asks briefly."""
        client = self._daemon()
        if client is not None:
            if self.daemon == "fallback":
                timeout = client.timeout
            else:
                timeout = None if as_long_as_it_takes else REQUEST_TIMEOUT_S
            with client:
                if before is not None:
                    before(client.hello)
                try:
                    result = client.request(method, params, timeout=timeout)
                except DaemonUnavailable as exc:
                    if self.daemon != "fallback":
                        raise
                    log.debug("the daemon did not answer %s (%s); working in this process", method, exc)
                except Exception:  # noqa: BLE001 - a bug must not lose a hook's change either
                    if self.daemon != "fallback":
                        raise
                    log.exception("the daemon failed %s; working in this process", method)
                else:
                    self.via = "daemon"
                    return result
        self.via = "in-process"
        result = here()
        if self._start_after:
            self._start_after = False
            try:
                if self._indexed():
                    self.started = start_in_background(self.root, self.in_git, self.settings)
            except LocalidxError as exc:  # a full disk, say: this call answered; the next says what it meets
                log.info("not starting the daemon in the background: %s", exc)
            except Exception:  # noqa: BLE001 - this call's answer never depends on a daemon starting
                log.exception("starting the daemon in the background failed")
        return result

    def _indexed(self) -> bool:
        """Whether the work tree has an index: a daemon started for one that has none would index it all, unasked
        (its first job is a full pass)."""
        from localidx.paths import index_paths
        from localidx.store.catalog import lists_files

        return lists_files(index_paths(self.root, self.in_git, self.settings.home).catalog)

    def _daemon(self) -> Client | None:
        """A connection to the daemon this call goes to, or None: do the work here."""
        if self.daemon == "never":
            return None
        try:
            if self.daemon == "start":
                return connect(self.root, self.in_git, self.settings, start=True)
            if self.daemon == "running":
                return self._running()
            if self.daemon == "auto":
                return self._auto()
        except OtherSettings as exc:  # the daemon others use is left as it is; this call is answered here
            self._other = exc
            print(f"localidx: answering in this process: {exc}", file=sys.stderr)
            return None
        try:
            return connect_as_is(self.root, self.in_git, self.settings, timeout=FALLBACK_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - connect_as_is answers None for what it knows; anything else, too
            log.exception("reaching the daemon failed; working in this process")
            return None

    def _running(self) -> Client | None:
        """"running": the daemon when one runs, waited for while it is on its way up (it holds the write lock
        then: an ``index`` done here would only find it busy); None when none runs or its socket dir is unsafe."""
        from localidx.daemon.lifecycle import starting_pid
        from localidx.interface.client import wait_for_a_start

        for attempt in range(2):
            try:
                return connect(self.root, self.in_git, self.settings)
            except (DaemonUnavailable, ConfigError):
                try:
                    if attempt or starting_pid(self._paths()) is None:
                        return None
                    wait_for_a_start(self._paths())
                except (LocalidxError, OSError):
                    return None
        return None

    def _auto(self) -> Client | None:
        """"auto": the running daemon, or None: the work is done here and a daemon started after it (see the module
        docstring)."""
        try:
            return connect(self.root, self.in_git, self.settings, restart=False)
        except OtherSettings:
            raise  # left running: _daemon says why this call is answered here
        except VersionMismatch as exc:
            # Another version or other settings: stopped now (quick), started again in the background.
            reason = restart_reason(exc, self.settings)
            log.info("restarting the daemon: %s", reason)
            print(f"localidx: restarting the daemon in the background: {reason}", file=sys.stderr)
            try:
                stop_daemon(self._paths())
            except DaemonUnavailable as stop_exc:
                log.warning("the daemon did not stop (%s); working in this process", stop_exc)
                return None
        except ConfigError as exc:  # its socket dir is unsafe to use: no daemon, now or later
            log.debug("no daemon: %s", exc)
            return None
        except DaemonUnavailable as exc:
            log.debug("no daemon answers (%s)", exc)
        self._start_after = True
        return None

    def _paths(self):
        from localidx.daemon.lifecycle import daemon_paths

        return daemon_paths(self.root, self.in_git, self.settings)

    def _read(self, action: Callable[[Any], dict]) -> dict:
        """``action(index)`` on the work tree's index opened read-only; once more, on the new generation, when
        another process's rebuild replaced the one it had opened while it read (``IndexSwitched``)."""
        from localidx.errors import IndexSwitched

        try:
            with self._reading() as index:
                return action(index)
        except IndexSwitched:
            with self._reading() as index:
                return action(index)

    def _reading(self) -> closing:
        """The work tree's index opened read-only, closed when the ``with`` ends."""
        from localidx.store.index import open_index

        return closing(open_index(self.root, self.in_git, self.settings, read_only=True))
