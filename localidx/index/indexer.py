"""The indexer: the single writer of an index. Discovered files -> chunks (every core) -> rows -> vectors.

``run_index`` holds the work tree's write lock for its whole run; ``sync_work_tree`` (one pass, also what the
daemon's writer thread runs) is the only code that mutates the store:

0. Check the catalog and the chunk table against each other (``localidx.store.index.diagnose``) and repair what
   is damaged, each kind said in one line: files whose rows are gone are indexed again, rows nobody vouches for are
   removed, an unreadable vector cache is emptied; a missing or unreadable table, a damaged catalog, a new model or
   schema, stale call relations or ``--rebuild`` build a new *generation* beside the current one, switched to only
   once its rows are written, so searches answer throughout and a rebuild killed early changes nothing.
1. Compare the discovered files with the catalog (stat first, git blob id when the stat changed): only files whose
   content changed are chunked; files gone (deleted, now ignored or skipped) lose their rows.
2. Chunk the changed files on every core (``localidx.index.workers``); write their rows in batches, one LanceDB commit
per
   batch (a file is never half old and half new), then their call relations, then their catalog records. Rows whose
   embedding key is in the vector cache get their vector at once; the rest are written without one. The full-text
   index is updated: BM25 search works now. With ``summarize`` on, code rows first get their cached LLM explanations
   (``localidx.index.explain``), and after the write the explain stage explains the rest.
3. Fill the missing vectors, highest priority first, embedding only text the cache has never seen.

**A failure costs its file only.** Reading, chunking (a chunker error, even a crashed worker process), building
rows ([META], embedding keys), call relations, embedding and writing are each guarded per file: the file gets an
error chunk (and line windows) or stays out of the index, the failure is recorded in the catalog's ``problems``
(``status`` lists them) and in the run's ``failed_files``, and the run goes on. LanceDB failing to read its own files
is not a file's failure but damage: the pass stops, and the next pass (``run_index`` starts it at once) repairs it.

A run killed at any point leaves rows the catalog vouches for, plus at most some rows it does not: the next run
removes those (``dirty`` marker) and redoes what is missing.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localidx.config import Settings
from localidx.errors import IndexDamaged
from localidx.store.index import Index, open_index_at

log = logging.getLogger(__name__)

# Filling vectors adapts to the model's speed: model calls grow from EMBED_STEP texts while one takes under half of
# STEP_S (new work is looked for between calls, so a save waits about STEP_S at most), and commits grow from
# EMBED_COMMIT_ROWS rows while one takes under COMMIT_S (a commit costs LanceDB a merge; a fast model, the static
# embedder, would otherwise spend its time committing 16 vectors at a time).
EMBED_COMMIT_ROWS = 256
EMBED_COMMIT_MAX = 16384
COMMIT_S = 3.0
EMBED_STEP = 16
EMBED_STEP_MAX = 4096
STEP_S = 1.0
# Compaction (old table versions deleted, fragments rewritten) is localidx.store.compact's: at the end of a pass
# that wrote (``_compact_now_and_then``) and when a daemon goes idle (``compact_idle``).
INLINE_EMBED_MAX = 64  # new texts in a write batch that are embedded before it is written rather than after
OLD_GENERATION_GRACE_S = 300  # a replaced generation is dropped this long after the switch (readers may be on it)
PENDING_SINCE = "pending_since"  # catalog meta: epoch seconds since chunks have waited for vectors ("" when none)
SETTLED = "settled"  # catalog meta: what a pass that left nothing to do saw (``_settled``); "" otherwise


def _did_something(stats: "RunStats") -> bool:
    return bool(stats.files_processed or stats.files_deleted or stats.files_failed or stats.chunks_written
                or stats.chunks_embedded or stats.chunks_deleted or stats.chunks_explained or stats.rebuilt)


@dataclass
class RunStats:
    """The record of one indexing run (``localidx index --json`` prints it).

    Files: every file the run saw is counted once, as ``files_processed + files_unchanged + files_skipped`` (plus
    ``files_failed``, which are not in the index); ``files_deleted`` counts catalog entries removed."""

    files_seen: int = 0  # listed by discovery, skipped ones included
    files_processed: int = 0  # chunked this run
    files_unchanged: int = 0
    files_skipped: int = 0
    files_failed: int = 0  # failed at some stage and left out of the index this run (see failed_files)
    files_deleted: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0  # sent through the model this run
    chunks_reused: int = 0  # vector found in the cache
    chunks_deleted: int = 0
    chunks_pending: int = 0  # still without a vector (the run was stopped, or embedding was deferred)
    chunks_explained: int = 0  # explain stage: explanations the LLM wrote this run
    explain_failures: int = 0  # explain stage: LLM calls that failed this run
    explain_pending: int = 0  # explain stage: code chunks still waiting for an explanation
    duration_s: float = 0.0
    write_s: float = 0.0
    embed_s: float = 0.0
    rate: float = 0.0  # chunks embedded per second of embedding
    model: str = ""
    rebuilt: bool = False
    generation: int = 0
    started_at: float = 0.0
    skipped_by_reason: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)  # error chunks: [{"path", "reason"}]
    failed_files: list = field(default_factory=list)  # [{"path", "stage", "reason"}]: a stage failed for the file
    repairs: list = field(default_factory=list)  # one line per kind of damage found and what was done about it
    warnings: list = field(default_factory=list)  # one line each: a stage that stopped (an unreachable LLM...)

    def to_dict(self) -> dict:
        return asdict(self)

    def skip(self, reason: str) -> None:
        self.files_skipped += 1
        self.skipped_by_reason[reason] = self.skipped_by_reason.get(reason, 0) + 1

    def fail(self, path: str, stage: str, reason: str) -> None:
        self.failed_files.append({"path": path, "stage": stage, "reason": reason})

    def embedding_took(self, seconds: float) -> None:
        """Count time spent embedding (inline in write batches or filling vectors in) and update the rate."""
        self.embed_s = round(self.embed_s + seconds, 3)
        self.rate = round(self.chunks_embedded / self.embed_s, 2) if self.embed_s else 0.0


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


# -- running -----------------------------------------------------------------------------------------------------


def run_index(root: Path, in_git: bool, settings: Settings, only: list[str] | None = None, rebuild: bool = False,
              embed: bool = True, wait_s: float = 0.0, progress=None) -> RunStats:
    """Bring the index of the work tree at ``root`` up to date (see the module docstring)."""
    from localidx.paths import index_paths
    from localidx.store.lock import WriteLock

    paths = index_paths(root, in_git, settings.home)
    with WriteLock(paths.lock, wait_s=wait_s):
        if not rebuild:
            quiet = _nothing_to_do(paths, root, settings, only, progress)
            if quiet is not None:
                return quiet
        index = open_for_writing(paths, settings, progress=progress)
        try:
            try:
                return sync_work_tree(index, root, settings, only=only, rebuild=rebuild, embed=embed,
                                      progress=progress)
            except IndexDamaged as exc:
                # Damage found while writing (a table LanceDB could no longer read): the marker is set, and the
                # next pass rebuilds. Run it now, once.
                log.info("%s: repairing", exc)
                return sync_work_tree(index, root, settings, only=None, embed=embed, progress=progress)
        finally:
            index.close()


def open_for_writing(paths, settings: Settings, embedder=None, progress=None) -> Index:
    """Open the current generation for writing; a catalog SQLite cannot open is moved aside (``.damaged``) and
    replaced by an empty one, and the damage is marked so that the pass rebuilds the index. The caller holds the
    write lock."""
    from localidx.store.index import mark_damaged

    try:
        return open_index_at(paths, settings, embedder=embedder)
    except IndexDamaged as exc:
        catalog = paths.catalog
        aside = catalog.with_name(catalog.name + ".damaged")
        line = f"{exc}: moved aside to {aside.name}"
        log.info(line)
        if progress is not None:
            progress("repair", message=line)
        for suffix in ("-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{catalog}{suffix}")
            except OSError:
                pass
        os.replace(catalog, aside)
        mark_damaged(paths, f"the catalog was damaged ({exc})")
        return open_index_at(paths, settings, embedder=embedder)


def sync_work_tree(index: Index, root: Path, settings: Settings, only: list[str] | None = None,
                   rebuild: bool = False, embed: bool = True, progress=None, should_stop=None) -> RunStats:
    """One pass that brings the index in line with the work tree at ``root`` (the module docstring's steps). The
    caller holds the write lock (``run_index`` does; the daemon holds it for its lifetime). ``should_stop`` is asked
    between embedding batches: when it returns True the pass ends with vectors still pending, to be filled by a
    later pass. After a rebuild ``index`` holds the new generation."""
    from localidx.index.explain import open_explainer
    from localidx.store.relations import Relations

    progress = progress or (lambda *a, **k: None)
    stats = RunStats(model=index.embedder.model_id, started_at=time.time())
    started = time.perf_counter()
    why = _repair(index, stats, progress) or ("--rebuild was asked for" if rebuild else None)
    bound = index.catalog.get_meta("table")
    if why is None and bound is not None and bound != index.store.table_name:
        why = "the embedding model, the schema or the [META] format changed"
    if why is None and Relations(index.catalog).stale:
        why = "the call relations were written by an older version"
    _collect_garbage(index, rebuilding=why is not None)
    target = index
    if why is not None:
        progress("rebuild", message=f"building a new index beside the current one: {why}")
        log.info("rebuilding: %s", why)
        stats.rebuilt = True
        target = open_index_at(index.paths, settings, embedder=index.embedder, generation=index.generation + 1)
        only = None
    target.catalog.bind(target.store.table_name)
    if target.catalog.count() == 0 and target.store.exists():
        target.store.drop()  # rows no catalog record vouches for (a first run, or a rebuild, killed very early)
    explainer = open_explainer(target, settings)  # None unless summarize is on; ConfigError without llm_base_url
    _write_changes(target, root, settings, only, embed, progress, stats, explainer)
    if target is not index:
        _switch(index, target)
        progress("switched", message=f"switched to the rebuilt index (generation {index.generation})")
        if rebuild:
            _drop_the_old_index(index)
    stats.generation = index.generation

    if explainer is not None:
        explainer.run(stats, progress, should_stop)  # rewrites explained rows with a null vector: filled below
    if embed:
        _fill_vectors(index, stats, progress, should_stop)
    failed_keys = index.catalog.failed_keys("embed")
    stats.chunks_pending = sum(1 for _id, _p, key in index.store.pending_vectors() if key not in failed_keys)
    if not stats.chunks_pending:
        index.catalog.set_meta(PENDING_SINCE, "")
    elif not index.catalog.get_meta(PENDING_SINCE):
        index.catalog.set_meta(PENDING_SINCE, str(time.time()))
    if stats.chunks_written or stats.chunks_embedded or stats.files_deleted:
        _compact_now_and_then(index)
    stats.duration_s = round(time.perf_counter() - started, 3)
    if _did_something(stats) or index.catalog.last_run() is None:
        # A pass that found nothing to do (a daemon's start-up check) does not hide the run that did the work.
        index.catalog.set_last_run(stats.to_dict())
    index.catalog.set_meta(SETTLED, _settled(index, settings, stats) or "")
    import localidx.index.registry as registry

    # Listed in the per-user registry for cross-repository queries; an unchanged entry costs one small read.
    changed = bool(stats.chunks_written or stats.chunks_embedded or stats.files_deleted or stats.rebuilt)
    registry.register(root, index.paths, index.embedder.model_id, changed=changed)
    return stats


# -- nothing to do -----------------------------------------------------------------------------------------------


def _nothing_to_do(paths, root: Path, settings: Settings, only: list[str] | None, progress) -> RunStats | None:
    """The record of a pass with nothing to do, found without opening LanceDB (or importing it, or loading the
    model), or None: the pass must run. Nothing to do means the last pass left everything settled (``_settled``: no
    vector pending, no failure, no damage), and since then neither the settings nor this package's version, nor a
    file of the chunk table, nor a listed file's stat, nor the list of files has changed; and no reader has marked
    damage, no call relations of another schema (or none) wait for a rebuild, and no other generation or table waits
    to be dropped. Anything else runs the pass, which finds what to
    do (a touched file of the same content, a repair) the usual way. The caller holds the write lock."""
    from localidx.store.catalog import Catalog
    from localidx.store.index import damage_marked

    path = paths.catalog
    if not path.exists() or damage_marked(paths):
        return None
    try:
        catalog = Catalog(path)
    except IndexDamaged:
        return None
    try:
        settled = catalog.get_meta(SETTLED)
        if not settled or catalog.dirty:
            return None
        from localidx.store.relations import Relations

        if Relations(catalog).stale:  # relations of another schema, or none: the pass rebuilds
            return None
        import json

        then = json.loads(settled)
        if then != _settled_facts(paths, settings, then.get("model", ""), then.get("table_version", 0)):
            return None
        started, clock = time.time(), time.perf_counter()
        stats = RunStats(model=then["model"], started_at=started, generation=paths.generation())
        from localidx.discover import discover

        found = discover(root, settings, only=only)
        records = catalog.files()
        changes = work_tree_changes(found.files, records, only)
        if changes.changed or changes.gone:
            return None
        stats.files_seen = len(found.files) + len(found.skipped)
        for skipped in found.skipped:
            stats.skip(skipped.reason)
        for rec in changes.same:
            if rec.skipped:
                stats.skip(rec.skipped)
            else:
                stats.files_unchanged += 1
        progress = progress or (lambda *a, **k: None)
        progress("scan", files=stats.files_seen, skipped=len(found.skipped), changed=0, deleted=0)
        progress("written", chunks=0)
        stats.duration_s = round(time.perf_counter() - clock, 3)
        if catalog.last_run() is None:
            catalog.set_last_run(stats.to_dict())
    finally:
        catalog.close()
    import localidx.index.registry as registry

    registry.register(root, paths, stats.model, changed=False)
    log.info("nothing to do: %d files unchanged (%.3f s)", stats.files_unchanged, stats.duration_s)
    return stats


def _settled(index: Index, settings: Settings, stats: RunStats) -> str | None:
    """What ``_nothing_to_do`` compares with later, as JSON, when this pass leaves nothing to do (every vector
    written, no failure, no explain stage, no older generation kept); else None."""
    import json

    if (stats.chunks_pending or stats.failed_files or stats.warnings or settings.summarize
            or index.catalog.dirty or index.catalog.failed_keys("embed")):
        return None
    if any(_generation_of(p.name) not in (None, index.generation) for p in index.paths.worktree.glob("catalog*")):
        return None
    facts = _settled_facts(index.paths, settings, index.embedder.model_id, index.store.version())
    if facts["table"] != index.store.table_name:
        return None
    return json.dumps(facts, sort_keys=True)


def _settled_facts(paths, settings: Settings, model: str, table_version: int) -> dict:
    """The state ``_settled`` records: the chunk table (its name, which holds the model and the schema and [META]
    versions, its version, and a digest of its files' names, sizes and times: any write, deletion or damage
    changes it), the database's tables, the call relations' schema, the generation, the settings and the
    package's version."""
    import hashlib

    from localidx import __version__
    from localidx.config import fingerprint
    from localidx.store.lance import chunk_table_name
    from localidx.store.relations import RELATIONS_SCHEMA

    table = chunk_table_name(model, paths.worktree_key, "", paths.generation())
    table_dir = paths.lancedb / f"{table}.lance"
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(table_dir):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(directory, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(full, table_dir)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    try:
        tables = sorted(os.listdir(paths.lancedb))  # a table made or dropped (another model, generation, work tree)
    except OSError:
        tables = []
    return {"table": table, "table_version": table_version, "files": digest.hexdigest()[:32], "tables": tables,
            "model": model, "generation": paths.generation(), "relations": RELATIONS_SCHEMA,
            "settings": fingerprint(settings), "package": __version__}


# -- damage, generations ------------------------------------------------------------------------------------------


def _repair(index: Index, stats: RunStats, progress) -> str | None:
    """Repair in place what ``diagnose`` finds; the reason for a rebuild when only a new generation repairs it."""
    from localidx.store.index import clear_damage_mark, diagnose
    from localidx.store.relations import Relations

    why = None
    for damage in diagnose(index):
        line = damage.line()
        stats.repairs.append(line)
        log.info("repairing: %s", line)
        progress("repair", message=line)
        if damage.rebuild:
            why = why or damage.detail
        elif damage.kind == "rows-missing":
            index.catalog.remove(damage.paths)  # indexed again below, like new files
            Relations(index.catalog).remove(damage.paths)
        elif damage.kind == "orphan-rows":
            index.store.delete_paths(damage.paths)
            Relations(index.catalog).remove([p for p in damage.paths if index.catalog.get(p) is None])
        elif damage.kind == "cache-unreadable":
            index.store.drop_cache()
    if why is None:
        clear_damage_mark(index.paths)
    return why


def _collect_garbage(index: Index, rebuilding: bool) -> None:
    """Drop the tables and catalogs of generations no reader needs any more: all but the current one (and, while
    rebuilding, the next), the previous one only once ``OLD_GENERATION_GRACE_S`` have passed since the switch. Chunk
    tables of this work tree made for another model or schema go too."""
    from localidx.store.index import discard_generation

    current = index.generation
    keep = {current, current + 1} if rebuilding else {current}
    switched_at = float(index.catalog.get_meta("switched_at", "0") or 0)
    if current > 0 and time.time() - switched_at < OLD_GENERATION_GRACE_S:
        keep.add(current - 1)
    base = index.store.table_name.removesuffix(f"_g{current}") if current else index.store.table_name
    index.store.drop_other_tables(keep={base + (f"_g{g}" if g else "") for g in keep})
    for path in index.paths.worktree.glob("catalog*.sqlite"):
        generation = _generation_of(path.name)
        if generation is not None and generation not in keep:
            discard_generation(index.paths, generation)


def _drop_the_old_index(index: Index) -> None:
    """After an asked-for rebuild: drop every other generation now (no grace period) and fold the new table into
    one version, so no file of the index holds text the work tree no longer has. A daemon refuses ``--rebuild``, so
    no reader of this process is on the old generation."""
    from localidx.store.index import discard_generation

    index.store.drop_other_tables()
    for path in index.paths.worktree.glob("catalog*.sqlite"):
        generation = _generation_of(path.name)
        if generation is not None and generation != index.generation:
            discard_generation(index.paths, generation)
    index.store.purge()


def _generation_of(name: str) -> int | None:
    if name == "catalog.sqlite":
        return 0
    number = name[len("catalog-g"):-len(".sqlite")] if name.startswith("catalog-g") else ""
    return int(number) if number.isdigit() else None


def _switch(index: Index, target: Index) -> None:
    """Point readers at ``target``'s generation and make ``index`` hold it from now on."""
    from localidx.store.index import clear_damage_mark

    target.catalog.set_meta("switched_at", str(time.time()))
    index.paths.set_generation(target.generation)
    clear_damage_mark(index.paths)
    index.catalog.close()
    index.catalog, index.store, index.generation = target.catalog, target.store, target.generation


# -- writing ------------------------------------------------------------------------------------------------------


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


def _row(chunk, file_hash: str, model_id: str) -> dict:
    import json

    from localidx.chunk.enrich import bm25_text
    from localidx.store.lance import embed_key

    search_text = chunk.search_text
    return {
        "id": chunk.id, "path": chunk.path, "language": chunk.language, "kind": chunk.kind,
        "symbol": chunk.symbol, "name": chunk.name, "title": chunk.title, "parent": chunk.parent,
        "parent_id": chunk.parent_id or "", "level": chunk.level, "start_line": chunk.start_line,
        "end_line": chunk.end_line, "chunk_index": chunk.chunk_index, "overlap_lines": chunk.overlap_lines,
        "token_count": chunk.token_count, "priority": int(chunk.tags.get("priority", 0)),
        "signature": chunk.signature, "doc": chunk.doc, "text": chunk.text, "search_text": search_text,
        "bm25_text": bm25_text(chunk), "calls": chunk.calls, "symbols": chunk.symbols,
        "tags": json.dumps(chunk.tags, sort_keys=True), "content_hash": chunk.content_hash,
        "span_hash": chunk.span_hash, "file_hash": file_hash, "embed_key": embed_key(model_id, search_text),
        "vector": None,
    }


@dataclass
class _Pending:
    """One file's write, ready for a batch: its rows, catalog record, relations and problems."""

    path: str
    rows: list
    record: object  # FileRecord
    relations: object  # FileRelations
    problems: list  # (path, stage, reason, key)
    counted: str = "processed"  # how the run counted it: "processed", or the skip reason of a file without rows


def _prepare(item, abs_path: str, rec, model_id: str, settings: Settings, stats: RunStats) -> _Pending | None:
    """Rows, relations and record of a changed file. A failure while building its rows ([META], embedding keys) or
    its call relations costs the file its symbol chunks: it is written as an error chunk and line windows, and the
    failure is recorded. None when even that fails (the file then stays out of the index)."""
    from localidx.chunk import unparsed_file
    from localidx.index.workers import read_file
    from localidx.store.catalog import FileRecord
    from localidx.store.relations import file_relations

    path, result = item.path, item.chunks
    problems: list = []
    for attempt in (1, 2):
        stage = "enrich"
        try:
            rows = [_row(c, item.blob, model_id) for c in result.chunks]
            stage = "relations"
            relations = file_relations(path, result.chunks, result.imports)
            break
        except Exception as exc:  # noqa: BLE001 - a failure costs its file only (module docstring)
            reason = f"{stage} failed: {_reason(exc)}"
            log.warning("%s: %s", path, reason)
            stats.fail(path, stage, reason)
            problems.append((path, stage, reason, ""))
            if attempt == 2:
                stats.files_failed += 1
                return None
            read = read_file(abs_path, settings.max_file_bytes)
            result = unparsed_file(path, b"" if isinstance(read, str) else read[1], settings, reason)
    stats.errors.extend({"path": path, "reason": r} for r in result.errors)
    record = FileRecord(path, item.blob, item.stat[0], item.stat[1], result.language, [c.id for c in result.chunks], 0)
    if rec is not None:
        stats.chunks_deleted += len(set(rec.chunk_ids) - set(record.chunk_ids))
    return _Pending(path=path, rows=rows, record=record, relations=relations, problems=problems)


def _skipped(path: str, item, reason: str) -> _Pending:
    """A file known and skipped by content (binary, minified...): recorded without rows, so later runs and status
    need not read it again until it changes; rows it had before go in the same commit as its batch."""
    from localidx.store.catalog import FileRecord
    from localidx.store.relations import file_relations

    record = FileRecord(path, item.blob, item.stat[0], item.stat[1], "", [], 0, skipped=reason)
    return _Pending(path=path, rows=[], record=record, relations=file_relations(path, [], []), problems=[],
                    counted=reason)


def _write_changes(index: Index, root: Path, settings: Settings, only, embed: bool, progress, stats: RunStats,
                   explainer) -> None:
    """Steps 1 and 2 of the module docstring: what changed is chunked and written, what is gone removed."""
    from localidx.discover import discover
    from localidx.index.workers import chunk_changed_file, crashed_chunking, map_files, worker_count
    from localidx.store.relations import Relations

    store, catalog = index.store, index.catalog
    relations = Relations(catalog)
    if catalog.dirty:
        # The last run died: rows of paths the catalog does not know may exist. Remove them first.
        orphans = sorted(store.indexed_paths() - set(catalog.files()))
        log.info("previous run was interrupted; removing rows of %d unrecorded paths", len(orphans))
        store.delete_paths(orphans)
        relations.remove(orphans)
    catalog.set_dirty(True)

    found = discover(root, settings, only=only)
    records = catalog.files()
    stats.files_seen = len(found.files) + len(found.skipped)
    for skipped in found.skipped:
        stats.skip(skipped.reason)
    changes = work_tree_changes(found.files, records, only)
    gone = changes.gone
    for rec in changes.same:
        if rec.skipped:
            stats.skip(rec.skipped)
        else:
            stats.files_unchanged += 1
    candidates = [(f.path, str(f.abs_path), rec.file_hash if rec else "", settings) for f, rec in changes.changed]
    progress("scan", files=stats.files_seen, skipped=len(found.skipped), changed=len(candidates),
             deleted=len(gone))

    batch = _Batch(index, stats, embed, explainer, relations)
    write_started = time.perf_counter()
    work_bytes = sum(f.size for f, _rec in changes.changed)
    jobs = map_files(chunk_changed_file, candidates, worker_count(settings, work_bytes), crashed_chunking)
    for done, (item, job) in enumerate(zip(jobs, candidates), 1):
        progress("chunk", done=done, total=len(candidates), path=item.path)
        rec = records.get(item.path)
        if item.skipped == "unreadable":
            stats.skip("unreadable")
            if rec is not None:
                gone.append(item.path)
            continue
        if item.skipped:
            stats.skip(item.skipped)
            if rec is not None:
                stats.chunks_deleted += len(rec.chunk_ids)
            batch.add(_skipped(item.path, item, item.skipped))
        elif item.chunks is None:
            catalog.touch(item.path, *item.stat)  # same content, new stat (a touch, a checkout back and forth)
            if rec is not None and rec.skipped:
                stats.skip(rec.skipped)
            else:
                stats.files_unchanged += 1
            continue
        else:
            pending = _prepare(item, job[1], rec, index.embedder.model_id, settings, stats)
            if pending is None:
                continue
            stats.files_processed += 1
            batch.add(pending)
        if batch.rows >= settings.write_batch_rows:
            batch.flush()
    batch.flush()
    if gone:
        store.delete_paths(gone)
        relations.remove(gone)
        stats.chunks_deleted += sum(len(records[p].chunk_ids) for p in gone if p in records)
        catalog.remove(gone)
        stats.files_deleted = len(gone)
    store.ensure_indexes()
    stats.write_s = round(time.perf_counter() - write_started, 3)
    progress("written", chunks=stats.chunks_written)
    if stats.chunks_written and not catalog.get_meta(PENDING_SINCE):
        catalog.set_meta(PENDING_SINCE, str(time.time()))  # cleared once no chunk waits for a vector (status shows it)
    catalog.set_dirty(False)


class _Batch:
    """Files waiting to be written together: one LanceDB commit for their rows, then their relations, then their
    catalog records. A batch that fails to write is written again file by file, so that a file whose rows cannot be
    written costs only itself; LanceDB failing to read its own files is damage (``IndexDamaged``)."""

    def __init__(self, index: Index, stats: RunStats, embed: bool, explainer, relations):
        self.index, self.stats, self.embed, self.explainer, self.relations = index, stats, embed, explainer, relations
        self.files: list[_Pending] = []
        self.rows = 0

    def add(self, pending: _Pending) -> None:
        self.files.append(pending)
        self.rows += len(pending.rows)

    def flush(self) -> None:
        files, self.files, self.rows = self.files, [], 0
        if not files:
            return
        try:
            self._write(files)
        except Exception as exc:  # noqa: BLE001
            self._damage_or(exc)
            if len(files) == 1:
                self._failed(files[0], exc)
                return
            for one in files:
                try:
                    self._write([one])
                except Exception as exc_one:  # noqa: BLE001
                    self._damage_or(exc_one)
                    self._failed(one, exc_one)

    def _damage_or(self, exc: BaseException) -> None:
        from localidx.errors import disk_full
        from localidx.store.index import mark_damaged, storage_error

        full = disk_full(exc, self.index.paths.state)
        if full is not None:
            raise full from exc  # not damage: the write did not happen, and a repair would only fill the disk again
        reason = storage_error(exc)
        if reason is not None:
            mark_damaged(self.index.paths, f"a write to the chunk table failed: {reason}")
            raise IndexDamaged(f"the index at {self.index.paths.state} is damaged ({reason})") from exc

    def _failed(self, one: _Pending, exc: BaseException) -> None:
        reason = f"write failed: {_reason(exc)}"
        log.warning("%s: %s", one.path, reason)
        self.stats.fail(one.path, "write", reason)
        self.stats.files_failed += 1
        if one.counted == "processed":
            self.stats.files_processed -= 1
        else:
            self.stats.files_skipped -= 1
            self.stats.skipped_by_reason[one.counted] -= 1
        try:
            self.index.catalog.set_problems([one.path], [(one.path, "write", reason, "")])
        except Exception:  # noqa: BLE001 - the record of a failure must not fail the run
            log.exception("cannot record the failure of %s", one.path)

    def _write(self, files: list[_Pending]) -> None:
        index, stats = self.index, self.stats
        store, catalog = index.store, index.catalog
        rows = [r for f in files for r in f.rows]
        if self.explainer is not None:
            self.explainer.annotate(rows)  # cached explanations go into the rows; the other code rows are queued
        cached = store.cache_get([r["embed_key"] for r in rows])
        reused = sum(1 for r in rows if r["embed_key"] in cached)
        missing: dict[str, str] = {}
        owner: dict[str, str] = {}
        for f in files:
            for row in f.rows:
                if row["embed_key"] not in cached:
                    missing.setdefault(row["embed_key"], row["search_text"])
                    owner.setdefault(row["embed_key"], f.path)
        embedded = {}
        problems = [p for f in files for p in f.problems]
        if self.embed and missing and (len(missing) <= INLINE_EMBED_MAX or _embeds_inline(index.embedder)):
            # A few new texts (an edit), or a model as fast as writing: embed them now and write rows and vectors
            # in one commit; filling them in later costs a merge over the whole table (seconds at 100k rows).
            started = time.perf_counter()
            embedded = _embed_safely(index, missing, owner, stats, problems)
            took = time.perf_counter() - started
        for row in rows:
            key = row["embed_key"]
            row["vector"] = cached[key] if key in cached else embedded.get(key)
        store.replace_files([f.path for f in files], rows)
        self.relations.replace_files([f.relations for f in files])
        catalog.put([f.record for f in files])
        catalog.set_problems([f.path for f in files], problems)
        stats.chunks_written += len(rows)
        stats.chunks_reused += reused
        if embedded:
            stats.chunks_embedded += len(embedded)
            stats.embedding_took(took)


def _embeds_inline(embedder) -> bool:
    from localidx.embed import embeds_inline

    return embeds_inline(embedder)


# -- vectors ------------------------------------------------------------------------------------------------------


def _compact_now_and_then(index: Index) -> None:
    """Delete the table versions no reader is on, and rewrite the fragments when they hold many deleted rows
    (``localidx.store.compact``): every batch and vector fill is a commit, and a branch switch replaces most rows;
    without this the table grew to 4.7x its live size (benchmarks/index.py), 14x after six branch switches
    (benchmarks/compaction.py)."""
    done = index.store.compact(index.catalog)
    if done.get("rewritten") or done.get("versions_dropped"):
        log.info("compaction: %s", done)


def compact_idle(index: Index, settings: Settings) -> dict:
    """Compaction while nothing is written (a daemon going idle; the caller is the writer): what a pass's end does,
    and a settled pass's record, when it still holds, brought up to date, so that the next ``localidx index`` still
    finds nothing to do."""
    import json

    settled = index.catalog.get_meta(SETTLED)
    then = json.loads(settled) if settled else None
    holds = then is not None and then == _settled_facts(index.paths, settings, then.get("model", ""),
                                                          then.get("table_version", 0))
    done = index.store.compact(index.catalog, idle=True)
    if done.get("rewritten") or done.get("versions_dropped"):
        log.info("idle compaction: %s", done)
        if holds:
            facts = _settled_facts(index.paths, settings, then["model"], index.store.version())
            index.catalog.set_meta(SETTLED, json.dumps(facts, sort_keys=True))
    return done


def _embed_texts(index: Index, texts_by_key: dict[str, str], cache: bool = True) -> dict:
    """Embed search texts (by embedding key), put them in the cache unless told not to; returns key -> vector."""
    from localidx.embed import embedding_input

    vectors = index.embedder.embed([embedding_input(t) for t in texts_by_key.values()])
    if cache:
        index.store.cache_put(list(texts_by_key), vectors)
    return dict(zip(texts_by_key, vectors))


def _embed_safely(index: Index, texts_by_key: dict[str, str], owner: dict[str, str], stats: RunStats,
                  problems: list, cache: bool = True) -> dict:
    """``_embed_texts``, and when the model fails on a batch, text by text: a text it cannot embed is its file's
    failure (``owner``: key -> path), appended to ``problems`` for the catalog (which keeps it from being tried
    again until it changes), and gets no vector."""
    try:
        return _embed_texts(index, texts_by_key, cache)
    except Exception as exc:  # noqa: BLE001
        from localidx.store.index import storage_error

        if storage_error(exc) is not None:
            raise
        if len(texts_by_key) > 1:
            found: dict = {}
            for key, text in texts_by_key.items():
                found.update(_embed_safely(index, {key: text}, owner, stats, problems, cache))
            return found
        (key,) = texts_by_key
        path = owner.get(key, "")
        reason = f"embedding failed: {_reason(exc)}"
        log.warning("%s: %s", path, reason)
        stats.fail(path, "embed", reason)
        problems.append((path, "embed", reason, key))
        return {}


def _fill_vectors(index: Index, stats: RunStats, progress, should_stop=None) -> None:
    """Embed the rows that have no vector yet, highest priority first, through the content-addressed cache; texts
    the model failed on before are left alone. Model calls and commits grow with the model's speed (see STEP_S)."""
    store = index.store
    failed = index.catalog.failed_keys("embed")
    pending = [p for p in store.pending_vectors() if p[2] not in failed]
    if not pending:
        return
    started = time.perf_counter()
    total = len(pending)
    done = start = 0
    progress("embed", done=0, total=total, rate=0.0)  # the phase starts: a log shows it before the first commit
    step, commit_rows = EMBED_STEP, EMBED_COMMIT_ROWS
    stopped = False
    while start < total and not stopped:
        part = pending[start : start + commit_rows]
        start += len(part)
        part_started = time.perf_counter()
        rows = store.rows_by_id([p[0] for p in part], ["id", "path", "search_text", "embed_key"])
        cached = store.cache_get([r["embed_key"] for r in rows])
        missing: dict[str, str] = {}
        owner: dict[str, str] = {}
        for r in rows:
            if r["embed_key"] not in cached:
                missing.setdefault(r["embed_key"], r["search_text"])
                owner.setdefault(r["embed_key"], r["path"])
        keys = list(missing)
        new: dict = {}
        at = 0
        while at < len(keys):
            batch = keys[at : at + step]
            at += len(batch)
            problems: list = []
            call_started = time.perf_counter()
            found = _embed_safely(index, {k: missing[k] for k in batch}, owner, stats, problems, cache=False)
            took = time.perf_counter() - call_started
            if took < STEP_S / 2 and len(batch) == step:
                step = min(step * 2, EMBED_STEP_MAX)
            elif took > 2 * STEP_S:
                step = max(step // 2, EMBED_STEP)
            if problems:
                index.catalog.add_problems(problems)
            new.update(found)
            stats.chunks_embedded += len(found)
            elapsed = time.perf_counter() - started
            progress("embed", done=min(done + at, total), total=total,
                     rate=stats.chunks_embedded / elapsed if elapsed > 0 else 0.0)
            # Asked between model calls (about STEP_S each), not between commits: a save made while a backlog is
            # embedding waits at most one call before its own pass starts.
            if should_stop is not None and at < len(keys) and should_stop():
                stopped = True
                break
        if new:
            store.cache_put(list(new), [new[k] for k in new])
            cached.update(new)
        ready = [r for r in rows if r["embed_key"] in cached]
        stats.chunks_reused += sum(1 for r in ready if r["embed_key"] not in missing)
        store.set_vectors([r["id"] for r in ready], [_as_array(cached[r["embed_key"]]) for r in ready])
        done += len(ready)
        if time.perf_counter() - part_started < COMMIT_S / 2:
            commit_rows = min(commit_rows * 2, EMBED_COMMIT_MAX)
        elapsed = time.perf_counter() - started
        rate = stats.chunks_embedded / elapsed if elapsed > 0 else 0.0
        progress("embed", done=done, total=total, rate=rate)
        if should_stop is not None and should_stop():
            stopped = True
    stats.embedding_took(time.perf_counter() - started)
    store.ensure_indexes()


def _as_array(vector):
    import numpy as np

    return np.asarray(vector, dtype=np.float32)
