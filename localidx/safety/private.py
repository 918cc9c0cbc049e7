"""Private files: what localidx writes about a user's code is readable by that user alone.

Place in the flow: the bottom layer, beside errors.py and text.py; the store, the registry, the trust records, the
daemon's files and the logs make their directories and files through here.

Invariants:
- A directory localidx makes for itself (an index's state dir, the per-user data and config dirs, the socket dir) is
  0700 and a file in it 0600, whatever the umask: ``private_umask`` is in force wherever localidx writes, and
  ``private_dir`` sets the mode of what it makes explicitly.
- An index made by an older localidx (0755 directories, 0644 files) is tightened by the next writer
  (``tighten_tree``), once: a marker file records that it was done.
- Only localidx's own directories are changed: never a directory above them (``.git``, the home directory).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
PRIVATE_UMASK = 0o077
TIGHTENED_MARKER = ".private"  # in a state dir: ``tighten_tree`` has run over it


def restrict_umask() -> int:
    """Add group and other bits to the process's umask for good (files 0600, directories 0700); the old umask.

    The command line calls this first: each localidx process writes only localidx's own files."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    return old


@contextlib.contextmanager
def private_umask():
    """The umask with group and other bits for as long as the block lasts (for library callers that write an
    index outside the command line)."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def private_dir(path: Path, parents: bool = True, tighten: bool = True) -> Path:
    """Make ``path`` (and missing parents, each 0700) and make it 0700; returns it. A directory that is there already
    is tightened when it is ours (and ``tighten``: not for a directory the user named, which may be shared); one
    owned by someone else is left as it is (root reading a user's index)."""
    path = Path(path)
    missing = []
    probe = path
    while parents and not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing or [path]):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass
    if tighten or path in missing:
        _tighten(path, DIR_MODE)
    return path


def _tighten(path: Path, mode: int) -> None:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        return
    if stat.S_IMODE(st.st_mode) & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077 | (mode & 0o700))


def private_file(path: Path) -> None:
    """Make an existing file of ours 0600 (no group or other bits)."""
    _tighten(Path(path), FILE_MODE)


def write_private(path: Path, data: bytes, tighten_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (a temp file in the same directory, then a rename), mode 0600; its
    directory is made 0700 (an existing one tightened unless ``tighten_dir`` is false)."""
    path = Path(path)
    private_dir(path.parent, tighten=tighten_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def tighten_tree(root: Path) -> None:
    """Remove group and other bits from every directory and file of ours under ``root`` (symlinks are not
    followed), once: later calls find the marker and return at once."""
    root = Path(root)
    marker = root / TIGHTENED_MARKER
    if marker.exists() or not root.is_dir():
        return
    _tighten(root, DIR_MODE)
    for base, dirs, files in os.walk(root, followlinks=False):
        for name in dirs:
            _tighten(Path(base, name), DIR_MODE)
        for name in files:
            _tighten(Path(base, name), FILE_MODE)
    with contextlib.suppress(OSError):
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
        os.close(fd)
