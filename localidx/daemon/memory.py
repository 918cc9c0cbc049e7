"""What the daemon's process holds in memory, and giving freed memory back to the system.

``usage()`` reads ``/proc/self/status`` (Linux; elsewhere it reports nothing): resident memory split into anonymous
(the process's own heap: the model, LanceDB's caches, Python objects) and file-backed (shared libraries and mapped
files, which the kernel can drop and read again), the peak, and the thread count. ``trim()`` asks the allocators
to return free pages: glibc's ``malloc_trim`` (a freed ONNX Runtime session or LanceDB cache otherwise stays in the
heap as free space) and pyarrow's memory pool.

``limit_arenas()`` caps glibc's malloc arenas. glibc gives each thread that allocates its own arena, up to 8 per
core; LanceDB's and ONNX Runtime's thread pools then leave freed memory scattered over many heaps that are never
given back. Measured at 115k chunks (benchmarks/daemon.py): 745 MB after warm-up and ten context packs with the
default, 566 MB with two arenas, no slower. ``lifecycle.spawn`` also sets ``MALLOC_ARENA_MAX`` for the daemon it
starts (read once, when the process starts); ``limit_arenas`` covers ``localidx daemon run`` started by hand.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h

_FIELDS = {"VmRSS": "rss_mb", "RssAnon": "anon_mb", "RssFile": "file_mb", "VmHWM": "peak_mb", "Threads": "threads"}


def usage() -> dict:
    """``{rss_mb, anon_mb, file_mb, peak_mb, threads}`` of this process; {} where /proc is absent."""
    out: dict = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in _FIELDS:
                    number = int(value.split()[0])
                    out[_FIELDS[key]] = number if key == "Threads" else round(number / 1024, 1)
    except OSError:
        return {}
    return out


def trim() -> None:
    """Return freed heap pages to the system (best effort, never raises)."""
    if "pyarrow" in sys.modules:
        try:
            sys.modules["pyarrow"].default_memory_pool().release_unused()
        except Exception:  # noqa: BLE001 - an allocator without the call: nothing to give back
            pass
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.malloc_trim(0)
        except (OSError, AttributeError):  # musl has no malloc_trim
            pass


def limit_arenas(arenas: int = ARENAS) -> None:
    """Cap glibc's malloc arenas for threads started from now on (best effort; a no-op off glibc)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_ARENA_MAX, int(arenas))
    except (OSError, AttributeError):
        pass
