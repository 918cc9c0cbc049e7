"""Where the repository is: the work-tree root a path belongs to, and what a path names (a file, a directory...).

Light to import (``gitrepo``'s file reads, no pygit2 until a case needs it, nothing of discovery's filters): every
command asks it first, a search through a running daemon included, which needs nothing else of discovery.
"""

from __future__ import annotations

import stat
from pathlib import Path

from localidx import gitrepo
from localidx.errors import LocalidxError, UsageError


def find_root(start: Path) -> tuple[Path, bool]:
    """(work-tree root, True) when ``start`` is inside a git work tree, else (the nearest indexed directory at or
    above ``start``, or ``start`` resolved, False).

    A file's directory stands in for the file outside git. Raises UsageError when ``start`` does not exist or is
    inside a bare repository.
    """
    start = Path(start)
    if not start.exists():
        raise UsageError(f"no such file or directory: {start}")
    found = gitrepo.find_work_tree(start)  # the plain case without importing pygit2
    if found is not None:
        return found[0], True
    repo = gitrepo.open_repo(start)
    if repo is not None:
        return gitrepo.work_root(repo), True
    bare = gitrepo.bare_repository(start)
    if bare is not None:
        # Its files are git's own (objects, packs, hook samples), not a project's: nothing to index.
        raise UsageError(f"{bare} is a bare git repository, which has no work tree to index: run localidx in a "
                         "clone or a worktree of it")
    resolved = start.resolve()
    directory = resolved if resolved.is_dir() else resolved.parent
    return _indexed_ancestor(directory) or directory, False


def _indexed_ancestor(directory: Path) -> Path | None:
    """The nearest of ``directory`` and its parents that is the root of a registered index, or None. Outside git
    this is what a work-tree root is inside it: a command run in a subdirectory of an indexed directory reads that
    directory's index."""
    from localidx.index import registry

    try:
        roots = {Path(entry.root) for entry in registry.entries(prune=False)}
    except (LocalidxError, OSError):
        return None  # an unreadable registry: the directory itself, as before there was one
    for candidate in (directory, *directory.parents):
        if candidate in roots:
            return candidate
    return None


def file_kind(mode: int) -> str:
    """What a ``stat`` mode names, in words: "a file", "a directory", "a FIFO", "a socket", "a device"."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"
