"""The shared database an organisation's index lives in: its tables, their schemas, and the job's single commits.

Place in the flow: store, for ``localidx cluster index`` (the writer) and the laptops that read it
(``localidx.retrieve.shared_index``). ``URI`` is anything LanceDB connects to: a local or shared-filesystem path,
``s3://``,
``gs://``, ``az://``. Credentials come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``, read by Lance's
object store itself) and are never passed, stored or printed by localidx; ``label`` is the URI without user info or
query string, and is all that logs, errors and ``status`` ever show.

Tables, named like the local ones (a new model, schema or [META] format is a new set of tables, built from scratch)::

    org_chunks_<suffix>   the chunk rows of every repository: the local chunk schema plus ``repo``
    org_files_<suffix>    one row per (repo, path): the git blob id indexed, the chunk ids, a skip reason
    org_repos_<suffix>    one row per repository: URL (redacted), identity, ref, commit, counts, last outcome
    vectors_<model>_d<dim>  the content-addressed vector cache (the local cache's schema): text embedded once for
                          any repository is never embedded again

Invariants:
- Only a cluster job writes, one at a time per URI; its changes reach each table in **one commit**
  (``replace_rows``: the rows of the changed and deleted files are deleted and the new fragments added in one Lance
  ``Update``), in the order cache -> chunks -> files -> repos. A reader sees every file of the chunk table entirely
  old or entirely new. A job killed before a commit leaves that table as it was; one killed between commits leaves
  files whose chunk rows are newer than their ``org_files`` record, which the next job sees as changed and replaces
  (their vectors come from the cache), so it converges without duplicates.
- Fragments are written by Ray tasks and become visible only through the driver's commit: a task that dies after
  writing leaves unreferenced files (removed by ``optimize``'s cleanup), never rows.
- Chunk ids are a chunk's own (the same as a local index of the same commit); they are unique within a repository,
  not across repositories, so ``(repo, id)`` is the key.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa

from localidx.cluster.manifest import redact_url

log = logging.getLogger(__name__)

ORG_SCHEMA_VERSION = 1
CLEANUP_AFTER = timedelta(hours=1)  # old versions kept this long after a job: readers pin one per query
ANN_MIN_ROWS = 50_000  # as the local index: below this, exact search is fast enough
ANN_SUB_VECTOR_DIMS = 8  # IVF_PQ: one sub-vector per 8 dimensions (48 for the default 384-d model)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:48]


@dataclass(frozen=True)
class Names:
    chunks: str
    files: str
    repos: str
    cache: str


def table_names(model_id: str, dim: int) -> Names:
    from localidx.chunk.enrich import META_VERSION
    from localidx.store.lance import SCHEMA_VERSION

    suffix = f"o{ORG_SCHEMA_VERSION}_s{SCHEMA_VERSION}_m{META_VERSION}_{_slug(model_id)}"
    return Names(chunks=f"org_chunks_{suffix}", files=f"org_files_{suffix}", repos=f"org_repos_{suffix}",
                 cache=f"vectors_{_slug(model_id)}_d{dim}")


def chunk_schema(dim: int) -> pa.Schema:
    """The local chunk schema (``localidx.store.lance.chunk_schema``) with ``repo`` first; ``id`` is not a key here."""
    from localidx.store.lance import chunk_schema as local_schema

    fields = [pa.field("repo", pa.string(), nullable=False)]
    for f in local_schema(dim):
        fields.append(pa.field(f.name, f.type, nullable=f.nullable) if f.name == "id" else f)
    return pa.schema(fields)


def cache_schema(dim: int) -> pa.Schema:
    from localidx.store.lance import cache_schema as local_cache

    return local_cache(dim)


FILES_SCHEMA = pa.schema([
    pa.field("repo", pa.string(), nullable=False),
    pa.field("path", pa.string(), nullable=False),
    pa.field("file_hash", pa.string()),
    pa.field("language", pa.string()),
    pa.field("chunk_ids", pa.list_(pa.string())),
    pa.field("skipped", pa.string()),
    pa.field("problems", pa.string()),  # JSON: [{"stage", "reason"}]
])

REPOS_SCHEMA = pa.schema([
    pa.field("repo", pa.string(), nullable=False),
    pa.field("url", pa.string()),  # redacted
    pa.field("identity", pa.string()),
    pa.field("ref", pa.string()),
    pa.field("commit", pa.string()),
    pa.field("indexed_at", pa.float64()),
    pa.field("files", pa.int64()),
    pa.field("chunks", pa.int64()),
    pa.field("status", pa.string()),  # "ok", or "failed: <one line>" (the rows of its last good commit stay)
    pa.field("checked_at", pa.float64()),
])


class SharedDB:
    """A connection to the shared database at ``uri`` for one model (``create`` makes a missing local directory)."""

    def __init__(self, uri: str, model_id: str, dim: int, create: bool = False):
        import lancedb

        self.uri = uri
        self.label = redact_url(uri)
        self.dim = dim
        self.names = table_names(model_id, dim)
        if create and "://" not in uri:
            from pathlib import Path

            Path(uri).mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(uri)

    def table_list(self) -> set[str]:
        result = self.db.list_tables()
        return set(getattr(result, "tables", result))

    def open(self, name: str, version: int | None = None):
        """The table ``name`` (pinned at ``version`` when given), or None when it does not exist."""
        if name not in self.table_list():
            return None
        table = self.db.open_table(name)
        if version:
            table.checkout(version)
        return table

    def ensure_tables(self) -> dict[str, object]:
        """Every table of the layout, created empty where missing (the writer only)."""
        schemas = {self.names.chunks: chunk_schema(self.dim), self.names.files: FILES_SCHEMA,
                   self.names.repos: REPOS_SCHEMA, self.names.cache: cache_schema(self.dim)}
        existing = self.table_list()
        out = {}
        for name, schema in schemas.items():
            out[name] = self.db.open_table(name) if name in existing else self.db.create_table(name, schema=schema)
        return out

    def dataset_uri(self, name: str) -> str:
        return self.db.open_table(name).to_lance().uri

    def repos(self) -> list[dict]:
        table = self.open(self.names.repos)
        return [] if table is None else sorted(table.to_arrow().to_pylist(), key=lambda r: r["repo"])


def known_files(db: SharedDB, repo: str, version: int) -> dict[str, dict]:
    """``path -> {file_hash, skipped, ...}`` of one repository as the files table held it at ``version``."""
    from localidx.store.lance import sql_str

    table = db.open(db.names.files, version)
    if table is None or not version:
        return {}
    rows = (table.search().where(f"repo = {sql_str(repo)}").select(["path", "file_hash", "skipped", "chunk_ids"])
            .limit(None).to_arrow().to_pylist())
    return {r["path"]: r for r in rows}


def cached_vectors(cache_table, keys: list[str]) -> dict[str, list[float]]:
    """The cached vector of each key that has one (the cache may hold a key twice: any copy is the same text's)."""
    from localidx.store.lance import sql_in

    found: dict[str, list[float]] = {}
    if cache_table is None:
        return found
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), 500):
        part = unique[start : start + 500]
        data = cache_table.search().where(sql_in("key", part)).select(["key", "vector"]).limit(4 * len(part))
        for row in data.to_arrow().to_pylist():
            found.setdefault(row["key"], row["vector"])
    return found


def replace_rows(dataset_uri: str, predicate: str | None, new_fragments: list, read_version: int | None = None) -> int:
    """In one commit: delete the rows matching ``predicate`` and add ``new_fragments``; returns the rows deleted.

    Each fragment holding matching rows gets a deletion file (``LanceFragment.delete``: written, not committed), and a
    single ``LanceOperation.Update`` commits those and the new fragments together. Nothing to do: no commit."""
    import lance
    from lance import LanceOperation

    dataset = lance.dataset(dataset_uri, version=read_version) if read_version else lance.dataset(dataset_uri)
    removed: list[int] = []
    updated: list = []
    deleted = 0
    if predicate:
        for fragment in dataset.get_fragments():
            hits = fragment.count_rows(predicate)
            if not hits:
                continue
            deleted += hits
            after = fragment.delete(predicate)
            if after is None:
                removed.append(fragment.fragment_id)
            else:
                updated.append(after)
    if not (removed or updated or new_fragments):
        return 0
    operation = LanceOperation.Update(removed_fragment_ids=removed, updated_fragments=updated,
                                      new_fragments=list(new_fragments))
    lance.LanceDataset.commit(dataset_uri, operation, read_version=dataset.version)
    return deleted


def write_rows(dataset_uri: str, rows: list[dict], schema: pa.Schema) -> list:
    """Fragments holding ``rows`` (written, not committed), for ``replace_rows``: the driver's small tables."""
    from lance.fragment import write_fragments

    if not rows:
        return []
    return write_fragments(pa.Table.from_pylist(rows, schema=schema), dataset_uri, schema=schema)


def build_indexes(db: SharedDB) -> list[str]:
    """After a job's commits: the full-text index over ``bm25_text``, scalar indexes on what readers filter by
    (``repo``, ``id``, ``path``; the cache's ``key``), IVF_PQ over the vectors once the table is large (new rows are
    folded into existing indexes by ``optimize``), then compaction and cleanup of old versions. Returns one line
    per index built."""
    from lancedb.index import FTS, Bitmap, BTree

    from localidx.store.lance import FTS_COLUMN

    built: list[str] = []
    chunks = db.open(db.names.chunks)
    have = {tuple(i.columns): i for i in chunks.list_indices()}
    rows = chunks.count_rows()
    if rows and (FTS_COLUMN,) not in have:
        chunks.create_index(FTS_COLUMN, config=FTS(with_position=False), replace=True)
        built.append(f"full-text index over {rows} rows")
    for column, config in (("repo", Bitmap()), ("id", BTree()), ("path", BTree())):
        if rows and (column,) not in have:
            chunks.create_index(column, config=config)
            built.append(f"{type(config).__name__} index on {column}")
    if rows >= ANN_MIN_ROWS and ("vector",) not in have:
        partitions = max(1, int(rows ** 0.5))
        chunks.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_PQ",
                            num_partitions=partitions, num_sub_vectors=max(1, db.dim // ANN_SUB_VECTOR_DIMS))
        built.append(f"IVF_PQ index over {rows} vectors ({partitions} partitions)")
    files = db.open(db.names.files)
    if files.count_rows() and ("repo",) not in {tuple(i.columns) for i in files.list_indices()}:
        files.create_index("repo", config=Bitmap())  # each job's prepare tasks read their repository's records
        built.append("Bitmap index on the files' repo")
    cache = db.open(db.names.cache)
    if cache.count_rows() and ("key",) not in {tuple(i.columns) for i in cache.list_indices()}:
        cache.create_index("key", config=BTree())
        built.append("BTree index on the cache's key")
    for name in (db.names.chunks, db.names.cache, db.names.files, db.names.repos):
        db.open(name).optimize(cleanup_older_than=CLEANUP_AFTER)
    return built
