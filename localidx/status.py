"""The state of an index, read without writing: what ``localidx status`` (and later ``index/status``) reports.

States: ``EMPTY`` (nothing indexed), ``INDEXING`` (a writer holds the lock), ``STALE`` (the work tree differs from
the catalog: files changed, added or deleted since the last run, or chunks still wait for vectors with no writer to
embed them), ``READY``.
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
    from localidx.indexer import work_tree_changes

    changes = work_tree_changes(discover(root, settings).files, records)
    return {"changed": sorted(f.path for f, _rec in changes.changed), "deleted": sorted(changes.gone)}


def index_status(root: Path, in_git: bool, settings: Settings, check_work_tree: bool = True,
                 writing: bool | None = None, embedder=None) -> dict:
    """Everything ``status`` shows, as one JSON-ready dict. ``writing`` says whether a writer is at work (the daemon
    knows; otherwise the write lock is probed); ``embedder`` reuses a loaded model."""
    from localidx.indexer import open_index

    index = open_index(root, in_git, settings, read_only=True, embedder=embedder)
    try:
        records = index.catalog.files()
        table = index.store.snapshot()
        report = {
            "root": str(root),
            "index": str(index.paths.state),
            "table": index.store.table_name,
            "model": index.embedder.model_id,
            "files": sum(1 for r in records.values() if not r.skipped),
            "files_skipped": sum(1 for r in records.values() if r.skipped),
            "chunks": 0,
            "chunks_with_vectors": 0,
            "chunks_by_kind": {},
            "chunks_by_language": {},
            "errors": [],
            "last_run": index.catalog.last_run(),
            "changed_files": [],
            "deleted_files": [],
        }
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
        if writing is None:
            writing = _writer_running(index.paths.lock)
        if check_work_tree and records:
            changes = _work_tree_changes(root, settings, records)
            report["changed_files"], report["deleted_files"] = changes["changed"], changes["deleted"]
        pending = report["chunks"] - report["chunks_with_vectors"]
        report["embedding_progress"] = round(report["chunks_with_vectors"] / report["chunks"], 4) if report[
            "chunks"] else 0.0
        if writing:
            report["state"] = "INDEXING"
        elif not records or not report["chunks"]:
            report["state"] = "EMPTY"
        elif report["changed_files"] or report["deleted_files"] or pending:
            report["state"] = "STALE"
        else:
            report["state"] = "READY"
        return report
    finally:
        index.close()
