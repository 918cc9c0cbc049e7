"""Where an index lives.

By default under the repository's git common dir (``.git/localidx``), so every worktree of a repository shares one
LanceDB database and its content-addressed embedding cache, while each worktree keeps its own chunk table and
catalog (they hold what that worktree has checked out). ``LOCALIDX_HOME`` (or ``home`` in the config) names the
state dir instead. Outside git: a per-user data dir keyed by the root path.

    <state>/lancedb/                  the LanceDB database: the chunks_<...> tables
    <state>/vectors.sqlite            the content-addressed vector cache (``localidx.store.vectors``), every model's
    <state>/worktrees/<key>/          catalog.sqlite (catalog-gN.sqlite), generation, write.lock, for one work tree

``generation`` holds the number of the work tree's current generation (``localidx.store.index``); it is replaced by
an atomic rename, so a reader sees the old number or the new one, never a torn file.

Private: a writer opens the index through ``make_private``: the state dir and the work tree's dir are 0700 and every
file in them 0600 (``localidx.safety.private``), whatever the umask, and an index an older localidx left readable by
others
is tightened once. The per-user dir that holds indexes of directories outside git is 0700 too.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from localidx import lazylog

log = lazylog.getLogger(__name__)


@dataclass(frozen=True)
class IndexPaths:
    root: Path  # the work tree
    state: Path
    worktree_key: str

    @property
    def lancedb(self) -> Path:
        return self.state / "lancedb"

    @property
    def vector_cache(self) -> Path:
        return self.state / "vectors.sqlite"

    @property
    def worktree(self) -> Path:
        return self.state / "worktrees" / self.worktree_key

    @property
    def catalog(self) -> Path:
        """The current generation's catalog."""
        return self.catalog_for(self.generation())

    def catalog_for(self, generation: int) -> Path:
        return self.worktree / ("catalog.sqlite" if generation == 0 else f"catalog-g{generation}.sqlite")

    @property
    def generation_file(self) -> Path:
        return self.worktree / "generation"

    def generation(self) -> int:
        """The current generation (0 when none was ever switched to)."""
        try:
            text = self.generation_file.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return 0
        if text.isdigit():
            return int(text)
        log.warning("ignoring the unreadable generation file %s", self.generation_file)
        return 0

    def set_generation(self, generation: int) -> None:
        """Switch readers to ``generation`` (write the new number beside the file, then rename it over)."""
        tmp = self.generation_file.with_name(f"generation.{os.getpid()}.tmp")
        tmp.write_text(f"{generation}\n", encoding="ascii")
        os.replace(tmp, self.generation_file)

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

        found = gitrepo.find_work_tree(root)
        if found is not None:
            state = found[1] / "localidx"
        else:
            repo = gitrepo.open_repo(root)
            state = gitrepo.common_dir(repo) / "localidx" if repo is not None else _user_state(root)
    else:
        state = _user_state(root)
    return IndexPaths(root=root, state=state, worktree_key=_key(root))


def _user_state(root: Path) -> Path:
    return _user_repos_dir() / _key(root)


def make_private(paths: IndexPaths) -> None:
    """Make the index's dirs private (0700), with a umask that keeps what follows so, and tighten, once, what an
    older localidx wrote readable by others. A ``home`` that holds something other than an index (a user's existing
    directory) is only created, never changed."""
    from localidx.safety.private import private_dir, restrict_umask, tighten_tree

    restrict_umask()
    if _is_user_state(paths.state):
        private_dir(_user_repos_dir().parent)  # the per-user data dir (the registry is in it too)
        private_dir(_user_repos_dir())
    fresh = not paths.state.exists()
    ours = fresh or _holds_an_index(paths.state) or _is_user_state(paths.state)
    if ours:
        private_dir(paths.state)
        tighten_tree(paths.state)
    else:
        paths.state.mkdir(parents=True, exist_ok=True)
    private_dir(paths.worktree)


def _holds_an_index(state: Path) -> bool:
    try:
        names = {entry.name for entry in os.scandir(state)}
    except OSError:
        return False
    return not names or bool(names & {"lancedb", "worktrees", "vectors.sqlite"})


def _is_user_state(state: Path) -> bool:
    return state.parent == _user_repos_dir()


def _user_repos_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("localidx")) / "repos"
