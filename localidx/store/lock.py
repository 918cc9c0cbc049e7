"""One writer per index, across processes: an exclusive ``flock`` on the work tree's ``write.lock``.

Two processes upserting into one LanceDB table were measured creating duplicate rows, so every write goes through
this lock. The holder's pid is written into the file so that a second writer can say who holds it. The kernel
releases the lock when its holder dies, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from localidx.errors import LocalidxError


class IndexBusy(LocalidxError):
    """Another process is writing this index (``holder``: its pid, 0 when it cannot be read)."""

    exit_code = 75  # EX_TEMPFAIL: try again later

    def __init__(self, message: str, holder: int = 0):
        super().__init__(message)
        self.holder = holder


class WriteLock:
    def __init__(self, path: Path, wait_s: float = 0.0):
        self.path = path
        self.wait_s = wait_s
        self._fd: int | None = None

    def __enter__(self) -> "WriteLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    os.close(fd)
                    raise IndexBusy(f"another indexer is running (pid {holder}); wait for it, or pass --wait",
                                    int(holder) if holder.isdigit() else 0) from None
                time.sleep(0.1)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as exc:  # a full disk: the lock is not taken, and the error names the index's directory
            from localidx.errors import disk_full

            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise (disk_full(exc, self.path.parent) or exc) from None
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
