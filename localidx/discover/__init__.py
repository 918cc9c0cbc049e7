"""Finding the files of a repository worth indexing; see ``localidx.discover.files``.

Names are imported when first used (``__getattr__``): ``find_root`` lives in the light ``localidx.discover.root``,
and a command that only needs it (a search through a running daemon) does not load discovery's filters.

Layer: above the shared services (``gitrepo``, ``paths``, ``config``), ``safety`` and the bottom; below ``chunk`` and
every step after it. One late import runs up, named in docs/architecture.md: outside git, ``root`` asks
``localidx.index.registry`` for the nearest indexed directory (a command run in a subdirectory reads its index).
"""

from __future__ import annotations

from importlib import import_module

_WHERE = {
    "find_root": "localidx.discover.root",
    "SKIP_REASONS": "localidx.discover.files",
    "Discovery": "localidx.discover.files",
    "Skipped": "localidx.discover.files",
    "SourceFile": "localidx.discover.files",
    "SourceText": "localidx.discover.files",
    "check_content": "localidx.discover.files",
    "decode_source": "localidx.discover.files",
    "discover": "localidx.discover.files",
    "read_source": "localidx.discover.files",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
