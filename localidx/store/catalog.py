"""The per-file catalog: what is indexed, at which content, and the runs that did it.

One SQLite file per work tree. A file is recorded only after its rows are in the chunk table, so a run killed at any
moment leaves the catalog describing rows that exist; the next run redoes whatever the catalog does not vouch for.
``dirty`` marks a write run in progress: if it is still set when a run starts, the previous one died, and the
indexer first removes rows of paths the catalog does not know (the only orphans a crash can leave).

The catalog is bound to one chunk table (``table``): when the model or the schema changes, the table name changes and
the catalog is emptied, so nothing indexed for another table is trusted.

``problems`` lists the files whose indexing failed at some stage (read, chunk, enrich, relations, embed, write) with
the reason: a failure costs that file only, and ``status`` lists them. A file's problems are replaced whenever it is
indexed again. A catalog SQLite cannot open (not a database, a torn file) raises ``IndexDamaged``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from localidx.errors import IndexDamaged

CATALOG_VERSION = 2  # PRAGMA user_version; a catalog of another version is emptied, and so rebuilt
_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    file_hash TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    language TEXT NOT NULL,
    chunk_ids TEXT NOT NULL,
    indexed_at REAL NOT NULL,
    skipped TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    path TEXT NOT NULL, stage TEXT NOT NULL, reason TEXT NOT NULL, key TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (path, stage, key)
);
"""


@dataclass
class FileRecord:
    path: str
    file_hash: str
    mtime_ns: int
    size: int
    language: str
    chunk_ids: list[str]
    indexed_at: float
    skipped: str = ""  # a content skip reason (binary, minified, ...): known, unchanged, and without rows


class Catalog:
    def __init__(self, path: Path, create: bool = True):
        """Open the catalog at ``path``. With ``create=False`` it is opened read-only and nothing is ever written:
        a missing catalog, or one of another version, reads as empty."""
        self.path = path
        if not create:
            self._db = self._open_read_only(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if self._db.execute("PRAGMA user_version").fetchone()[0] != CATALOG_VERSION:
                self._db.executescript("DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS meta;")
                self._db.execute(f"PRAGMA user_version = {CATALOG_VERSION}")
            self._db.executescript(_SCHEMA)
            self._db.execute("SELECT COUNT(*) FROM files").fetchone()
        except sqlite3.DatabaseError as exc:
            raise _full_or_damaged(exc, path, "") from None

    @staticmethod
    def _open_read_only(path: Path) -> sqlite3.Connection:
        if path.exists():
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None)
            try:
                if db.execute("PRAGMA user_version").fetchone()[0] == CATALOG_VERSION:
                    db.execute("SELECT COUNT(*) FROM files").fetchone()
                    return db
            except sqlite3.DatabaseError as exc:
                db.close()
                raise _full_or_damaged(exc, path, "; run `localidx index` to repair it") from None
            db.close()
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.executescript(_SCHEMA)
        return db

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def transaction(self):
        """One write transaction: committed when the block ends, rolled back when it raises."""
        self._db.execute("BEGIN")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection, for tables kept beside the catalog (``localidx.store.relations``)."""
        return self._db

    # -- identity and run state -------------------------------------------------------------------------------

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def bind(self, table: str, force: bool = False) -> bool:
        """Tie the catalog to a chunk table; returns True when it was bound to another one and has been emptied.
        ``force`` empties it anyway (a rebuild)."""
        current = self.get_meta("table")
        if current == table and not force:
            return False
        with self.transaction():
            self._db.execute("DELETE FROM files")
            self._db.execute("DELETE FROM problems")
            self._db.execute("DELETE FROM meta WHERE key NOT IN ('last_run')")
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('table', ?)", (table,))
        return current is not None

    @property
    def dirty(self) -> bool:
        return self.get_meta("dirty") == "1"

    def set_dirty(self, value: bool) -> None:
        self.set_meta("dirty", "1" if value else "0")

    def last_run(self) -> dict | None:
        raw = self.get_meta("last_run")
        return json.loads(raw) if raw else None

    def set_last_run(self, record: dict) -> None:
        self.set_meta("last_run", json.dumps(record))

    # -- files -----------------------------------------------------------------------------------------------

    _COLUMNS = "path, file_hash, mtime_ns, size, language, chunk_ids, indexed_at, skipped"

    @staticmethod
    def _record(r) -> FileRecord:
        return FileRecord(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7])

    def files(self) -> dict[str, FileRecord]:
        rows = self._db.execute(f"SELECT {self._COLUMNS} FROM files")
        return {r[0]: self._record(r) for r in rows}

    def paths(self) -> list[str]:
        """The paths of the files with rows."""
        return [p for (p,) in self._db.execute("SELECT path FROM files WHERE skipped = ''")]

    def get(self, path: str) -> FileRecord | None:
        r = self._db.execute(f"SELECT {self._COLUMNS} FROM files WHERE path = ?", (path,)).fetchone()
        return self._record(r) if r else None

    def put(self, records: list[FileRecord]) -> None:
        now = time.time()
        with self.transaction():
            self._db.executemany(
                f"INSERT OR REPLACE INTO files ({self._COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.path, r.file_hash, r.mtime_ns, r.size, r.language, json.dumps(r.chunk_ids), r.indexed_at or now,
                  r.skipped) for r in records],
            )

    def touch(self, path: str, mtime_ns: int, size: int) -> None:
        """Record a new stat for a file whose content did not change (so the next run need not hash it again)."""
        self._db.execute("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?", (mtime_ns, size, path))

    def remove(self, paths: list[str]) -> None:
        with self.transaction():
            self._db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])
            self._db.executemany("DELETE FROM problems WHERE path = ?", [(p,) for p in paths])

    # -- problems -------------------------------------------------------------------------------------------------

    def set_problems(self, paths: list[str], problems: list[tuple[str, str, str, str]]) -> None:
        """Replace the problems of ``paths`` with ``problems`` ((path, stage, reason, key) each) in one commit (the
        reasons redacted: an error message may quote the text it failed on)."""
        problems = _redacted(problems)
        with self.transaction():
            self._db.executemany("DELETE FROM problems WHERE path = ?", [(p,) for p in paths])
            self._db.executemany("INSERT OR REPLACE INTO problems (path, stage, reason, key) VALUES (?, ?, ?, ?)",
                                 problems)

    def add_problems(self, problems: list[tuple[str, str, str, str]]) -> None:
        problems = _redacted(problems)
        self._db.executemany("INSERT OR REPLACE INTO problems (path, stage, reason, key) VALUES (?, ?, ?, ?)",
                             problems)

    def problems(self) -> list[dict]:
        """Every recorded failure: ``{"path", "stage", "reason"}``, by path."""
        try:
            rows = self._db.execute("SELECT path, stage, reason FROM problems ORDER BY path, stage").fetchall()
        except sqlite3.OperationalError:  # a read-only catalog from before the table existed
            return []
        return [{"path": p, "stage": s, "reason": r} for p, s, r in rows]

    def failed_keys(self, stage: str) -> set[str]:
        """The keys recorded as failing at ``stage`` (embedding keys the model could not embed)."""
        try:
            return {k for (k,) in self._db.execute("SELECT key FROM problems WHERE stage = ?", (stage,))}
        except sqlite3.OperationalError:
            return set()

    def count(self) -> int:
        """Files with rows (content-skipped files are known but not counted)."""
        return self._db.execute("SELECT COUNT(*) FROM files WHERE skipped = ''").fetchone()[0]


def _full_or_damaged(exc: sqlite3.DatabaseError, path: Path, remedy: str) -> Exception:
    """A full disk (``errors.disk_full``: nothing is damaged, nothing is to be repaired), else ``IndexDamaged``."""
    from localidx.errors import disk_full

    return disk_full(exc, path.parent) or IndexDamaged(f"the catalog {path} is damaged ({exc}){remedy}")


def lists_files(path: Path) -> bool:
    """Whether the catalog at ``path`` exists and lists a file: the work tree has an index (read only; nothing is
    created)."""
    if not path.exists():
        return False
    catalog = Catalog(path, create=False)
    try:
        return catalog.count() > 0
    finally:
        catalog.close()


def _redacted(problems: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    from localidx.safety.redact import redact

    return [(path, stage, redact(reason)[0], key) for path, stage, reason, key in problems]
