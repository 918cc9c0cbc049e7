"""Every question localidx asks git, answered in one place.

Discovery asks which files git lists and which ones ``.gitattributes`` marks as generated; the content cache asks
for blob ids; hooks and the watcher ask where the repository and its shared git directory are. Keeping these here
means one module knows git's quirks (bare repositories, worktrees, gitlinks, attribute values that come back as
``True`` or ``"true"``, ignore-rule precedence) and no other module runs ``git`` itself. Nothing here starts a
subprocess: a hook runs localidx on every commit of a possibly 10k-file repository, and git need not be installed.
The one exception is ``hooks_location``, which asks git where hooks live when they are installed (never from a hook).

Repository data (index, attributes, config) comes from pygit2. Ignore rules do not: libgit2 1.9 drops a negation in
a nested ``.gitignore`` that re-includes what a parent ``.gitignore`` excluded (libgit2 issue #7284), and its
``status()`` raises on a single unreadable tracked file. So ``listed_files`` walks the work tree itself and applies
the ``.gitignore`` files, ``info/exclude`` and ``core.excludesFile`` with ``pathspec.GitIgnoreSpec``, the same
walker that serves directories outside git.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localidx import lazylog
from localidx.errors import LocalidxError

if TYPE_CHECKING:
    import pathspec
    import pygit2

log = lazylog.getLogger(__name__)

_GITLINK = 0o160000  # pygit2.GIT_FILEMODE_COMMIT: an index entry for a submodule, not a file in this work tree
_ATTRIBUTES_NAME = ".gitattributes"
_IGNORE_NAME = ".gitignore"
GENERATED_ATTRIBUTE = "linguist-generated"  # GitHub Linguist's mark for generated files

# One ignore file's rules: (directory it sits in, relative to the walk root, "" for the root; its patterns).
IgnoreLevel = tuple[str, "pathspec.GitIgnoreSpec"]


def open_repo(start: Path) -> pygit2.Repository | None:
    """The repository whose work tree contains ``start``, searching upward; None outside git or for a bare repo.

    A repository pygit2 refuses to open (corrupt, or owned by another user) is logged and treated as no repository,
    so the caller falls back to a plain directory walk instead of failing.
    """
    import pygit2

    try:
        git_dir = pygit2.discover_repository(str(start))
        if git_dir is None:
            return None
        repo = pygit2.Repository(git_dir)
    except (pygit2.GitError, OSError, ValueError) as exc:
        log.warning("not using git at %s: %s", start, exc)
        return None
    if repo.is_bare or repo.workdir is None:
        return None
    return repo


def bare_repository(start: Path) -> Path | None:
    """The bare repository ``start`` is in (its git directory), or None."""
    import pygit2

    try:
        git_dir = pygit2.discover_repository(str(start))
        if git_dir is None:
            return None
        repo = pygit2.Repository(git_dir)
    except (pygit2.GitError, OSError, ValueError):
        return None
    return Path(repo.path).resolve() if repo.is_bare else None


def work_root(repo: pygit2.Repository) -> Path:
    """The top directory of the repository's work tree (for a linked worktree, that worktree's top)."""
    return Path(repo.workdir).resolve()


def common_dir(repo: pygit2.Repository) -> Path:
    """The git directory shared by all worktrees of the repository (where hooks, config and refs live).

    pygit2 has no binding for libgit2's commondir, so this reads the ``commondir`` file git writes into a linked
    worktree's private git directory; a main work tree has none and its git directory is the common one.
    """
    git_dir = Path(repo.path)
    try:
        target = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir.resolve()
    return (git_dir / target).resolve() if target else git_dir.resolve()


def find_work_tree(start: Path) -> tuple[Path, Path] | None:
    """(work-tree root, common git dir) of the repository whose work tree holds ``start``, read from the nearest
    ``.git`` above it without pygit2; None whenever the files do not answer plainly, and the caller then asks
    ``open_repo``. What a search through a running daemon needs is only where the work tree and its state are, and
    importing pygit2 cost more than the rest of such a command.

    Plain means: a ``.git`` directory, or a ``.git`` file (``gitdir: ...``: a linked worktree or a submodule) whose
    git dir holds ``HEAD``, owned by this user, on the file system of ``start`` (libgit2 stops at a file-system
    boundary and refuses another user's repository), whose config sets neither ``core.worktree`` nor ``core.bare``
    to true. In every such case the answer is ``open_repo``'s."""
    try:
        here = Path(start).absolute()
        device = os.stat(here).st_dev
    except OSError:
        return None
    for directory in (here, *here.parents):
        dotgit = directory / ".git"
        try:
            st = os.stat(dotgit)
        except FileNotFoundError:
            try:
                if os.stat(directory).st_dev != device:
                    return None
            except OSError:
                return None
            continue
        except OSError:
            return None
        if st.st_dev != device or st.st_uid != os.getuid():
            return None
        git_dir = _git_dir_of(dotgit, directory, is_file=not os.path.isdir(dotgit))
        if git_dir is None or not (git_dir / "HEAD").is_file():
            return None
        try:
            target = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            target = ""
        except OSError:
            return None
        common = (git_dir / target).resolve() if target else git_dir.resolve()
        root = directory.resolve()
        for config in (common / "config", git_dir / "config.worktree"):
            if not _plain_config(config, git_dir, root):
                return None
        return root, common
    return None


def _git_dir_of(dotgit: Path, directory: Path, is_file: bool) -> Path | None:
    if not is_file:
        return dotgit
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:") or "\n" in text:
        return None
    return directory / text[len("gitdir:"):].strip()


def _plain_config(path: Path, git_dir: Path, root: Path) -> bool:
    """Whether a git config file (absent: yes) leaves the work tree at ``root``, where its ``.git`` is: no true
    ``bare`` (``bare = false`` is in every repository ``git init`` makes) and no ``worktree`` other than ``root`` (a
    submodule's names its own directory, relative to ``git_dir``)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq:
            continue
        if key == "bare" and value.lower() not in ("false", "no", "off", "0"):
            return False
        if key == "worktree" and (not value or value[0] in "\"';#~" or (git_dir / value).resolve() != root):
            return False
    return True


def listed_files(repo: pygit2.Repository, within: list[str] | None = None) -> list[str]:
    """The files git lists: tracked files present in the work tree plus untracked files no ignore rule matches.

    Paths are repo-relative with forward slashes, sorted and unique. Left out: submodules (gitlink entries), the
    contents of untracked nested repositories, tracked files deleted from the work tree, and untracked entries that
    are neither regular files nor symlinks (git does not list a FIFO either). ``within`` (repo-relative paths or
    directories, "" for all) limits the walk. A tracked file inside a directory that cannot be listed is kept, so
    the caller's ``stat`` reports it as unreadable instead of it silently disappearing.
    """
    index = repo.index
    index.read(False)  # reload only if another process rewrote the index since the repository was opened
    tracked: set[str] = set()
    gitlinks: set[str] = set()
    for entry in index:
        (gitlinks if entry.mode == _GITLINK else tracked).add(entry.path)
    root = work_root(repo)
    paths, unlistable = walk_unignored(
        root,
        tracked=tracked,
        skip_dirs=gitlinks,
        base_levels=_repo_exclude_levels(repo),
        skip_nested_repos=True,
        keep_special=False,
        within=within,
    )
    for directory in unlistable:
        log.warning("cannot list %s/%s; its untracked files are left out", root, directory)
        paths.extend(p for p in tracked if _is_within(p, [directory]) and _is_within(p, within))
    return sorted(set(paths))


def walk_unignored(
    root: Path,
    *,
    tracked: set[str] | frozenset[str] = frozenset(),
    skip_dirs: set[str] | frozenset[str] = frozenset(),
    base_levels: tuple[IgnoreLevel, ...] = (),
    skip_nested_repos: bool = False,
    keep_special: bool = True,
    within: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """Walk ``root`` as git would for untracked files: (non-directory paths, directories that could not be listed).

    Both lists hold root-relative posix paths. ``.gitignore`` files are honoured at every level, the deepest having
    the last word, after ``base_levels`` (outermost first). A directory that is ignored is not entered unless it
    holds ``tracked`` paths, which are always listed when present. ``.git`` entries and ``skip_dirs`` are never
    entered; with ``skip_nested_repos`` neither is an untracked directory holding its own ``.git``. Non-regular
    files (FIFOs, sockets, devices) are listed only with ``keep_special``. ``within`` limits the walk to these
    paths or directories ("" meaning everything).
    """
    tracked_dirs = parent_dirs(tracked)
    out: list[str] = []
    unlistable: list[str] = []
    # Each item: (directory relative to root, the ignore levels that apply in it, whether git ignores it).
    stack: list[tuple[str, tuple[IgnoreLevel, ...], bool]] = [("", base_levels, False)]
    while stack:
        rel_dir, levels, dir_ignored = stack.pop()
        abs_dir = root / rel_dir if rel_dir else root
        if not dir_ignored:
            spec = read_ignore_file(abs_dir / _IGNORE_NAME)
            if spec is not None:
                levels = levels + ((rel_dir, spec),)
        try:
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError as exc:
            log.debug("cannot list %s: %s", abs_dir, exc)
            unlistable.append(rel_dir)
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if rel in skip_dirs or (within is not None and not _leads_within(rel, within)):
                    continue
                ignored = dir_ignored or is_ignored(rel, True, levels)
                if rel not in tracked_dirs:
                    if ignored or (skip_nested_repos and os.path.lexists(os.path.join(entry.path, ".git"))):
                        continue
                stack.append((rel, levels, ignored))
            elif within is not None and not _is_within(rel, within):
                continue
            elif rel in tracked:
                out.append(rel)
            elif not dir_ignored and not is_ignored(rel, False, levels):
                if keep_special or _is_file_or_link(entry):
                    out.append(rel)
    out.sort()
    return out, unlistable


def is_ignored(rel: str, is_dir: bool, levels: tuple[IgnoreLevel, ...]) -> bool:
    """Whether the ignore ``levels`` exclude ``rel``: the innermost level with a matching pattern decides."""
    for base, spec in reversed(levels):
        if base:
            if not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1 :]
        else:
            sub = rel
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            return result.include
    return False


def read_ignore_file(path: Path) -> pathspec.GitIgnoreSpec | None:
    """The patterns of a gitignore-syntax file, or None when it does not exist or cannot be read."""
    import pathspec

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        log.warning("ignoring unreadable %s: %s", path, exc.strerror or exc)
        return None
    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())


def blob_ids(repo: pygit2.Repository) -> dict[str, str]:
    """Path -> hex blob id of each file as staged in the index.

    The id describes the staged content, so it names the work-tree file only while that file is unmodified
    (``repo.status()`` does not flag it); for a modified or untracked file hash the bytes with ``pygit2.hash``.
    """
    index = repo.index
    index.read(False)
    return {entry.path: str(entry.id) for entry in index if entry.mode != _GITLINK}


def attributes_mention(repo: pygit2.Repository, paths: list[str], name: str) -> bool:
    """Whether an attributes file that can apply to ``paths`` mentions the attribute ``name`` at all.

    The files looked at: ``.gitattributes`` in the work-tree root and in each directory holding one of ``paths``,
    ``info/attributes`` and the global attributes file. A macro that sets ``name`` must name it in its definition,
    so a False answer is exact and lets callers skip one ``get_attr`` call per file; many repositories have a
    ``.gitattributes`` only for line endings.
    """
    root = work_root(repo)
    candidates = [root / d / _ATTRIBUTES_NAME for d in {""} | parent_dirs(paths)]
    candidates.append(common_dir(repo) / "info" / "attributes")
    candidates.append(_global_git_file(repo, "core.attributesFile", "attributes"))
    for path in candidates:
        try:
            if name in path.read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:  # usually: there is no such file
            continue
    return False


def is_generated(repo: pygit2.Repository, path: str) -> bool:
    """Whether ``.gitattributes`` marks the repo-relative ``path`` as ``linguist-generated`` (set or ``=true``)."""
    import pygit2

    try:
        value = repo.get_attr(path, GENERATED_ATTRIBUTE)
    except (pygit2.GitError, ValueError) as exc:
        log.debug("cannot read attributes of %s: %s", path, exc)
        return False
    # A bare attribute comes back as True, "-attr" as False, "attr=value" as the string value.
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _repo_exclude_levels(repo: pygit2.Repository) -> tuple[IgnoreLevel, ...]:
    # Git's precedence, lowest first: core.excludesFile, then info/exclude, then the .gitignore files.
    levels = []
    for path in (_global_git_file(repo, "core.excludesFile", "ignore"), common_dir(repo) / "info" / "exclude"):
        spec = read_ignore_file(path)
        if spec is not None:
            levels.append(("", spec))
    return tuple(levels)


def _global_git_file(repo: pygit2.Repository, key: str, default_name: str) -> Path:
    """The file a ``core.*File`` setting names, or git's default ``$XDG_CONFIG_HOME/git/<default_name>``."""
    import pygit2

    try:
        configured = repo.config[key]
    except (KeyError, pygit2.GitError):
        configured = None
    if configured:
        return Path(os.path.expanduser(configured))
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(xdg, "git", default_name)


def parent_dirs(paths) -> set[str]:
    """Every directory above the given repo-relative paths ("a/b/c.py" -> "a/b", "a")."""
    dirs: set[str] = set()
    for path in paths:
        cut = path.rfind("/")
        while cut > 0:
            parent = path[:cut]
            if parent in dirs:
                break
            dirs.add(parent)
            cut = parent.rfind("/")
    return dirs


def _is_within(path: str, within: list[str] | None) -> bool:
    return within is None or any(not w or path == w or path.startswith(w + "/") for w in within)


def _leads_within(rel_dir: str, within: list[str]) -> bool:
    # A directory is worth entering when it lies under a wanted path or on the way to one.
    return any(not w or w == rel_dir or w.startswith(rel_dir + "/") or rel_dir.startswith(w + "/") for w in within)


def _is_file_or_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink() or entry.is_file(follow_symlinks=False)
    except OSError:
        return False


# -- hooks: where git looks for them, what a commit changed, whether a rebase is under way -----------------------

NULL_OID = "0" * 40  # what git passes for "no commit" (post-checkout after a clone)

# Variables a hook's environment may carry that are safe to keep: they tell git how to run, not where the repository
# is. GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_PREFIX and the like describe the git command that ran the hook and
# point child processes at the wrong place in a linked worktree (pre-commit's ``no_git_env`` learnt this).
_KEPT_GIT_ENV = frozenset({
    "GIT_EXEC_PATH", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY", "GIT_ASKPASS", "GIT_TRACE",
})


def no_git_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: this process's) without the ``GIT_*`` variables git sets for a hook."""
    env = os.environ if env is None else env
    return {
        k: v for k, v in env.items()
        if not k.startswith("GIT_") or k in _KEPT_GIT_ENV or k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }


@dataclass(frozen=True)
class HooksLocation:
    """Where git runs hooks from for one repository, and whether ``core.hooksPath`` moved it."""

    path: Path  # the directory git looks in (absolute)
    default: Path  # <common git dir>/hooks, where it looks without core.hooksPath
    configured: str | None  # core.hooksPath as written in the config, None when unset
    scope: str | None  # the config that sets it: "local", "global", "system", "worktree" (None when unknown)

    @property
    def custom(self) -> bool:
        """True when core.hooksPath points somewhere other than the default directory (another tool's)."""
        return self.configured is not None and self.path != self.default


def hooks_location(root: Path) -> HooksLocation:
    """Ask git where the hooks of the work tree at ``root`` live (``git rev-parse --git-path hooks``).

    git's own answer honours core.hooksPath (relative to the work-tree top, ``~`` expanded) and linked worktrees
    (they share the common dir's hooks). This is the one place localidx starts git, and only when hooks are
    installed, removed or listed, never from a hook. Raises LocalidxError when git is missing or fails.
    """
    path_out = _run_git(root, "rev-parse", "--git-path", "hooks", "--git-common-dir").splitlines()
    if len(path_out) != 2:
        raise LocalidxError(f"unexpected answer from `git rev-parse` in {root}: {path_out!r}")
    hooks, common = ((root / p).resolve() for p in path_out)  # relative answers are relative to the cwd, root
    configured = scope = None
    try:
        scope, _, configured = _run_git(root, "config", "--show-scope", "--get", "core.hooksPath").partition("\t")
    except LocalidxError:  # exit 1: not set (or git older than 2.26, which has no --show-scope)
        try:
            configured = _run_git(root, "config", "--get", "core.hooksPath") or None
        except LocalidxError:
            configured = None
    return HooksLocation(path=hooks, default=common / "hooks", configured=configured or None, scope=scope or None)


def git_dir(repo: pygit2.Repository) -> Path:
    """The git directory of this work tree: ``.git``, or ``<common dir>/worktrees/<name>`` for a linked one.

    Per-worktree state lives here: HEAD, ORIG_HEAD, the index and an in-progress rebase.
    """
    return Path(repo.path).resolve()


def rebase_in_progress(repo: pygit2.Repository) -> bool:
    """Whether this work tree is in the middle of a rebase (git keeps ``rebase-merge`` or ``rebase-apply``)."""
    gd = git_dir(repo)
    return (gd / "rebase-merge").is_dir() or (gd / "rebase-apply").is_dir()


def resolve_commit(repo: pygit2.Repository, rev: str | None) -> pygit2.Commit | None:
    """The commit ``rev`` (a hex id or a name such as ``HEAD`` or ``ORIG_HEAD``) names, or None."""
    import pygit2

    if not rev or rev == NULL_OID:
        return None
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def changed_paths(repo: pygit2.Repository, old: pygit2.Commit | None, new: pygit2.Commit) -> list[str]:
    """Repo-relative paths whose content differs between commits ``old`` and ``new`` (None: every path in ``new``).

    Both sides of a rename and deleted paths are included: the caller must drop the old path's rows too. That is
    why no rename detection (``find_similar``) runs: without it a rename is a delete plus an add, the same two
    paths, at no cost on a large diff.
    """
    diff = new.tree.diff_to_tree(swap=True) if old is None else repo.diff(old.tree, new.tree)
    paths: set[str] = set()
    for delta in diff.deltas:
        paths.add(delta.old_file.path)
        paths.add(delta.new_file.path)
    return sorted(paths)


def commit_paths(repo: pygit2.Repository, commit: pygit2.Commit) -> list[str]:
    """What ``commit`` changed against its first parent; for a root commit, every path in it."""
    parents = commit.parent_ids
    parent = resolve_commit(repo, str(parents[0])) if parents else None
    if parents and parent is None:
        # A shallow clone's boundary commit: its parent is not here, so only its whole tree is known.
        log.debug("parent of %s is missing; taking its whole tree", commit.id)
    return changed_paths(repo, parent, commit)


def last_head_move(repo: pygit2.Repository) -> tuple[str, str, str] | None:
    """(old id, new id, message) of the newest entry in HEAD's reflog, or None when there is none."""
    import pygit2

    try:
        entry = next(iter(repo.references["HEAD"].log()))
    except (KeyError, StopIteration, pygit2.GitError):
        return None
    return str(entry.oid_old), str(entry.oid_new), entry.message or ""


def _run_git(root: Path, *args: str) -> str:
    import subprocess

    try:
        proc = subprocess.run(["git", *args], cwd=root, env=no_git_env(), capture_output=True, text=True,
                              timeout=30)
    except FileNotFoundError:
        raise LocalidxError("git is not installed (or not on PATH); hooks need it") from None
    except subprocess.TimeoutExpired:
        raise LocalidxError(f"`git {' '.join(args)}` did not answer within 30 s") from None
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise LocalidxError(f"`git {' '.join(args)}` failed: {reason}")
    return proc.stdout.strip()
