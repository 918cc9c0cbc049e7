"""``index/reindex``: queue paths (or everything) for the writer; with ``wait``, answer with the run's record.

Paths are checked here, before they are queued: one bad path must not fail a coalesced run that also carries other
clients' paths. Absolute paths inside the work tree are made relative; paths outside it are a USAGE_ERROR. An empty
list queues nothing; the root itself means everything. ``rebuild`` (``localidx index --rebuild`` while the daemon
runs) has the writer build the whole index again beside the current one and switch to it, as the CLI would.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from localidx.errors import UsageError


def handle(daemon, params: dict):
    """``{"queued": n, "full": bool}``, or with ``wait`` a Future of the run's ``RunStats`` record."""
    raw = params.get("paths")
    paths = None if raw is None else [_relative(daemon.root, p) for p in raw]
    if paths is not None and "" in paths:
        paths = None  # the work tree itself: a full update (which also notices deletions anywhere)
    if paths is not None and not paths:
        return {"queued": 0, "full": False}
    rebuild = bool(params.get("rebuild"))
    if rebuild:
        paths = None  # a rebuild is of everything
    future = daemon.writer.submit(paths, reason=params.get("reason", "request"), wait=bool(params.get("wait")),
                                  rebuild=rebuild)
    if future is not None:
        return future  # answered when the run ends; no request thread waits for it
    return {"queued": 0 if paths is None else len(paths), "full": paths is None}


def _relative(root: Path, raw: str) -> str:
    from localidx.discover.files import posix_separators

    text = posix_separators(raw)
    if os.path.isabs(text):
        try:
            text = Path(text).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            raise UsageError(f"{raw} is outside the repository {root}") from None
    norm = posixpath.normpath(text) if text else "."
    if norm == ".." or norm.startswith("../") or "\0" in norm:
        raise UsageError(f"{raw} is outside the repository {root}")
    return "" if norm == "." else norm
