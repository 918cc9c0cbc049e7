"""``index/status``: what ``localidx status --json`` prints, plus the daemon's own state under ``daemon``.

``index_status`` would infer INDEXING from a held write lock; the daemon holds it for its whole life, so here the
writer says whether it is at work (running or with work queued), and ``last_error`` why its last update failed (a
full disk, say), which a status read in-process cannot know.
"""

from __future__ import annotations


def handle(daemon, params: dict) -> dict:
    """The index's status, read without writing; the work tree is compared with the catalog unless told not to."""
    from localidx.index.status import index_status

    report = index_status(daemon.root, daemon.in_git, daemon.settings,
                          check_work_tree=params.get("check_work_tree", True), writing=daemon.writer.busy,
                          embedder=daemon.embedder)
    report["daemon"] = daemon.describe()
    failed = daemon.writer.last_error  # "DiskFull: no space left ...": the user's words are after the class name
    report["last_error"] = failed.split(": ", 1)[-1] if failed else None
    return report
