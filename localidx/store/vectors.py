"""The content-addressed vector cache: embedding key -> vector, shared by every work tree of a state dir.

Place in the flow: the indexer asks it for the vectors of a batch's embedding keys before embedding
(``localidx.store.lance.ChunkStore.cache_get``) and puts what the model produced (``cache_put``), so identical text is
embedded once across files, runs, branches, models' tables and work trees. The key (``lance.embed_key``) is a SHA-256
of the model id, the key's format version and the exact text the model reads, so one table holds every model's
vectors without mixing them.

A SQLite file (``<state>/vectors.sqlite``) in WAL mode: ``vectors(id, key, vec)``, ``vec`` the float32 bytes, ``id`` a
64-bit hash of the key with an index on it. A lookup is a probe of that small index per key (entries of a dozen bytes
instead of the 64-character key, so more of it stays in memory: in interleaved runs 500-key lookups took 11 ms
against 28 ms with ``key TEXT PRIMARY KEY`` at 300k vectors, 20 against 27 ms at 60k), then the row, whose key is
compared; a write is one transaction that adds the keys not present yet, appended at the end of the table.
Several processes (work trees sharing the state dir, the daemon, a hook) read and write it at once; a writer waits
up to ``BUSY_TIMEOUT_S`` for another's transaction.

The cache is only ever a shortcut: a damaged file (not a database, truncated, malformed pages) is moved aside to
``vectors.sqlite.damaged`` and started afresh, with one log line, and a lookup that fails answers "not cached", so
damage costs re-embedding and never stops an index run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FILE_NAME = "vectors.sqlite"
BUSY_TIMEOUT_S = 30.0
MAX_PARAMS = 500  # keys per ``IN (...)`` lookup
_HEADER = b"SQLite format 3\x00"


class VectorCache:
    """One connection to the cache file, opened on first use; safe to share between threads of one process."""

    def __init__(self, path: Path, dim: int, read_only: bool = False):
        self.path = Path(path)
        self.dim = dim
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # -- opening, damage ---------------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection | None:
        """The connection (opening, and when damaged recreating, the file); None for a reader with no file."""
        if self._conn is not None:
            return self._conn
        if self.read_only and not self.path.exists():
            return None
        problem = damage(self.path)
        if problem and not self.read_only:
            self._move_aside(problem)
        elif problem:
            return None
        try:
            self._conn = self._connect()
        except sqlite3.DatabaseError as exc:
            if self.read_only or not _is_damage(exc):
                raise
            self._move_aside(str(exc))
            self._conn = self._connect()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.read_only:
            conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if not self.read_only:
                # Set before the file's first table (ignored after): five 1.6 kB rows to a page instead of two to 4 kB.
                conn.execute("PRAGMA page_size = 8192")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a crash may lose the last writes, never corrupt
                conn.execute("CREATE TABLE IF NOT EXISTS vectors (id INTEGER NOT NULL, key TEXT NOT NULL, "
                             "vec BLOB NOT NULL)")
            if "id" not in {row[1] for row in conn.execute("PRAGMA table_info(vectors)")}:
                raise sqlite3.DatabaseError("malformed: a table layout this version does not read")
            if not self.read_only:
                conn.execute("CREATE INDEX IF NOT EXISTS vectors_id ON vectors (id)")
            conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchall()
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self, reason: str) -> None:
        """Put a damaged file out of the way (replacing an older damaged copy) so a fresh cache starts."""
        self.close()
        target = self.path.with_name(self.path.name + ".damaged")
        log.warning("the vector cache %s is damaged (%s); moved it to %s and started a new one (vectors missing "
                    "from the chunk tables will be embedded again)", self.path, reason, target.name)
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            pass
        for suffix in ("-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass

    def check(self) -> None:
        """Raise ``sqlite3.DatabaseError`` when the file is damaged (reads its header and schema, not every page)."""
        problem = damage(self.path)
        if problem:
            raise sqlite3.DatabaseError(problem)
        if self.path.exists():
            with self._lock:
                conn = self._open()
                if conn is not None:
                    conn.execute("SELECT key FROM vectors LIMIT 1").fetchall()

    def reset(self) -> None:
        """Start an empty cache (the file was found damaged)."""
        with self._lock:
            if self.path.exists():
                self._move_aside(damage(self.path) or "reported damaged")
            self._open()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # -- lookups and writes ------------------------------------------------------------------------------------

    def get(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The cached vector of each key that has one; {} when the cache cannot be read (the texts are embedded)."""
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._get(unique)
                except sqlite3.DatabaseError as exc:
                    if attempt == 1 and _is_damage(exc) and not self.read_only:
                        self._move_aside(str(exc))
                        continue
                    log.warning("the vector cache %s cannot be read (%s); embedding instead", self.path, exc)
                    return {}
        return {}

    def _get(self, unique: list[str]) -> dict[str, np.ndarray]:
        conn = self._open()
        if conn is None:
            return {}
        size = self.dim * 4
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(unique), MAX_PARAMS):
            part = unique[start : start + MAX_PARAMS]
            wanted = set(part)
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(f"SELECT key, vec FROM vectors WHERE id IN ({marks})", [_id(k) for k in part]):
                if key in wanted and len(blob) == size:  # another length is another model's dimension under a colliding key: never
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, keys: list[str], vectors) -> None:
        """Add vectors (one transaction; keys already present keep their vector). A failure is logged, not raised."""
        if not keys or self.read_only:
            return
        data = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(len(keys), -1))
        rows = [(_id(k), k, data[i].tobytes()) for i, k in enumerate(keys)]  # a repeated key: the first is kept
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._put(rows)
                    return
                except sqlite3.DatabaseError as exc:
                    if attempt == 1 and _is_damage(exc):
                        self._move_aside(str(exc))
                        continue
                    log.warning("could not add %d vectors to the cache %s (%s)", len(rows), self.path, exc)
                    return

    def _put(self, rows: list[tuple[int, str, bytes]]) -> None:
        conn = self._open()
        conn.execute("BEGIN IMMEDIATE")
        try:
            # The write lock is held (BEGIN IMMEDIATE), so no other writer adds the same key in between.
            conn.executemany("INSERT INTO vectors (id, key, vec) SELECT ?1, ?2, ?3 WHERE NOT EXISTS "
                             "(SELECT 1 FROM vectors WHERE id = ?1 AND key = ?2)", rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def count(self) -> int:
        with self._lock:
            conn = self._open()
            return conn.execute("SELECT count(*) FROM vectors").fetchone()[0] if conn is not None else 0


def damage(path: Path) -> str | None:
    """Why the file at ``path`` is not a usable SQLite database (from its 100-byte header), or None (also when absent
    or empty, which SQLite starts afresh)."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if not header:
        return None
    if len(header) < 100 or not header.startswith(_HEADER):
        return "not a SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count in the header is valid when its "version valid for" matches the change counter.
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        return f"truncated: {size} bytes where its header counts {pages * page_size}"
    return None


def _id(key: str) -> int:
    """The key's 64-bit hash (signed, as SQLite stores integers): the indexed column."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big",
                          signed=True)


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A failure of the file itself (as opposed to a busy database or a full disk, which pass)."""
    text = str(exc).lower()
    return any(s in text for s in ("not a database", "malformed", "corrupt", "no such table: vectors",
                                   "file is encrypted", "disk image"))
