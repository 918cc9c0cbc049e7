"""The LanceDB tables: chunk rows per work tree, and a content-addressed vector cache shared by all of them.

Table identity: ``chunks_s<SCHEMA_VERSION>_m<META_VERSION>_<model>_<worktree>`` (``_g<N>`` added for generation N of
the work tree's index, ``localidx.store.index``) — a new model, schema or [META] format is a new table, built from
scratch, never a mix of vectors or of old and new search text. The vector cache (``localidx.store.vectors``, a SQLite
file beside the database) maps an embedding key (SHA-256 of model id, key format and the embedded text) to its
vector, so identical text is embedded once across files, runs, branches and worktrees. A ``vectors_<model>`` table
left in the database by an older localidx is copied into that file once and dropped.

Only the indexer writes (``replace_files``, ``delete_paths``, ``set_vectors``, ``cache_put``). ``replace_files`` is
one LanceDB commit per batch — upsert the files' rows and delete their other rows — so a reader sees each file
entirely old or entirely new. Readers use ``snapshot()``, a table pinned to the latest committed version, which
holds a lease on that version for as long as the table object lives: compaction (``localidx.store.compact``)
deletes no version a reader holds.

Filters are built with ``sql_str`` (quotes doubled, never pasted raw): a path with a quote in it works.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
FTS_COLUMN = "bm25_text"
ANN_MIN_ROWS = 50_000  # below this, exact search is fast enough and an index costs minutes to build on 2 cores
# Rows outside the full-text index before they are folded in (or a twentieth of the table, when that is more).
# BM25 reads the rows outside the index one by one on every query: 1,218 of them took a 1,855-row table's BM25 arm
# from 4.5 to 69 ms (a loaded 2-core machine), and folding them in cost 0.11 s once; at 10k rows a fold costs about
# 1 s, at 100k several.
OPTIMIZE_MIN_ROWS = 200
_PK = {"lance-schema:unenforced-primary-key": "true"}


def sql_str(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})" if values else "false"


def glob_to_like(pattern: str) -> str:
    """A path glob (``*``, ``?``, ``**``) as a LIKE pattern with backslash escapes."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("**", "*").replace("*", "%").replace("?", "_")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:48]


def chunk_table_name(model_id: str, worktree_key: str, variant: str = "", generation: int = 0) -> str:
    """The chunk table of a work tree's generation for a model (see the module docstring); ``variant``: a suffix
    for rows whose text depends on more than the model and META_VERSION (``localidx.index.explain.table_variant``)."""
    from localidx.chunk.enrich import META_VERSION

    extra = f"_{_slug(variant)}" if variant else ""
    return (f"chunks_s{SCHEMA_VERSION}_m{META_VERSION}_{_slug(model_id)}{extra}_{_slug(worktree_key)}"
            + (f"_g{generation}" if generation else ""))


def chunk_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([
        pa.field("id", pa.string(), nullable=False, metadata=_PK),
        pa.field("path", pa.string()),
        pa.field("language", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("symbol", pa.string()),
        pa.field("name", pa.string()),
        pa.field("title", pa.string()),
        pa.field("parent", pa.string()),
        pa.field("parent_id", pa.string()),
        pa.field("level", pa.int32()),
        pa.field("start_line", pa.int32()),
        pa.field("end_line", pa.int32()),
        pa.field("chunk_index", pa.int32()),
        pa.field("overlap_lines", pa.int32()),
        pa.field("token_count", pa.int32()),
        pa.field("priority", pa.int32()),
        pa.field("signature", pa.string()),
        pa.field("doc", pa.string()),
        pa.field("text", pa.string()),
        pa.field("search_text", pa.string()),
        pa.field(FTS_COLUMN, pa.string()),
        pa.field("calls", pa.list_(pa.string())),
        pa.field("symbols", pa.list_(pa.string())),
        pa.field("tags", pa.string()),  # JSON
        pa.field("content_hash", pa.string()),
        pa.field("span_hash", pa.string()),
        pa.field("file_hash", pa.string()),
        pa.field("embed_key", pa.string()),
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=True),
    ])


def cache_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([
        pa.field("key", pa.string(), nullable=False, metadata=_PK),
        pa.field("vector", pa.list_(pa.float32(), dim)),
    ])


# The vector cache key's format: bump it when the same text should embed differently (a change to what
# ``embedding_input`` makes of a chunk's search text). Not META_VERSION: the key hashes the exact text the model
# reads, so a [META] change re-embeds the chunks whose text it changed and no others. It stays 2, the META_VERSION
# that was in the key until [META] version 3, so that caches built then are still read.
EMBED_KEY_VERSION = 2


def embed_key(model_id: str, search_text: str) -> str:
    """The vector cache's key for a chunk: the model, the key's format and the exact text the model reads."""
    import hashlib

    from localidx.embed import embedding_input

    material = f"{model_id}\0{EMBED_KEY_VERSION}\0{embedding_input(search_text)}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


class ChunkStore:
    def __init__(self, db_dir: Path, worktree_key: str, model_id: str, dim: int, read_only: bool = False,
                 variant: str = "", generation: int = 0, cache_path: Path | None = None):
        """``variant``: a suffix for the chunk table's name when the rows' text depends on more than the model and
        META_VERSION (``localidx.index.explain.table_variant``); "" for the plain table. ``generation``: the work
        tree's index generation this table belongs to. ``cache_path``: the vector cache's file (default:
        ``vectors.sqlite`` beside ``db_dir``)."""
        from localidx.store.lancedb_import import import_lancedb
        from localidx.store.vectors import FILE_NAME, VectorCache

        lancedb = import_lancedb()

        self.db_dir = db_dir
        self.dim = dim
        self.model_id = model_id
        self.generation = generation
        self.worktree_suffix = f"_{_slug(worktree_key)}"
        self.table_name = chunk_table_name(model_id, worktree_key, variant, generation)
        self.read_only = read_only
        self.cache = VectorCache(cache_path or db_dir.parent / FILE_NAME, dim, read_only=read_only)
        self._old_caches_checked = read_only
        if read_only and not db_dir.exists():
            self._db = None
            return
        db_dir.mkdir(parents=True, exist_ok=True)
        self._db = lancedb.connect(str(db_dir))

    # -- tables ----------------------------------------------------------------------------------------------

    def _names(self) -> set[str]:
        if self._db is None:
            return set()
        result = self._db.list_tables()
        names = getattr(result, "tables", result)
        return set(names)

    def exists(self) -> bool:
        return self.table_name in self._names()

    def table(self):
        """The chunk table for writing (created on first use)."""
        if self.exists():
            return self._db.open_table(self.table_name)
        return self._db.create_table(self.table_name, schema=chunk_schema(self.dim))

    def snapshot(self):
        """The chunk table pinned at its latest version, for consistent reads; None when nothing is indexed.

        The latest version is read from the table's ``_versions`` directory (one directory listing); a version this
        process already opened is answered with the same pinned table, so a warm query reads no table metadata
        (opening a table reads its manifest and schema: a third of a warm query's time at 7.5k chunks). The
        table carries its version's identity (``hot.table_key``) for the in-memory copy."""
        location = self.db_dir / f"{self.table_name}.lance"
        latest = latest_manifest(location) if self._db is not None else None
        if latest is not None:
            with _PINNED_LOCK:
                found = _PINNED.get(latest)
            if found is not None:
                return found
        if not self.exists():
            return None
        from localidx.store.compact import PIN_TRIES, hold_lease, take_lease

        for _ in range(PIN_TRIES):
            table = self._db.open_table(self.table_name)
            lease = take_lease(self.db_dir, self.table_name, table.version)
            if lease is not None:
                break
            latest = None  # the writer deleted that version meanwhile: the latest is newer
        else:
            lease = -1  # deleted under it every time (never seen): read the latest unprotected
        table.checkout(table.version)
        hold_lease(table, lease)
        if latest is None:
            latest = latest_manifest(location)
        if latest is not None and latest[1] == table.version:
            table._localidx_version_key = latest  # noqa: SLF001 - an attribute of our own on LanceDB's object
            with _PINNED_LOCK:
                # a superseded version is no longer kept here: its lease goes with the last query still on it
                for key in [k for k in _PINNED if k[0] == latest[0]]:
                    del _PINNED[key]
                _PINNED[latest] = table
                while len(_PINNED) > PINNED_KEPT:
                    _PINNED.pop(next(iter(_PINNED)))
        return table

    def _vector_cache(self):
        """The vector cache, after copying (once) any cache table an older localidx left in the database."""
        if not self._old_caches_checked:
            self._old_caches_checked = True
            self._import_old_caches()
        return self.cache

    def _import_old_caches(self) -> None:
        old = sorted(n for n in self._names() if re.match(r"^vectors_.*_d\d+$", n))
        for name in old:
            copied = 0
            try:
                data = self._db.open_table(name).to_arrow()
                for batch in data.to_batches(max_chunksize=20_000):
                    keys = batch.column("key").to_pylist()
                    flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
                    self.cache.put(keys, flat.reshape(len(keys), -1))
                    copied += len(keys)
            except Exception as exc:  # noqa: BLE001 - an unreadable old cache is only vectors to embed again
                log.warning("could not copy the old vector cache table %s (%s); dropping it", name,
                            f"{type(exc).__name__}: {exc}".splitlines()[0])
            try:
                self._db.drop_table(name)
                log.info("moved %d cached vectors from the table %s to %s", copied, name, self.cache.path.name)
            except Exception as exc:  # noqa: BLE001
                log.warning("could not drop the old vector cache table %s (%s)", name, exc)

    def drop_other_tables(self, keep: set[str] = frozenset()) -> list[str]:
        """Drop this work tree's chunk tables other than this one and ``keep``: other models, schemas, generations."""
        mine = re.compile(rf"^chunks_.*{re.escape(self.worktree_suffix)}(_g\d+)?$")
        dropped = [n for n in self._names() if mine.match(n) and n != self.table_name and n not in keep]
        for name in dropped:
            self._db.drop_table(name)
            self._drop_leases(name)
        return dropped

    def _drop_leases(self, name: str) -> None:
        import shutil

        from localidx.store.compact import lease_dir

        shutil.rmtree(lease_dir(self.db_dir, name), ignore_errors=True)

    def drop_cache(self) -> None:
        """Forget every cached vector (the cache was found damaged): the file is moved aside, a new one started."""
        self.cache.reset()

    def ids_by_path(self) -> dict[str, set[str]]:
        """Every row's id by path, read from the latest version (raises when LanceDB cannot read its files)."""
        if not self.exists():
            return {}
        data = self.table().search().select(["id", "path"]).limit(None).to_arrow()
        found: dict[str, set[str]] = {}
        for row_id, path in zip(data.column("id").to_pylist(), data.column("path").to_pylist()):
            found.setdefault(path, set()).add(row_id)
        return found

    def check_cache(self) -> None:
        """Check the vector cache's file (raises ``sqlite3.DatabaseError`` when it is damaged)."""
        self.cache.check()

    def drop(self) -> None:
        if self.exists():
            self._db.drop_table(self.table_name)
            self._drop_leases(self.table_name)

    # -- writes (the indexer only) ----------------------------------------------------------------------------

    def replace_files(self, paths: list[str], rows: list[dict]) -> None:
        """In one commit: upsert ``rows`` and delete every other row of ``paths``."""
        import pyarrow as pa

        table = self.table()
        data = pa.Table.from_pylist(rows, schema=chunk_schema(self.dim))
        (
            table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(sql_in("path", paths))
            # Rows still waiting for their vector carry null; LanceDB's check would call that a bad vector.
            .execute(data, on_bad_vectors="null")
        )

    def delete_paths(self, paths: list[str]) -> None:
        if paths and self.exists():
            for start in range(0, len(paths), 500):
                self.table().delete(sql_in("path", paths[start : start + 500]))

    def indexed_paths(self) -> set[str]:
        if not self.exists():
            return set()
        return set(self.table().to_arrow().column("path").to_pylist())

    def set_vectors(self, ids: list[str], vectors) -> None:
        if not ids:
            return
        import pyarrow as pa

        schema = pa.schema([chunk_schema(self.dim).field("id"), chunk_schema(self.dim).field("vector")])
        data = pa.Table.from_pylist([{"id": i, "vector": v.tolist()} for i, v in zip(ids, vectors)], schema=schema)
        self.table().merge_insert("id").when_matched_update_all().execute(data)

    def set_texts(self, rows: list[dict]) -> None:
        """In one commit, rewrite rows' ``search_text``, ``bm25_text`` and ``embed_key`` (by ``id``) and clear their
        vectors, which the indexer then fills again (the explain stage's edit)."""
        if not rows:
            return
        import pyarrow as pa

        full = chunk_schema(self.dim)
        names = ["id", "search_text", FTS_COLUMN, "embed_key", "vector"]
        schema = pa.schema([full.field(n) for n in names])
        data = pa.Table.from_pylist([{**{n: r[n] for n in names[:-1]}, "vector": None} for r in rows], schema=schema)
        self.table().merge_insert("id").when_matched_update_all().execute(data, on_bad_vectors="null")

    def cache_get(self, keys: list[str]):
        """The cached vector (a float32 array) of each key that has one."""
        return self._vector_cache().get(keys)

    def cache_put(self, keys: list[str], vectors) -> None:
        self._vector_cache().put(keys, vectors)

    def cache_count(self) -> int:
        return self._vector_cache().count()

    def pending_vectors(self) -> list[tuple[str, int, str]]:
        """(id, priority, embed_key) of rows still without a vector, highest priority first."""
        if not self.exists():
            return []
        rows = (self.table().search().where("vector IS NULL").select(["id", "priority", "embed_key"])
                .limit(None).to_arrow().to_pylist())
        rows.sort(key=lambda r: (-r["priority"], r["id"]))
        return [(r["id"], r["priority"], r["embed_key"]) for r in rows]

    def rows_by_id(self, ids: list[str], columns: list[str], table=None) -> list[dict]:
        """The rows with these ids (any order), from ``table`` (a pinned snapshot) or the latest version."""
        out = []
        table = table if table is not None else self.table()
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            out.extend(table.search().where(sql_in("id", part)).select(columns).limit(len(part)).to_arrow().to_pylist())
        return out

    def ensure_indexes(self) -> None:
        """Full-text index on ``bm25_text`` (rebuilt to include new rows); an ANN index once the table is large."""
        if not self.exists():
            return
        from lancedb.index import FTS

        table = self.table()
        indices = {tuple(i.columns): i for i in table.list_indices()}
        if (FTS_COLUMN,) not in indices:
            table.create_index(FTS_COLUMN, config=FTS(with_position=False), replace=True)
        else:
            # Rows added since the index was built are searched flat, so folding them in only restores speed; it
            # costs seconds at 100k rows, so it waits until enough rows are outside the index.
            unindexed = table.index_stats(indices[(FTS_COLUMN,)].name).num_unindexed_rows
            if unindexed > max(OPTIMIZE_MIN_ROWS, table.count_rows() // 20):
                table.optimize()
        rows = table.count_rows()
        if rows >= ANN_MIN_ROWS and ("vector",) not in indices:
            with_vectors = table.count_rows("vector IS NOT NULL")
            if with_vectors >= ANN_MIN_ROWS:
                log.info("building the ANN index over %d vectors", with_vectors)
                table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")

    def version(self) -> int:
        return self.table().version if self.exists() else 0

    def compact(self, catalog=None, idle: bool = False) -> dict:
        """Rewrite the fragments when they hold many deleted rows (always, without ``catalog``, where the last
        rewrite is recorded), then delete the versions no reader is on (``localidx.store.compact``; only the single
        writer calls this). Returns what was done."""
        from localidx.store.compact import maintain

        return maintain(self, catalog, idle=idle)

    def purge(self) -> None:
        """Fold the table into its latest version and delete every older version's files at once: no data file is
        left holding a row that was replaced or deleted (``localidx index --rebuild``; a reader still on an older
        version would fail, so only a writer no reader shares the index with calls this)."""
        import warnings
        from datetime import timedelta

        if self.exists():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # LanceDB warns that older versions go: that is the point
                self.table().optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


PINNED_KEPT = 8  # pinned table versions a process keeps open (the latest of a few work trees' tables)
_PINNED: dict[tuple, object] = {}
_PINNED_LOCK = threading.Lock()


def release_pinned() -> None:
    """Forget the pinned tables ``snapshot`` keeps (a daemon going idle frees their caches)."""
    with _PINNED_LOCK:
        _PINNED.clear()


def latest_manifest(location: Path) -> tuple | None:
    """``(location, version, manifest inode, manifest mtime)`` of the latest committed version of the Lance dataset
    at ``location``, from its ``_versions`` directory; None when it cannot be read (then the caller asks LanceDB).
    The inode and mtime tell a table dropped and made again apart from the one before at the same version."""
    try:
        names = os.listdir(location / "_versions")
    except OSError:
        return None
    best, best_name = -1, None
    for name in names:
        stem, dot, suffix = name.partition(".")
        if suffix != "manifest" or not stem.isdigit():
            continue
        number = int(stem)
        version = (1 << 64) - 1 - number if number >= 1 << 63 else number  # newer Lance names count down
        if version > best:
            best, best_name = version, name
    if best_name is None:
        return None
    try:
        st = os.stat(location / "_versions" / best_name)
    except OSError:
        return None
    return (str(location), best, st.st_ino, st.st_mtime_ns)


def decode_tags(raw: str) -> dict:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}
