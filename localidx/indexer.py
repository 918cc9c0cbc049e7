"""The indexer: the single writer of an index. Discovered files -> chunks (every core) -> rows -> vectors.

``run_index`` holds the work tree's write lock for its whole run and is the only code that mutates the store:

1. Compare the discovered files with the catalog (stat first, git blob id when the stat changed): only files whose
   content changed are chunked; files gone (deleted, now ignored or skipped) lose their rows.
2. Chunk the changed files on every core; write their rows in batches, one LanceDB commit per batch (a file is never
   half old and half new), then record them in the catalog. Rows whose embedding key is in the vector cache get
   their vector at once; the rest are written without one. The full-text index is updated: BM25 search works now.
   With ``summarize`` on, code rows first get their cached LLM explanations (``localidx.summarize``), and after the
   write the summarize stage explains the rest, rewriting those rows with a null vector (an LLM failure only stops it).
3. Fill the missing vectors, highest priority first, embedding only text the cache has never seen.

A run killed at any point leaves rows the catalog vouches for, plus at most some rows it does not: the next run
removes those (``dirty`` marker) and redoes what is missing. ``dry_run`` chunks the same way and writes nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from localidx.config import Settings

log = logging.getLogger(__name__)


@dataclass
class FileSummary:
    """What one worker reports about one file (small, so that it crosses process boundaries cheaply)."""

    path: str
    language: str = ""
    skipped: str | None = None
    chunks_by_kind: dict = field(default_factory=dict)
    symbols: int = 0
    size: int = 0
    errors: list = field(default_factory=list)
    invalid_utf8: bool = False
    redactions: int = 0


@dataclass
class DryRunReport:
    root: str
    in_git: bool
    files_processed: int = 0
    files_skipped: int = 0
    skipped_by_reason: dict = field(default_factory=dict)
    skipped_files: list = field(default_factory=list)  # [{"path", "reason"}]
    chunks: int = 0
    chunks_by_kind: dict = field(default_factory=dict)
    chunks_by_language: dict = field(default_factory=dict)
    symbols: int = 0
    bytes: int = 0
    errors: list = field(default_factory=list)  # [{"path", "reason"}]
    invalid_utf8_files: list = field(default_factory=list)
    redactions: int = 0
    duration_s: float = 0.0
    files_per_s: float = 0.0
    mb_per_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def _workers(settings: Settings) -> int:
    if settings.workers:
        return settings.workers
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _summarize(job: tuple[str, str, Settings, frozenset | None]) -> FileSummary:
    from localidx.chunk import chunk_file
    from localidx.discover import read_source
    from localidx.errors import LocalidxError

    path, abs_path, settings, kinds = job
    try:
        _text, data, _bad = read_source(Path(abs_path))
    except LocalidxError:
        return FileSummary(path=path, skipped="unreadable")
    result = chunk_file(path, data, settings)
    counts = Counter(c.kind for c in result.chunks if kinds is None or c.kind in kinds)
    return FileSummary(path=path, language=result.language, skipped=result.skipped, chunks_by_kind=dict(counts),
                       symbols=result.symbols, size=len(data), errors=result.errors,
                       invalid_utf8=result.invalid_utf8, redactions=result.redactions)


def map_files(func, jobs: list, workers: int) -> Iterator:
    """``func`` over ``jobs`` on ``workers`` processes (in this process when 1), results in job order."""
    if workers <= 1 or len(jobs) < 8:
        yield from map(func, jobs)
        return
    import multiprocessing
    import sys

    if "lancedb" in sys.modules:
        # LanceDB's runtime threads do not survive a fork: start workers from a clean server process that has
        # imported only the chunker. That server starts as `python -c ...` in the current directory, usually a
        # repository, which `-c` would put first on sys.path: its own multiprocessing/ or json/ package would be
        # imported instead of the real one. PYTHONSAFEPATH (Python 3.11+) keeps it off.
        os.environ.setdefault("PYTHONSAFEPATH", "1")
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["localidx.chunk", "localidx.indexer"])
    else:
        context = multiprocessing.get_context("fork")  # workers inherit the loaded grammars, nothing to re-import
    with context.Pool(workers) as pool:
        yield from pool.imap(func, jobs, chunksize=8)


def dry_run(root: Path, settings: Settings, only: list[str] | None = None, include_kinds: set[str] | None = None,
            limit_files: int | None = None) -> DryRunReport:
    """Walk the repository and chunk every file as indexing would, writing nothing."""
    from localidx.discover import discover

    started = time.perf_counter()
    found = discover(root, settings, only=only)
    files = found.files[:limit_files] if limit_files is not None else found.files
    report = DryRunReport(root=str(found.root), in_git=found.in_git)
    skipped = [(s.path, s.reason) for s in found.skipped]
    kinds = frozenset(include_kinds) if include_kinds else None
    jobs = [(f.path, str(f.abs_path), settings, kinds) for f in files]
    by_kind: Counter = Counter()
    by_language: Counter = Counter()
    for summary in map_files(_summarize, jobs, _workers(settings)):
        if summary.skipped:
            skipped.append((summary.path, summary.skipped))
            continue
        report.files_processed += 1
        report.bytes += summary.size
        report.symbols += summary.symbols
        report.redactions += summary.redactions
        by_kind.update(summary.chunks_by_kind)
        by_language[summary.language] += sum(summary.chunks_by_kind.values())
        report.errors.extend({"path": summary.path, "reason": r} for r in summary.errors)
        if summary.invalid_utf8:
            report.invalid_utf8_files.append(summary.path)
    report.files_skipped = len(skipped)
    report.skipped_files = [{"path": p, "reason": r} for p, r in sorted(skipped)]
    report.skipped_by_reason = dict(Counter(r for _p, r in skipped).most_common())
    report.chunks_by_kind = dict(by_kind.most_common())
    report.chunks_by_language = dict(by_language.most_common())
    report.chunks = sum(by_kind.values())
    report.duration_s = round(time.perf_counter() - started, 3)
    elapsed = max(report.duration_s, 1e-9)
    report.files_per_s = round(report.files_processed / elapsed, 1)
    report.mb_per_s = round(report.bytes / 1e6 / elapsed, 2)
    return report


# -- the write path -------------------------------------------------------------------------------------------


@dataclass
class RunStats:
    """The record of one indexing run (``localidx index --json`` prints it)."""

    files_processed: int = 0  # chunked this run
    files_unchanged: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0  # sent through the model this run
    chunks_reused: int = 0  # vector found in the cache
    chunks_deleted: int = 0
    chunks_pending: int = 0  # still without a vector (the run was stopped, or embedding was deferred)
    chunks_explained: int = 0  # summarize: explanations the LLM wrote this run
    explain_failures: int = 0  # summarize: LLM calls that failed this run
    explain_pending: int = 0  # summarize: code chunks still waiting for an explanation
    duration_s: float = 0.0
    write_s: float = 0.0
    embed_s: float = 0.0
    rate: float = 0.0  # chunks embedded per second of embedding
    model: str = ""
    rebuilt: bool = False
    started_at: float = 0.0
    errors: list = field(default_factory=list)
    warnings: list = field(default_factory=list)  # one line each: a stage that stopped (an unreachable LLM...)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Index:
    """An opened index: where it lives, its catalog and its tables."""

    paths: "object"
    settings: Settings
    catalog: "object"
    store: "object"
    embedder: "object"

    def close(self) -> None:
        self.catalog.close()


def open_index(root: Path, in_git: bool, settings: Settings, read_only: bool = False, embedder=None) -> Index:
    """Open (or, for writing, create) the index of the work tree at ``root``; ``embedder`` reuses a loaded model
    (the daemon's) instead of making one."""
    from localidx.store.paths import index_paths

    return open_index_at(index_paths(root, in_git, settings.home), settings, read_only=read_only, embedder=embedder)


def open_index_at(paths, settings: Settings, read_only: bool = False, embedder=None, store=None) -> Index:
    """``open_index`` for known ``IndexPaths``. Read-only opens write nothing (a missing index reads as empty).
    ``store``: a ChunkStore to share (the daemon's readers share one LanceDB connection, and so its index caches)."""
    from localidx.embed import get_embedder
    from localidx.store.catalog import Catalog

    embedder = embedder or get_embedder(settings.embed_model, threads=settings.embed_threads or None)
    store = store or open_store(paths, settings, embedder, read_only=read_only)
    catalog = Catalog(paths.catalog, create=not read_only)
    return Index(paths=paths, settings=settings, catalog=catalog, store=store, embedder=embedder)


def open_store(paths, settings: Settings, embedder, read_only: bool = False):
    """The ChunkStore of the work tree at ``paths`` for this model and these settings."""
    from localidx.store.lance import ChunkStore
    from localidx.summarize import table_variant

    return ChunkStore(paths.lancedb, paths.worktree_key, embedder.model_id, embedder.dim, read_only=read_only,
                      variant=table_variant(settings))


def embed_key(model_id: str, search_text: str) -> str:
    """The embedding cache key: the model, the [META] version and the exact text the model reads."""
    import hashlib

    from localidx.embed import embedding_input
    from localidx.enrich import META_VERSION

    material = f"{model_id}\0{META_VERSION}\0{embedding_input(search_text)}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def _row(chunk, file_hash: str, model_id: str) -> dict:
    import json

    from localidx.enrich import identifier_words

    words = " ".join(identifier_words(chunk.text, limit=400))
    search_text = chunk.search_text
    return {
        "id": chunk.id, "path": chunk.path, "language": chunk.language, "kind": chunk.kind,
        "symbol": chunk.symbol, "name": chunk.name, "title": chunk.title, "parent": chunk.parent,
        "parent_id": chunk.parent_id or "", "level": chunk.level, "start_line": chunk.start_line,
        "end_line": chunk.end_line, "chunk_index": chunk.chunk_index, "overlap_lines": chunk.overlap_lines,
        "token_count": chunk.token_count, "priority": int(chunk.tags.get("priority", 0)),
        "signature": chunk.signature, "doc": chunk.doc, "text": chunk.text, "search_text": search_text,
        # BM25 reads the search text plus every identifier split into words: "verify token" finds verifyToken.
        "bm25_text": f"{search_text}\n{words}", "calls": chunk.calls, "symbols": chunk.symbols,
        "tags": json.dumps(chunk.tags, sort_keys=True), "content_hash": chunk.content_hash,
        "span_hash": chunk.span_hash, "file_hash": file_hash, "embed_key": embed_key(model_id, search_text),
        "vector": None,
    }


def _chunk_job(job: tuple[str, str, str, Settings]):
    """Worker: read, hash and (when the content changed) chunk one file.

    Returns (path, (mtime_ns, size), blob id, FileChunks or None when the content is what the catalog has, skip
    reason or None)."""
    import pygit2

    from localidx.chunk import chunk_file
    from localidx.discover import read_source
    from localidx.errors import LocalidxError

    path, abs_path, known_hash, settings = job
    try:
        st = os.stat(abs_path)
        _text, data, _bad = read_source(Path(abs_path))
    except (OSError, LocalidxError):
        return path, None, "", None, "unreadable"
    blob = str(pygit2.hash(data))
    if blob == known_hash:
        return path, (st.st_mtime_ns, st.st_size), blob, None, None
    result = chunk_file(path, data, settings)
    return path, (st.st_mtime_ns, st.st_size), blob, result, result.skipped


@dataclass
class WorkTreeChanges:
    """How the listed files stand against the catalog, by stat alone (a changed stat may still hold the same content:
    the indexer then compares blob ids)."""

    changed: list  # (SourceFile, FileRecord or None): new, or its stat differs from the catalog's
    same: list  # FileRecord of files whose stat matches
    gone: list  # catalog paths (within ``only``) no longer listed


def work_tree_changes(files, records: dict, only: list[str] | None = None) -> WorkTreeChanges:
    """Compare discovered files with catalog records; a file that vanishes while being compared is left out."""
    listed = {f.path for f in files}
    changes = WorkTreeChanges(changed=[], same=[], gone=[p for p in records if _within(p, only) and p not in listed])
    for f in files:
        rec = records.get(f.path)
        try:
            st = os.stat(f.abs_path)
        except OSError:
            continue
        if rec is not None and (rec.mtime_ns, rec.size) == (st.st_mtime_ns, st.st_size):
            changes.same.append(rec)
        else:
            changes.changed.append((f, rec))
    return changes


def _within(path: str, only: list[str] | None) -> bool:
    return only is None or any(path == o or path.startswith(o.rstrip("/") + "/") for o in only)


def run_index(root: Path, in_git: bool, settings: Settings, only: list[str] | None = None, rebuild: bool = False,
              embed: bool = True, wait_s: float = 0.0, progress=None) -> RunStats:
    """Bring the index of the work tree at ``root`` up to date (see the module docstring)."""
    from localidx.lock import WriteLock
    from localidx.store.paths import index_paths

    lock_path = index_paths(root, in_git, settings.home).lock
    with WriteLock(lock_path, wait_s=wait_s):
        index = open_index(root, in_git, settings)
        try:
            return update(index, root, settings, only=only, rebuild=rebuild, embed=embed, progress=progress)
        finally:
            index.close()


def update(index: Index, root: Path, settings: Settings, only: list[str] | None = None, rebuild: bool = False,
           embed: bool = True, progress=None, should_stop=None) -> RunStats:
    """One indexing pass over an opened index. The caller holds the write lock (``run_index`` does; the daemon holds
    it for its lifetime). ``should_stop`` is asked between embedding batches: when it returns True the pass ends
    with vectors still pending, to be filled by a later pass."""
    from localidx.discover import discover
    from localidx.store.catalog import FileRecord
    from localidx.store.relations import Relations, file_relations
    from localidx.summarize import open_explainer

    progress = progress or (lambda *a, **k: None)
    explainer = open_explainer(index, settings)  # None unless summarize is on; ConfigError without llm_base_url
    stats = RunStats(model=index.embedder.model_id, started_at=time.time())
    started = time.perf_counter()
    store, catalog = index.store, index.catalog
    # A rebuild, a new model or schema (a new table name), or a catalog that vouches for nothing: start empty.
    relations = Relations(catalog)  # call relations, kept beside the catalog records; stale ones force a rebuild
    stats.rebuilt = catalog.bind(store.table_name, force=rebuild or relations.stale) or rebuild
    if stats.rebuilt or catalog.count() == 0:
        store.drop()
        relations.clear()
    store.drop_other_tables(index.paths.worktree_key)
    if catalog.dirty:
        # The last run died: rows of paths the catalog does not know may exist. Remove them first.
        orphans = sorted(store.indexed_paths() - set(catalog.files()))
        log.info("previous run was interrupted; removing rows of %d unrecorded paths", len(orphans))
        store.delete_paths(orphans)
        relations.remove(orphans)
    catalog.set_dirty(True)

    found = discover(root, settings, only=only)
    records = catalog.files()
    stats.files_skipped = len(found.skipped)
    changes = work_tree_changes(found.files, records, only)
    gone = changes.gone
    for rec in changes.same:
        if rec.skipped:
            stats.files_skipped += 1
        else:
            stats.files_unchanged += 1
    candidates = [(f.path, str(f.abs_path), rec.file_hash if rec else "", settings) for f, rec in changes.changed]
    progress("scan", files=len(found.files), changed=len(candidates), deleted=len(gone))

    batch_paths: list[str] = []
    batch_rows: list[dict] = []
    batch_records: list = []
    batch_relations: list = []

    def flush() -> None:
        if not batch_paths:
            return
        if explainer is not None:
            explainer.annotate(batch_rows)  # cached explanations go into the rows; the other code rows are queued
        cached = store.cache_get([r["embed_key"] for r in batch_rows])
        stats.chunks_reused += sum(1 for r in batch_rows if r["embed_key"] in cached)
        missing = {}
        for row in batch_rows:
            if row["embed_key"] not in cached:
                missing.setdefault(row["embed_key"], row["search_text"])
        if embed and 0 < len(missing) <= INLINE_EMBED_MAX:
            # A few new texts (an edit): embed them now and write rows and vectors in one commit; filling them in
            # later costs a merge over the whole table (seconds at 100k rows).
            cached.update(_embed_texts(index, missing))
            stats.chunks_embedded += len(missing)
        for row in batch_rows:
            row["vector"] = cached.get(row["embed_key"])
        store.replace_files(list(batch_paths), list(batch_rows))
        relations.replace_files(list(batch_relations))
        catalog.put(list(batch_records))
        stats.chunks_written += len(batch_rows)
        batch_paths.clear()
        batch_rows.clear()
        batch_records.clear()
        batch_relations.clear()

    write_started = time.perf_counter()
    done = 0
    for path, st, blob, result, reason in map_files(_chunk_job, candidates, _workers(settings)):
        done += 1
        progress("chunk", done=done, total=len(candidates), path=path)
        rec = records.get(path)
        if reason == "unreadable":
            stats.files_skipped += 1
            if rec is not None:
                gone.append(path)
            continue
        if reason:
            # Known and skipped by content (binary, minified...): recorded, so later runs and status need not
            # read it again until it changes; rows it had before go in the same commit as the batch.
            stats.files_skipped += 1
            if rec is not None:
                stats.chunks_deleted += len(rec.chunk_ids)
            batch_paths.append(path)
            batch_records.append(FileRecord(path, blob, st[0], st[1], "", [], 0, skipped=reason))
            batch_relations.append(file_relations(path, [], []))
            continue
        if result is None:
            catalog.touch(path, *st)  # same content, new stat (a touch, a checkout back and forth)
            if rec is not None and rec.skipped:
                stats.files_skipped += 1
            else:
                stats.files_unchanged += 1
            continue
        stats.files_processed += 1
        stats.errors.extend({"path": path, "reason": r} for r in result.errors)
        if rec is not None:
            stats.chunks_deleted += len(set(rec.chunk_ids) - {c.id for c in result.chunks})
        batch_paths.append(path)
        batch_rows.extend(_row(c, blob, index.embedder.model_id) for c in result.chunks)
        batch_records.append(FileRecord(path, blob, st[0], st[1], result.language, [c.id for c in result.chunks], 0))
        batch_relations.append(file_relations(path, result.chunks, result.imports))
        if len(batch_rows) >= settings.write_batch_rows:
            flush()
    flush()
    if gone:
        store.delete_paths(gone)
        relations.remove(gone)
        stats.chunks_deleted += sum(len(records[p].chunk_ids) for p in gone if p in records)
        catalog.remove(gone)
        stats.files_deleted = len(gone)
    store.ensure_indexes()
    stats.write_s = round(time.perf_counter() - write_started, 3)
    progress("written", chunks=stats.chunks_written)
    catalog.set_dirty(False)

    if explainer is not None:
        explainer.run(stats, progress, should_stop)  # rewrites explained rows with a null vector: filled below
    if embed:
        _fill_vectors(index, stats, progress, should_stop)
    stats.chunks_pending = len(store.pending_vectors())
    if stats.chunks_written or stats.chunks_embedded or stats.files_deleted:
        _compact_now_and_then(index)
    stats.duration_s = round(time.perf_counter() - started, 3)
    catalog.set_last_run(stats.to_dict())
    from localidx import registry

    # Listed in the per-user registry for cross-repository queries; an unchanged entry costs one small read.
    changed = bool(stats.chunks_written or stats.chunks_embedded or stats.files_deleted or stats.rebuilt)
    registry.register(root, index.paths, index.embedder.model_id, changed=changed)
    return stats


EMBED_COMMIT_ROWS = 256  # vectors per LanceDB commit: small enough that a stopped run loses little
EMBED_STEP = 16  # texts per model call while filling vectors; new work is looked for between steps
COMPACT_EVERY_VERSIONS = 64  # table versions (commits) between compactions
INLINE_EMBED_MAX = 64  # new texts in a write batch that are embedded before it is written rather than after


def _compact_now_and_then(index: Index) -> None:
    """Fold small commits together and drop old versions once enough commits have piled up: every batch and vector
    fill is a commit, and without this the table grew to 4.7x its live size (benchmarks/index.py)."""
    version = index.store.version()
    last = int(index.catalog.get_meta("compacted_at_version", "0") or 0)
    if version - last >= COMPACT_EVERY_VERSIONS:
        index.store.compact()
        index.catalog.set_meta("compacted_at_version", str(index.store.version()))


def _embed_texts(index: Index, texts_by_key: dict[str, str]) -> dict:
    """Embed search texts (by embedding key) and put them in the cache; returns key -> vector."""
    from localidx.embed import embedding_input

    vectors = index.embedder.embed([embedding_input(t) for t in texts_by_key.values()])
    index.store.cache_put(list(texts_by_key), vectors)
    return dict(zip(texts_by_key, vectors))


def _fill_vectors(index: Index, stats: RunStats, progress, should_stop=None) -> None:
    """Embed the rows that have no vector yet, highest priority first, through the content-addressed cache."""
    store = index.store
    pending = store.pending_vectors()
    if not pending:
        return
    started = time.perf_counter()
    total = len(pending)
    done = 0
    for start in range(0, total, EMBED_COMMIT_ROWS):
        part = pending[start : start + EMBED_COMMIT_ROWS]
        rows = store.rows_by_id([p[0] for p in part], ["id", "search_text", "embed_key"])
        keys = [r["embed_key"] for r in rows]
        cached = store.cache_get(keys)
        missing = {}
        for r in rows:
            if r["embed_key"] not in cached:
                missing.setdefault(r["embed_key"], r["search_text"])
        stopped = False
        keys = list(missing)
        for at in range(0, len(keys), EMBED_STEP):
            step = keys[at : at + EMBED_STEP]
            cached.update(_embed_texts(index, {k: missing[k] for k in step}))
            stats.chunks_embedded += len(step)
            # Asked between model batches (about a second each), not between commits (ten or more): a save made
            # while a backlog is embedding waits at most one batch before its own pass starts.
            if should_stop is not None and at + EMBED_STEP < len(keys) and should_stop():
                stopped = True
                break
        ready = [r for r in rows if r["embed_key"] in cached]
        stats.chunks_reused += sum(1 for r in ready if r["embed_key"] not in missing)
        store.set_vectors([r["id"] for r in ready], [_as_array(cached[r["embed_key"]]) for r in ready])
        done += len(ready)
        elapsed = time.perf_counter() - started
        rate = stats.chunks_embedded / elapsed if elapsed > 0 else 0.0
        progress("embed", done=done, total=total, rate=rate)
        if stopped or (should_stop is not None and should_stop()):
            break
    stats.embed_s = round(time.perf_counter() - started, 3)
    stats.rate = round(stats.chunks_embedded / stats.embed_s, 2) if stats.embed_s else 0.0
    store.ensure_indexes()


def _as_array(vector):
    import numpy as np

    return np.asarray(vector, dtype=np.float32)
