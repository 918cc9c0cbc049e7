"""Compaction of a chunk table: old versions go as soon as no reader is on them, fragments are rewritten when they
hold many deleted rows or are many.

Place in the flow: store, called by the single writer (``localidx.index.indexer`` at the end of a pass that wrote, and
the
daemon's writer when the daemon goes idle). Every batch and vector fill is a LanceDB commit, and a branch switch
replaces most rows: without this a table held every version's files (requests switched six times between two tags:
58 MB of files for 4 MB of rows; benchmarks/compaction.py).

**Readers hold leases.** ``ChunkStore.snapshot`` takes a shared ``flock`` on ``<lancedb>.leases/<table>/<version>``
for as long as the pinned table object lives (a one-shot search: its process; the daemon: its queries, and the
latest version it keeps pinned). The writer deletes a version only after taking the exclusive lock on its lease
without waiting, so a version some reader is on stays, however old, and one no reader is on goes at once. The writer
never waits for a reader; a reader waits for the writer only in the instant between pinning a version and the
writer deleting it (then it finds the version gone and pins the latest, which is never deleted). A reader that
cannot make its lease file (a read-only state dir) reads unprotected, as every reader did before leases.

**Cheap when there is nothing to do.** ``maintain`` lists the table's ``_versions`` directory and, only when more
than the latest version is there, tries the leases and deletes (tens of milliseconds; deleting chosen versions
takes pylance, which ``localidx[cluster]`` installs: without it old versions go only with a rewrite, see
``drop_old_versions``). Rewriting fragments (LanceDB's
``optimize``: fragments merged, deleted rows dropped, the full-text index brought along; about a second at 4k rows)
runs only when ``needs_rewrite`` says so: deleted rows over ``REWRITE_DELETED_SHARE`` of the stored rows, more than
``REWRITE_FRAGMENTS`` fragments, ``REWRITE_EVERY_VERSIONS`` commits since the last rewrite, deleted rows still
stored ``REWRITE_AFTER_S`` after it, or (without pylance) files on disk over ``REWRITE_WASTE`` times the latest
version's (their text, a secret taken out of a file, leaves the disk with the rewrite).
The thresholds are module attributes, so tests can lower them.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REWRITE_DELETED_SHARE = 0.1  # rows deleted but still stored, over all stored rows, before fragments are rewritten
REWRITE_FRAGMENTS = 32  # fragments (about one per commit that added rows) before they are merged
REWRITE_EVERY_VERSIONS = 64  # commits since the last rewrite
REWRITE_AFTER_S = 600.0  # deleted rows are rewritten away at the first pass this long after the last rewrite
REWRITE_WASTE = 1.5  # without pylance: files on disk over the latest version's before a rewrite drops old versions
# A daemon sets this False: importing pylance costs a long-lived process about 30 MB of RSS for good, and a daemon
# drops its old versions when it goes idle, when no reader holds one (``maintain(idle=True)``).
USE_PYLANCE = True
PIN_TRIES = 5  # a reader whose version was deleted while it pinned it tries the latest again this often


@dataclass
class Footprint:
    """What a table directory holds on disk: bytes, version manifests, deletion files and data files."""

    bytes: int = 0
    versions: int = 0
    deletion_files: int = 0
    data_files: int = 0


def footprint(location: Path) -> Footprint:
    """The table directory's files, counted (one walk; nothing is opened)."""
    found = Footprint()
    for directory, _dirs, files in os.walk(location):
        part = os.path.basename(directory)
        for name in files:
            try:
                found.bytes += os.stat(os.path.join(directory, name)).st_size
            except OSError:
                continue
            if part == "_versions" and name.endswith(".manifest"):
                found.versions += 1
            elif part == "_deletions":
                found.deletion_files += 1
            elif part == "data":
                found.data_files += 1
    return found


def version_of(name: str) -> int | None:
    """The version a ``_versions`` file name holds, or None (newer Lance names count down from 2**64 - 1)."""
    stem, _dot, suffix = name.partition(".")
    if suffix != "manifest" or not stem.isdigit():
        return None
    number = int(stem)
    return (1 << 64) - 1 - number if number >= 1 << 63 else number


def versions_on_disk(location: Path) -> list[int]:
    """The versions whose manifests are in the table's ``_versions`` directory, oldest first ([] when unreadable)."""
    try:
        names = os.listdir(location / "_versions")
    except OSError:
        return []
    return sorted(v for v in map(version_of, names) if v is not None)


def has_version(location: Path, version: int) -> bool:
    return any(os.path.exists(location / "_versions" / f"{name}.manifest")
               for name in (f"{(1 << 64) - 1 - version:020d}", str(version)))


# -- leases ------------------------------------------------------------------------------------------------------


def lease_dir(db_dir: Path, table_name: str) -> Path:
    return db_dir.with_name(db_dir.name + ".leases") / table_name


def _open_lease(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def take_lease(db_dir: Path, table_name: str, version: int) -> int | None:
    """A shared lock on the version's lease file: its descriptor; -1 when the file cannot be made (read
    unprotected); None when the version's manifest is gone once the lock is held (the writer deleted it meanwhile:
    pin the latest again)."""
    location = db_dir / f"{table_name}.lance"
    directory = lease_dir(db_dir, table_name)
    path = directory / str(version)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = _open_lease(path)
    except OSError as exc:
        log.debug("no lease on %s version %d (%s): reading unprotected", table_name, version, exc)
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while the writer deletes this very version
        same = os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        same = False
    if same and has_version(location, version):
        return fd
    os.close(fd)
    return None


def hold_lease(table, fd: int) -> None:
    """Keep the lease as long as ``table`` lives."""
    if fd >= 0:
        weakref.finalize(table, os.close, fd)


def _free_versions(db_dir: Path, table_name: str, versions: list[int]) -> tuple[list[int], list[int]]:
    """The versions no reader holds, each with its lease locked exclusively (descriptors returned to release)."""
    directory = lease_dir(db_dir, table_name)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return [], []
    free, held = [], []
    for version in versions:
        path = directory / str(version)
        try:
            # Made when missing and locked too: a reader about to pin this version then waits, and finds it gone.
            fd = _open_lease(path)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                log.debug("lease %s: %s", path, exc)
            continue
        free.append(version)
        held.append(fd)
    return free, held


# -- the writer's side -------------------------------------------------------------------------------------------


def pylance_installed() -> bool:
    """Whether pylance (the ``lance`` package, with ``localidx[cluster]``) is there and may be used: it deletes
    versions one by one. A daemon does without it (``USE_PYLANCE``)."""
    import importlib.util

    return USE_PYLANCE and importlib.util.find_spec("lance") is not None


def drop_old_versions(store, rewritten: bool = False) -> int:
    """Delete every version of the store's chunk table but the latest that no reader holds; the number deleted.

    With pylance, exactly those versions go. Without it LanceDB can only drop every old version at once, through an
    ``optimize`` that also merges fragments (a full rewrite at 100k rows): that is done only when no reader holds an
    old version, and only right after a rewrite (when the merge has nothing left to do) or when idle: ``rewritten``."""
    if store.read_only or not store.exists():
        return 0
    location = store.db_dir / f"{store.table_name}.lance"
    versions = versions_on_disk(location)
    old = versions[:-1]
    if not old:
        return 0
    free, held = _free_versions(store.db_dir, store.table_name, old)
    try:
        if not free:
            return 0
        if pylance_installed():
            store.table().to_lance().cleanup_old_versions(versions=free, error_if_tagged_old_versions=False)
        elif rewritten and len(free) == len(old):
            import warnings
            from datetime import timedelta

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "removes every version but the latest": no reader is on one
                store.table().optimize(cleanup_older_than=timedelta(0))
        else:
            return 0
        directory = lease_dir(store.db_dir, store.table_name)
        for version in free:
            try:
                os.unlink(directory / str(version))
            except OSError:
                pass
    finally:
        for fd in held:
            os.close(fd)
    if len(free) < len(old):
        log.debug("kept %d versions of %s that readers are on", len(old) - len(free), store.table_name)
    return len(free)


def needs_rewrite(store, since_versions: int, since_s: float) -> str | None:
    """Why the table's fragments should be rewritten now (see the module docstring), or None."""
    latest = store.table().list_versions()[-1].get("metadata") or {}
    stored = int(latest.get("total_data_file_rows") or 0)
    deleted = int(latest.get("total_deletion_file_rows") or 0)
    fragments = int(latest.get("total_fragments") or 0)
    if stored and deleted > REWRITE_DELETED_SHARE * stored:
        return f"{deleted} of {stored} stored rows are deleted"
    if fragments > REWRITE_FRAGMENTS:
        return f"{fragments} fragments"
    live = int(latest.get("total_files_size") or 0)
    if live and not pylance_installed():  # old versions go only with a rewrite (``drop_old_versions``)
        held = footprint(store.db_dir / f"{store.table_name}.lance").bytes
        if held > REWRITE_WASTE * live:
            return f"{held} bytes on disk for {live} of the latest version"
    if since_versions >= REWRITE_EVERY_VERSIONS:
        return f"{since_versions} commits since the last compaction"
    if deleted and since_s >= REWRITE_AFTER_S:
        return f"deleted rows kept {since_s:.0f} s"
    return None


def rewrite(store) -> None:
    """Merge the fragments and drop deleted rows (LanceDB's ``optimize``, indexes brought along); old versions are
    left to ``drop_old_versions``."""
    from datetime import timedelta

    # cleanup_older_than: a week, i.e. nothing here; versions go through the leases only
    store.table().optimize(cleanup_older_than=timedelta(days=7))


def maintain(store, catalog=None, idle: bool = False) -> dict:
    """After a pass that wrote, or when idle (the single writer): rewrite the fragments when ``needs_rewrite`` says so
    (always without ``catalog``), then delete the versions no reader is on. The rewrite is recorded in the catalog's
    meta. Returns what was done."""
    if store.read_only or not store.exists():
        return {}
    started = time.perf_counter()
    done: dict = {}
    if catalog is None:
        why: str | None = "asked for"
    else:
        version = store.version()
        last = int(catalog.get_meta("compacted_at_version", "0") or 0)
        compacted_at = catalog.get_meta("compacted_at")
        if not compacted_at:  # the first pass of an index: the clock starts here
            catalog.set_meta("compacted_at", str(time.time()))
        since = time.time() - float(compacted_at or time.time())
        why = needs_rewrite(store, version - last, since) if version > last else None
    if why is not None:
        log.info("compacting %s: %s", store.table_name, why)
        rewrite(store)
        if catalog is not None:
            catalog.set_meta("compacted_at_version", str(store.version()))
            catalog.set_meta("compacted_at", str(time.time()))
        done["rewritten"] = why
    done["versions_dropped"] = drop_old_versions(store, rewritten=why is not None or idle)
    done["seconds"] = round(time.perf_counter() - started, 3)
    return done
