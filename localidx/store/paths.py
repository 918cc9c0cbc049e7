"""Where an index lives.

By default under the repository's git common dir (``.git/localidx``), so every worktree of a repository shares one
LanceDB database and its content-addressed embedding cache, while each worktree keeps its own chunk table and
catalog (they hold what that worktree has checked out). ``LOCALIDX_HOME`` (or ``home`` in the config) names the
state dir instead. Outside git: a per-user data dir keyed by the root path.

    <state>/lancedb/                  the LanceDB database: chunks_<...> tables and the vectors_<model> cache
    <state>/worktrees/<key>/          catalog.sqlite, write.lock, for one work tree
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IndexPaths:
    root: Path  # the work tree
    state: Path
    worktree_key: str

    @property
    def lancedb(self) -> Path:
        return self.state / "lancedb"

    @property
    def worktree(self) -> Path:
        return self.state / "worktrees" / self.worktree_key

    @property
    def catalog(self) -> Path:
        return self.worktree / "catalog.sqlite"

    @property
    def lock(self) -> Path:
        return self.worktree / "write.lock"


def _key(root: Path) -> str:
    resolved = str(root.resolve())
    return f"{root.resolve().name[:24]}-{hashlib.sha256(resolved.encode()).hexdigest()[:12]}"


def index_paths(root: Path, in_git: bool, home: str = "") -> IndexPaths:
    """The state locations for the work tree at ``root``."""
    root = root.resolve()
    if home:
        state = Path(home).expanduser().resolve()
    elif in_git:
        from localidx import gitrepo

        repo = gitrepo.open_repo(root)
        state = gitrepo.common_dir(repo) / "localidx" if repo is not None else _user_state(root)
    else:
        state = _user_state(root)
    return IndexPaths(root=root, state=state, worktree_key=_key(root))


def _user_state(root: Path) -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("localidx")) / "repos" / _key(root)
