"""What narrows and marks a search's matches: the filters as a LanceDB prefilter (``filter_clause``: language, kind,
path glob, every value quoted), whether a match's file changed since it was indexed (``Staleness``), and the files
view, "which file do I open" (``rank_files``).

Place in the flow: retrieve, beside ``search.py``, which applies them; ``context.py`` and ``expand.py``'s callers
mark their matches with the same ``Staleness``. Reads the catalog and the work tree; writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path


def filter_clause(language: str | None = None, kind: str | None = None, path_glob: str | None = None) -> str | None:
    """The SQL prefilter for the given filters (None when there are none); every value is quoted by ``sql_str``."""
    from localidx.store.lance import sql_str

    parts = []
    if language:
        parts.append(f"language = {sql_str(language)}")
    if kind:
        parts.append(f"kind = {sql_str(kind)}")
    path_part = _path_clause(path_glob.strip()) if path_glob and path_glob.strip() else None
    if path_part:
        parts.append(path_part)
    return " AND ".join(parts) if parts else None


def _path_clause(glob: str) -> str | None:
    from localidx.store.lance import glob_to_like, sql_str

    pattern = glob[2:] if glob.startswith("./") else glob
    pattern = pattern.lstrip("/")
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.rstrip("/")
    if pattern.startswith("**/"):
        anchored, pattern = False, pattern[3:]
    if not pattern:  # "/", "./": the whole repository
        return None
    # As in .gitignore: a pattern names a file or a directory (then everything under it); without a slash it may
    # sit at any depth, with one it is anchored at the repository root; "a/**/b" matches "a/b" too.
    likes = []
    for variant in dict.fromkeys((pattern, pattern.replace("/**/", "/"))):
        like = glob_to_like(variant)
        likes += [like, like + "/%"]
        if not anchored:
            likes += ["%/" + like, "%/" + like + "/%"]
    return "(" + " OR ".join(f"path LIKE {sql_str(p)} ESCAPE '\\'" for p in likes) + ")"


class Staleness:
    """Whether a file changed on disk since it was indexed, cached per path for one search."""

    def __init__(self, index):
        self.root = Path(index.paths.root)
        self.catalog = index.catalog
        # A view of a shared org index (localidx.retrieve.shared_index) has no work tree here: its rows are a commit's.
        self.detached = not getattr(index, "has_work_tree", True)
        self._current: dict[str, str | None] = {}

    def current_hash(self, path: str) -> str | None:
        if path not in self._current:
            self._current[path] = self._hash_now(path)
        return self._current[path]

    def _hash_now(self, path: str) -> str | None:
        import pygit2

        abs_path = self.root / path
        try:
            st = os.stat(abs_path)
        except OSError:
            return None
        record = self.catalog.get(path)
        if record is not None and record.mtime_ns == st.st_mtime_ns and record.size == st.st_size:
            return record.file_hash
        try:
            return str(pygit2.hashfile(str(abs_path)))
        except (OSError, pygit2.GitError):
            return None

    def is_stale(self, path: str, file_hash: str) -> bool:
        if self.detached:
            return False
        current = self.current_hash(path)
        return current is None or current != file_hash


def rank_files(matches, k: int = 10) -> list[dict]:
    """"Which file do I open": files in the order of their best match (matches as dicts or ``Match``), each with
    ``path``, ``score`` (its best match's), ``matches`` (how many of the matches are in it), and its best match's
    ``start_line``, ``end_line`` and ``symbol``; the first ``k``."""
    files: dict[str, dict] = {}
    for match in matches:
        m = match if isinstance(match, dict) else match.to_dict()
        key = (m.get("repo"), m["path"])
        if key not in files:
            files[key] = {**({"repo": m["repo"]} if m.get("repo") else {}), "path": m["path"], "score": m["score"],
                          "matches": 0, "start_line": m["start_line"], "end_line": m["end_line"],
                          "symbol": m.get("symbol") or ""}
        files[key]["matches"] += 1
    return list(files.values())[:k]
