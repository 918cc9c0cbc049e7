"""The chunking side of indexing: per-file jobs run on every core, each failure costing its file only.

Place in the flow: discover -> **workers** (read, hash, chunk: ``localidx.chunk``) -> the writer (``indexer``) or the
dry run (``dryrun``). This module is what the worker processes import (the forkserver preloads it with the
chunker), so it stays free of LanceDB and the writer.

``map_files`` runs a job function over files on a pool of processes and yields results in job order. A job that
raises is already turned into a result by the job function (``chunk_changed_file`` and ``count_file`` never
raise); a job that kills its process (a crash in a native parser, the kernel's OOM killer) breaks the pool, and
a batch that runs past ``BATCH_TIMEOUT_S`` has its pool killed: either way every job that was in flight runs again
alone, so that the one that kills its process again, or runs past ``ALONE_TIMEOUT_S``, is found and given
``on_crash``'s result, and the others' results are kept. The rest of the files carry on in a new pool.

A worker ends when the process that started the pool ends, however it ends (``kill -9`` included): each worker
watches that process (``_watch_owner``). With the fork server, the server then ends by itself (it stops once every
process holding its "alive" pipe is gone), and multiprocessing's resource tracker after it (it stops once every
process holding its pipe is gone), so nothing is left behind.
"""

from __future__ import annotations

import os
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from localidx.config import Settings

BATCH = 8  # files per task sent to a worker: fewer round trips than one at a time
# Backstops against a job that never ends (the parser has its own timeout; these catch anything else). Generous:
# a batch of large files on a loaded two-core laptop takes tens of seconds.
BATCH_TIMEOUT_S = 600.0
ALONE_TIMEOUT_S = 180.0


@dataclass
class ChunkedFile:
    """What a worker reports about one file the writer asked about."""

    path: str
    stat: tuple[int, int] | None  # (mtime_ns, size); None when the file could not be read
    blob: str  # the git blob id of its content ("" when unread)
    chunks: object = None  # FileChunks; None when the content is what the catalog has, or the file was not read
    skipped: str | None = None  # a skip reason: "unreadable", or a content reason (binary, minified, ...)


@dataclass
class FileCounts:
    """What the dry run counts in one file (small, so that it crosses process boundaries cheaply)."""

    path: str
    language: str = ""
    skipped: str | None = None
    chunks_by_kind: dict = field(default_factory=dict)
    symbols: int = 0
    size: int = 0
    errors: list = field(default_factory=list)
    invalid_utf8: bool = False
    redactions: int = 0


# Below this many bytes to chunk, the work is done in the calling process: the chunker reads about 1.8 MB per
# CPU-second (docs/benchmarks.md, Chunker), and starting a pool costs about 0.3-0.5 CPU-seconds (a fork server that
# imports the chunker, or workers that each import it), so on two cores a pool gains nothing under about 1 MB.
IN_PROCESS_BYTES = 1_000_000


def worker_count(settings: Settings, work_bytes: int | None = None) -> int:
    """Processes to chunk with: ``settings.workers``, or (0) every core, or 1 (this process) when the files to chunk
    hold fewer than ``IN_PROCESS_BYTES``."""
    if settings.workers:
        return settings.workers
    if work_bytes is not None and work_bytes < IN_PROCESS_BYTES:
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def read_file(abs_path: str, max_bytes: int | None = None) -> tuple[os.stat_result, bytes] | str:
    """(stat, bytes) of a file, or why it was not read: "too-large" (over ``max_bytes``, checked before reading) or
    "unreadable"."""
    from localidx.discover.files import TooLarge, read_source
    from localidx.errors import LocalidxError

    try:
        st = os.stat(abs_path)
        data = read_source(Path(abs_path), max_bytes)
    except TooLarge:
        return "too-large"
    except (OSError, LocalidxError):
        return "unreadable"
    return st, data


def chunk_changed_file(job: tuple[str, str, str, Settings]) -> ChunkedFile:
    """Worker: read and hash one file and, when its content differs from ``known_hash``, chunk it."""
    import pygit2

    from localidx.chunk import chunk_file

    path, abs_path, known_hash, settings = job
    read = read_file(abs_path, settings.max_file_bytes)
    if isinstance(read, str):
        return ChunkedFile(path=path, stat=None, blob="", skipped=read)
    st, data = read
    blob = str(pygit2.hash(data))
    stat = (st.st_mtime_ns, st.st_size)
    if blob == known_hash:
        return ChunkedFile(path=path, stat=stat, blob=blob)
    result = chunk_file(path, data, settings)
    return ChunkedFile(path=path, stat=stat, blob=blob, chunks=result, skipped=result.skipped)


def crashed_chunking(job: tuple[str, str, str, Settings], reason: str) -> ChunkedFile:
    """The result for a file whose chunking killed its worker process: the file as line windows and an error
    chunk, chunked here without a parser (the part that can crash a process)."""
    import pygit2

    from localidx.chunk import unparsed_file

    path, abs_path, _known, settings = job
    read = read_file(abs_path, settings.max_file_bytes)
    if isinstance(read, str):
        return ChunkedFile(path=path, stat=None, blob="", skipped=read)
    st, data = read
    result = unparsed_file(path, data, settings, reason)
    return ChunkedFile(path=path, stat=(st.st_mtime_ns, st.st_size), blob=str(pygit2.hash(data)), chunks=result,
                       skipped=result.skipped)


def count_file(job: tuple[str, str, Settings, frozenset | None]) -> FileCounts:
    """Worker for the dry run: chunk one file and count what came out."""
    from localidx.chunk import chunk_file

    path, abs_path, settings, kinds = job
    read = read_file(abs_path, settings.max_file_bytes)
    if isinstance(read, str):
        return FileCounts(path=path, skipped=read)
    return _counts(path, chunk_file(path, read[1], settings), kinds)


def crashed_count(job: tuple[str, str, Settings, frozenset | None], reason: str) -> FileCounts:
    from localidx.chunk import unparsed_file

    path, abs_path, settings, kinds = job
    read = read_file(abs_path, settings.max_file_bytes)
    if isinstance(read, str):
        return FileCounts(path=path, skipped=read)
    return _counts(path, unparsed_file(path, read[1], settings, reason), kinds)


def _counts(path: str, result, kinds: frozenset | None) -> FileCounts:
    counts = Counter(c.kind for c in result.chunks if kinds is None or c.kind in kinds)
    return FileCounts(path=path, language=result.language, skipped=result.skipped, chunks_by_kind=dict(counts),
                       symbols=result.symbols, size=result.size, errors=result.errors,
                       invalid_utf8=result.invalid_utf8, redactions=result.redactions)


def _run_batch(func: Callable, batch: list) -> list:
    return [func(job) for job in batch]


def _context():
    import multiprocessing
    import sys

    if "lancedb" in sys.modules:
        # LanceDB's runtime threads do not survive a fork: start workers from a clean server process that has
        # imported only the chunker. That server starts as `python -c ...` in the current directory, usually a
        # repository, which `-c` would put first on sys.path: its own multiprocessing/ or json/ package would be
        # imported instead of the real one. PYTHONSAFEPATH (Python 3.11+) keeps it off.
        os.environ.setdefault("PYTHONSAFEPATH", "1")
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["localidx.chunk", "localidx.index.workers"])
        return context
    return multiprocessing.get_context("fork")  # workers inherit the loaded grammars, nothing to re-import


def map_files(func: Callable, jobs: list, workers: int, on_crash: Callable | None = None) -> Iterator:
    """``func`` over ``jobs`` on ``workers`` processes (in this process when 1), results in job order; a job that
    kills its process gets ``on_crash(job, reason)`` instead (see the module docstring), or, without ``on_crash``,
    stops the map with ``BrokenProcessPool``."""
    if workers <= 1 or len(jobs) < BATCH:
        yield from map(func, jobs)
        return
    from concurrent.futures import TimeoutError as Timeout
    from concurrent.futures.process import BrokenProcessPool

    context = _context()
    results: dict[int, object] = {}
    position = 0
    todo = list(range(len(jobs)))
    while todo:
        batches = deque(todo[i : i + BATCH] for i in range(0, len(todo), BATCH))
        in_flight: deque = deque()
        suspects: list[int] = []
        with _pool(workers, context) as pool:
            def submit() -> None:
                if batches:
                    batch = batches.popleft()
                    try:
                        in_flight.append((batch, pool.submit(_run_batch, func, [jobs[i] for i in batch])))
                    except BrokenProcessPool:  # found out below, from a batch in flight
                        batches.appendleft(batch)

            for _ in range(2 * workers):
                submit()
            while in_flight:
                batch, future = in_flight.popleft()
                try:
                    out = future.result(timeout=BATCH_TIMEOUT_S)
                except (BrokenProcessPool, Timeout) as exc:
                    if on_crash is None:
                        raise
                    if isinstance(exc, Timeout):
                        _kill(pool)
                    suspects = batch + [i for b, _f in in_flight for i in b]
                    break
                results.update(zip(batch, out))
                submit()
                while position in results:
                    yield results.pop(position)
                    position += 1
        alone = None
        for i in suspects:  # one at a time in a pool of one, so that a crash or a hang names its file
            alone = alone or _pool(1, context)
            try:
                results[i] = alone.submit(func, jobs[i]).result(timeout=ALONE_TIMEOUT_S)
            except (BrokenProcessPool, Timeout) as exc:
                hung = isinstance(exc, Timeout)
                if hung:
                    _kill(alone)
                results[i] = on_crash(jobs[i], f"chunking took over {ALONE_TIMEOUT_S:g} s and was stopped" if hung
                                      else "the chunker's process died on this file")
                alone.shutdown(wait=True)
                alone = None
        if alone is not None:
            alone.shutdown(wait=True)
        todo = [i for b in batches for i in b]
        while position in results:
            yield results.pop(position)
            position += 1


def _watch_owner(owner: int) -> None:
    """Worker initializer: kill this process as soon as ``owner`` (the process that started the pool) ends.

    The owner is not always the parent (with the fork server, the server is), so the parent-death signal of
    ``prctl`` cannot say it; a process descriptor can, without races on a reused pid: a thread waits on it. Where
    there is none (not Linux), the thread asks every half second whether the owner still exists."""
    import signal
    import threading

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        die()  # gone already
        return
    except (AttributeError, OSError):  # no pidfd_open here (not Linux, an old kernel, a sandbox)
        fd = None

    def wait_pidfd() -> None:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll()  # readable once the owner has ended
        die()

    def wait_poll() -> None:
        import time

        while True:
            time.sleep(0.5)
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                die()
            except OSError:
                pass  # exists, not ours to signal

    threading.Thread(target=wait_pidfd if fd is not None else wait_poll, name="localidx-owner-watch",
                     daemon=True).start()


def _pool(workers: int, context):
    """A process pool whose workers all start before any job is queued.

    With a fork server, CPython (3.11-3.12) starts workers one by one as jobs are submitted, while the pool's
    manager thread already hands out the first jobs: a worker that dies then (a job that kills its process) breaks
    the pool while the next worker is being started; that one is added after the manager has terminated the others,
    and the manager waits for it forever (a fresh-clone CI run hung in tests/test_workers.py; the stacks showed the
    manager in ``join`` and the new worker waiting for a job). Starting them all at once, as the pool does for
    ``fork``, leaves no such window."""
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_watch_owner, initargs=(os.getpid(),))
    pool._safe_to_dynamically_spawn_children = False  # noqa: SLF001 - the only switch for eager start
    return pool


def _kill(pool) -> None:
    """Kill a pool's worker processes (one of them is stuck); the pool then reports itself broken."""
    for process in list(getattr(pool, "_processes", {}).values()):
        process.kill()
