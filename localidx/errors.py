"""Errors a user can cause, and the exit codes the CLI gives them.

Library code raises these; ``cli.py`` turns them into one line on stderr and a non-zero exit.
Anything else escaping to the CLI is a bug and is reported as such (exit 3), still without a traceback
unless ``LOCALIDX_DEBUG=1``.

Exit codes: 0 success (``search``/``context``: at least one match); 1 the command ran and nothing matched, or
``status`` found nothing indexed yet; 2 an error the user must act on (bad arguments or configuration, no index, a
damaged index, a daemon that would not start); 3 a bug.
"""

from __future__ import annotations


class LocalidxError(Exception):
    """A problem the user can act on; its message is one line."""

    exit_code = 2


class UsageError(LocalidxError):
    """Bad input: a path that does not exist, a directory where a file was expected, a bad option value."""

    exit_code = 2


class ConfigError(LocalidxError):
    """A configuration file or environment variable holds a value localidx cannot use."""

    exit_code = 2


class IndexDamaged(LocalidxError):
    """The index's files are damaged (a catalog that is not a database, a table LanceDB cannot read); the message
    says what happened, and that `localidx index` repairs it."""

    exit_code = 2


class DiskFull(LocalidxError):
    """The disk under the index (or another file localidx writes) is full: nothing is damaged and no repair is
    tried; the message says where and how much is free."""

    exit_code = 2


_FULL_SIGNS = ("no space left on device", "os error 28", "database or disk is full")
# SQLite says only "disk I/O error" when it cannot grow a WAL index (the -shm file) on a full disk, even to read: taken
# as a full disk when the disk under ``where`` has less than this free, else it is what it says.
_IO_SIGN = "disk i/o error"
NEARLY_FULL_BYTES = 1 << 20


def disk_full(exc: BaseException, where=None) -> DiskFull | None:
    """The ``DiskFull`` that ``exc`` means (ENOSPC, LanceDB's or SQLite's words for it, or SQLite's "disk I/O error"
    on a disk with under ``NEARLY_FULL_BYTES`` free at ``where``), else None. ``where``: the directory to name (the
    index's state dir, the home), else the file the exception names, else the current directory."""
    import errno
    import os
    import shutil

    text = str(exc).lower()
    full = (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or any(sign in text for sign in _FULL_SIGNS)
    place = str(where or getattr(exc, "filename", None) or ".")
    place = os.path.dirname(place) if os.path.isfile(place) else place
    while place and not os.path.exists(place) and os.path.dirname(place) != place:
        place = os.path.dirname(place)  # the nearest directory that exists: its disk is the one that is full
    try:
        free: int | None = shutil.disk_usage(place).free
    except OSError:
        free = None
    if not full and not (_IO_SIGN in text and where is not None and free is not None and free < NEARLY_FULL_BYTES):
        return None
    said = f"free {free / 1e6:.1f} MB" if free is not None else "free space unknown"
    return DiskFull(f"no space left on device at {place} ({said}): free some space and run it again; the index "
                    "was not damaged")


class IndexNotReady(LocalidxError):
    """The work tree has no index yet (or none for the configured model)."""

    exit_code = 2


# What a search or a context pack says when there is no index to read (its warnings hold one of these).
NOT_READY_ONE = "nothing is indexed here yet: run `localidx index` first"
NOT_READY_ALL = "none of the registered repositories has an index: run `localidx index` in one"
NOT_READY_WARNINGS = (NOT_READY_ONE, NOT_READY_ALL)


class IndexSwitched(IndexNotReady):
    """A rebuild replaced the index generation this reader had opened, and dropped it, while it read: nothing is
    damaged; the same read on the new generation answers (``Backend`` asks once more)."""

    exit_code = 2


NO_MATCH_EXIT = 1  # the command ran and found nothing (like grep and rg); `status`: nothing indexed yet
INTERNAL_ERROR_EXIT = 3
