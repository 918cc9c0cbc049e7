"""The state of an index, read without writing: what ``localidx status`` (and later ``index/status``) reports.

States: ``EMPTY`` (nothing indexed), ``INDEXING`` (a writer holds the lock), ``DAMAGED`` (the catalog and the
chunk table disagree, or one cannot be read: ``damage`` says what, and ``localidx index`` repairs it), ``STALE`` (the
work tree differs from the catalog: files changed, added or deleted since the last run, or chunks still wait for
vectors with no writer to embed them), ``READY``.

Counts agree with an indexing run's record: ``files_skipped`` counts files discovery skips (by name or rule) and
files skipped by content, as the run does; ``failed_files`` lists the files a stage failed on (the catalog's
``problems``); ``errors`` the error chunks.
"""

from __future__ import annotations

import fcntl
import os
from collections import Counter
from pathlib import Path

from localidx.config import Settings


def _writer_running(lock: Path) -> bool:
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _work_tree_changes(root: Path, settings: Settings, records) -> dict:
    from localidx.discover import discover
    from localidx.index.indexer import work_tree_changes

    found = discover(root, settings)
    changes = work_tree_changes(found.files, records)
    return {"changed": sorted(f.path for f, _rec in changes.changed), "deleted": sorted(changes.gone),
            "skipped": Counter(s.reason for s in found.skipped)}


def index_status(root: Path, in_git: bool, settings: Settings, check_work_tree: bool = True,
                 writing: bool | None = None, embedder=None) -> dict:
    """Everything ``status`` shows, as one JSON-ready dict. ``writing`` says whether a writer is at work (the daemon
    knows; otherwise the write lock is probed); ``embedder`` reuses a loaded model."""
    from localidx.errors import IndexDamaged
    from localidx.paths import index_paths
    from localidx.store.index import diagnose, open_index

    report = {
        "root": str(root), "index": "", "table": "", "model": "", "files": 0, "files_skipped": 0,
        "skipped_by_reason": {}, "chunks": 0, "chunks_with_vectors": 0, "chunks_by_kind": {},
        "chunks_by_language": {}, "errors": [], "failed_files": [], "damage": [], "last_run": None,
        "changed_files": [], "deleted_files": [], "embedding_progress": 0.0, "chunks_pending": 0,
        "pending_since": None, "nothing_to_index": None, "last_error": None,
    }
    paths = index_paths(root, in_git, settings.home)
    report["index"] = str(paths.state)
    if writing is None:
        writing = _writer_running(paths.lock)
    try:
        index = open_index(root, in_git, settings, read_only=True, embedder=embedder)
    except IndexDamaged as exc:
        report["damage"] = [str(exc)]
        report["state"] = "INDEXING" if writing else "DAMAGED"
        return report
    try:
        report["table"], report["model"] = index.store.table_name, index.embedder.model_id
        records = index.catalog.files()
        report["files"] = sum(1 for r in records.values() if not r.skipped)
        skipped = Counter(r.skipped for r in records.values() if r.skipped)
        report["last_run"] = index.catalog.last_run()
        report["nothing_to_index"] = nothing_to_index(index.catalog)
        report["failed_files"] = index.catalog.problems()
        damage = [] if writing else diagnose(index)
        report["damage"] = [d.line() for d in damage]
        table = None if any(d.rebuild for d in damage) else index.store.snapshot()
        if table is not None:
            cols = table.search().select(["kind", "language", "path", "start_line", "end_line", "text"]).where(
                "kind = 'error'").limit(None).to_arrow().to_pylist()
            report["errors"] = [{"path": r["path"], "lines": [r["start_line"], r["end_line"]], "reason": r["text"]}
                                for r in cols]
            meta = table.search().select(["kind", "language"]).limit(None).to_arrow().to_pylist()
            report["chunks"] = len(meta)
            report["chunks_by_kind"] = dict(Counter(r["kind"] for r in meta).most_common())
            report["chunks_by_language"] = dict(Counter(r["language"] for r in meta).most_common())
            report["chunks_with_vectors"] = table.count_rows("vector IS NOT NULL") if meta else 0
        if check_work_tree and records:
            changes = _work_tree_changes(root, settings, records)
            report["changed_files"], report["deleted_files"] = changes["changed"], changes["deleted"]
            skipped += changes["skipped"]
        report["files_skipped"] = sum(skipped.values())
        report["skipped_by_reason"] = dict(skipped.most_common())
        failed_embeds = sum(1 for p in report["failed_files"] if p["stage"] == "embed")
        pending = report["chunks"] - report["chunks_with_vectors"] - failed_embeds
        report["chunks_pending"] = max(pending, 0)
        since = index.catalog.get_meta("pending_since") if pending > 0 else ""
        if since:  # written by the indexer when rows first waited for vectors (UTC, ISO 8601)
            from datetime import datetime, timezone

            report["pending_since"] = datetime.fromtimestamp(float(since), timezone.utc).isoformat(timespec="seconds")
        report["embedding_progress"] = round(report["chunks_with_vectors"] / report["chunks"], 4) if report[
            "chunks"] else 0.0
        if writing:
            report["state"] = "INDEXING"
        elif damage:
            report["state"] = "DAMAGED"
        elif not records or not report["chunks"]:
            report["state"] = "EMPTY"
        elif report["changed_files"] or report["deleted_files"] or pending > 0:
            report["state"] = "STALE"
        else:
            report["state"] = "READY"
        return report
    finally:
        index.close()


NOTHING_TO_INDEX = "NOTHING_TO_INDEX"  # an answer's noResultsReason: indexed, and nothing was there to index


def nothing_to_index(catalog) -> str | None:
    """The one line that says an index of nothing was made (an empty repository, one of binary files only), with
    the counts of the last run's skips: ``"0 files to index (2 binary, 1 secret-file): nothing here for localidx to
    search"``; None when the catalog lists a file with rows or no run has finished yet (not indexed: "run
    localidx index" is then the advice). Two cheap reads of the catalog: asked only when an answer is empty."""
    if catalog.count() > 0:
        return None
    run = catalog.last_run()
    if run is None:
        return None
    counts = sorted((run.get("skipped_by_reason") or {}).items(), key=lambda item: (-item[1], item[0]))
    skipped = ", ".join(f"{count} {reason}" for reason, count in counts)
    return f"0 files to index{f' ({skipped})' if skipped else ''}: nothing here for localidx to search"


def explain_empty_search(index, search) -> dict:
    """``search()`` (a ``search/query`` response), or, when the index is one of nothing, the empty answer that says
    so: no matches, the ``nothing_to_index`` line as its warning and ``noResultsReason: NOTHING_TO_INDEX``, where
    a search of an index without a table would say "not indexed yet" (``IndexNotReady``) and one with an empty
    table a bare "no matches". The daemon's handler and the in-process path both answer through this."""
    from localidx.errors import IndexNotReady

    try:
        response = search()
    except IndexNotReady:
        note = nothing_to_index(index.catalog)
        if note is None:
            raise
        return {"matches": [], "warnings": [note], "noResultsReason": NOTHING_TO_INDEX}
    if not response.get("matches"):
        note = nothing_to_index(index.catalog)
        if note is not None:
            response = {**response, "warnings": [*response.get("warnings", []), note],
                        "noResultsReason": NOTHING_TO_INDEX}
    return response


def explain_empty_pack(index, pack: dict) -> dict:
    """A context pack (``context/build``) of an index of nothing says so, as ``explain_empty_search`` does: the
    ``nothing_to_index`` line in place of "not indexed yet", ``noResultsReason: NOTHING_TO_INDEX``."""
    if pack.get("matches") or pack.get("noResultsReason") not in ("INDEX_NOT_READY", "CONTEXT_NOT_FOUND", None):
        return pack
    note = nothing_to_index(index.catalog)
    if note is None:
        return pack
    from localidx.errors import NOT_READY_WARNINGS

    warnings = [w for w in pack.get("warnings", []) if w not in NOT_READY_WARNINGS]
    return {**pack, "warnings": [*warnings, note], "noResults": True, "noResultsReason": NOTHING_TO_INDEX}
