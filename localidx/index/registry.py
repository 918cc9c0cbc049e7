"""The per-user registry of every index on this machine, so that cross-repository queries can find them all.

Place in the flow: beside the store. The indexer registers its work tree at the end of every successful pass;
``localidx repos``, ``search --all-repos``/``context --all-repos`` and the MCP tool ``rag_search_global`` read it.

The registry is one small JSON file, ``platformdirs.user_data_dir("localidx")/registry.json``; with
``LOCALIDX_HOME`` set, ``registry.json`` in that home, so each state home has its own (``LOCALIDX_REGISTRY`` names
another file)::

    {"version": 1, "repos": [{"name": "app", "root": "/src/app", "index": "/src/app/.git/localidx",
                              "model": "...", "registered_at": 1718000000.0, "last_indexed_at": 1718000300.0,
                              "root_id": "2049:1311:1000", "shared": false}]}

Invariants:
- One entry per work-tree root (absolute path). ``name`` is the root's directory name, made unique with ``~2``,
  ``~3``... when another root already has it; an entry keeps its name for as long as it is listed.
- ``index`` is the index's state dir (``IndexPaths.state``); the work tree's catalog lives under it.
- Writers take an exclusive ``flock`` on ``registry.json.lock``, re-read, and replace the file atomically (a temp file
  in the same directory, then ``os.replace``): concurrent indexers never lose each other's entries, and readers, who
  take no lock, see either the old file or the new one.
- A registry that cannot be read (corrupt, not ours) reads as empty with one warning line, never a traceback; the
  next registration rewrites it.
- Registering an unchanged entry writes nothing: an incremental run that changed nothing only reads the file.
- Cross-repository search (``open_all``) reads an entry only when the user shared it (``localidx repos share``; off
  when registered): it hands whoever asks (an agent through MCP, which a prompt in any repository can steer) the
  code of every repository it reads. And only when it is still the repository that was registered: its index
  (state dir and work-tree dir) belongs to this user and no one else may write it, and its work tree is the same
  directory (``root_id``: device, inode and owner, recorded at registration), not one re-created at the same path,
  by someone else perhaps, after the first was deleted (``Entry.refused``). A re-created work tree is a new
  repository: the next ``localidx index`` there registers it again, not shared.
- A repository answers once: a work tree reached through a symlink is registered under its resolved root, and of
  several shared work trees at the same commit (clones, worktrees: ``repository_identity``) cross-repository search
  reads the one indexed last and says which it skipped.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from localidx.errors import UsageError

log = logging.getLogger(__name__)

REGISTRY_ENV = "LOCALIDX_REGISTRY"
HOME_ENV = "LOCALIDX_HOME"
FORMAT_VERSION = 1


@dataclass
class Entry:
    """One registered index."""

    name: str
    root: str  # the work tree, absolute
    index: str  # the state dir that holds its index
    model: str  # the embedding model id it was indexed with
    registered_at: float
    last_indexed_at: float
    root_id: str = ""  # "device:inode:owner" of the work tree when it was registered ("": an older registry's entry)
    shared: bool = False  # read by cross-repository search (``localidx repos share``)

    def to_dict(self) -> dict:
        return asdict(self)

    def index_paths(self):
        """The ``IndexPaths`` of this entry's index (the state dir as registered, whatever LOCALIDX_HOME says now)."""
        from localidx.paths import index_paths

        return index_paths(Path(self.root), True, home=self.index)

    def gone(self) -> str | None:
        """Why this entry no longer points at an index ("its work tree is gone", ...), or None."""
        if not Path(self.root).is_dir():
            return f"its work tree {self.root} is gone"
        if not self.index_paths().worktree.is_dir():
            return f"its index under {self.index} is gone"
        return None

    def refused(self) -> str | None:
        """Why this entry must not be read now, or None: its work tree is not the directory that was registered
        (re-created at the same path), or its index is another user's, or others may write it."""
        try:
            now = root_identity(Path(self.root))
        except OSError as exc:
            return f"its work tree {self.root} cannot be read ({exc.strerror or exc})"
        if self.root_id and now != self.root_id:
            return (f"its work tree {self.root} is not the directory that was indexed (re-created since, perhaps by "
                    f"another user); `localidx index` there registers it again")
        for path in (Path(self.index), self.index_paths().worktree):
            try:
                st = os.stat(path)
            except OSError as exc:
                return f"its index {path} cannot be read ({exc.strerror or exc})"
            if st.st_uid != os.geteuid():
                return f"its index {path} belongs to another user (uid {st.st_uid})"
            if stat.S_IMODE(st.st_mode) & 0o022:
                return f"its index {path} may be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
        return None


def root_identity(root: Path) -> str:
    """"device:inode:owner" of a work tree: another directory made at the same path has another."""
    st = os.stat(root)
    return f"{st.st_dev}:{st.st_ino}:{st.st_uid}"


def registry_path() -> Path:
    """The registry file: ``$LOCALIDX_REGISTRY``; else, with ``$LOCALIDX_HOME`` set, ``registry.json`` in that state
    home (each home lists, prunes and shares its own indexes: a terminal with another home neither sees nor removes
    them); else ``registry.json`` in the per-user data dir."""
    override = os.environ.get(REGISTRY_ENV)
    if override:
        return Path(override).expanduser()
    home = os.environ.get(HOME_ENV, "")
    if home:
        return Path(home).expanduser().absolute() / "registry.json"
    import platformdirs

    return Path(platformdirs.user_data_dir("localidx")) / "registry.json"


# -- reading and writing the file -----------------------------------------------------------------------------


def _parse_entry(item) -> Entry | None:
    if not isinstance(item, dict):
        return None
    try:
        entry = Entry(name=str(item["name"]), root=str(item["root"]), index=str(item["index"]),
                      model=str(item.get("model", "")), registered_at=float(item.get("registered_at", 0.0)),
                      last_indexed_at=float(item.get("last_indexed_at", 0.0)), root_id=str(item.get("root_id", "")),
                      shared=item.get("shared") is True)
    except (KeyError, TypeError, ValueError):
        return None
    return entry if entry.name and os.path.isabs(entry.root) and entry.index else None


def _read(path: Path) -> tuple[list[Entry], list[str]]:
    """The entries in the file and what was wrong with it (one line each); a missing file is an empty registry."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"cannot read the repository registry {path} ({exc.strerror or exc}); treating it as empty"]
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return [], [f"the repository registry {path} is corrupt; treating it as empty (the next `localidx index` "
                    f"rewrites it)"]
    if not isinstance(data, dict) or not isinstance(data.get("repos"), list):
        return [], [f"the repository registry {path} is not a localidx registry; treating it as empty (the next "
                    f"`localidx index` rewrites it)"]
    entries, bad = [], 0
    for item in data["repos"]:
        entry = _parse_entry(item)
        if entry is None:
            bad += 1
        else:
            entries.append(entry)
    warnings = [f"the repository registry {path}: ignored {bad} unreadable entries"] if bad else []
    return entries, warnings


def _write(path: Path, entries: list[Entry]) -> None:
    import tempfile  # here: every index run reads the registry, few write it

    data = {"version": FORMAT_VERSION, "repos": [e.to_dict() for e in sorted(entries, key=lambda e: e.name)]}
    fd, tmp = tempfile.mkstemp(prefix=".registry-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the registry's write lock (a sibling file: ``os.replace`` swaps the registry's inode under a reader).
    The per-user data dir that holds it is made private (0700); a directory ``LOCALIDX_REGISTRY`` or
    ``LOCALIDX_HOME`` names is only created (0700) when missing. The registry itself is 0600 (``mkstemp``)."""
    from localidx.safety.private import private_dir

    if not (os.environ.get(REGISTRY_ENV) or os.environ.get(HOME_ENV)) or not path.parent.exists():
        private_dir(path.parent)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _unique_name(wanted: str, taken: set[str]) -> str:
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}~{n}" in taken:
        n += 1
    return f"{wanted}~{n}"


# -- the public operations ------------------------------------------------------------------------------------


def register(root: Path, index_paths, model_id: str, changed: bool = True) -> Entry | None:
    """Record that the work tree at ``root`` has an index at ``index_paths`` (its ``IndexPaths``) for ``model_id``.

    ``changed`` says the pass changed the index: ``last_indexed_at`` moves only then. An entry that would not change
    is not written (no lock taken). A work tree re-created at a registered path (another ``root_id``) is registered
    anew: not shared. Never raises: a registry that cannot be written is logged as a warning and indexing goes on.
    Returns the entry, or None when it could not be recorded."""
    path = registry_path()
    root_s = str(Path(root).resolve())
    index_s = str(Path(index_paths.state))

    try:
        root_id = root_identity(Path(root_s))

        def unchanged(entries: list[Entry]) -> Entry | None:
            for e in entries:
                if (e.root == root_s and e.index == index_s and e.model == model_id and e.root_id == root_id
                        and not changed):
                    return e
            return None

        current, _ = _read(path)
        same = unchanged(current)
        if same is not None:
            return same
        with _locked(path):
            entries, warnings = _read(path)  # again, under the lock: another process may have written meanwhile
            for warning in warnings:
                log.warning("%s", warning)
            same = unchanged(entries)
            if same is not None:
                return same
            now = round(time.time(), 3)
            mine = next((e for e in entries if e.root == root_s), None)
            if mine is None:
                name = _unique_name(Path(root_s).name or root_s, {e.name for e in entries})
                mine = Entry(name=name, root=root_s, index=index_s, model=model_id, registered_at=now,
                             last_indexed_at=now, root_id=root_id)
                entries.append(mine)
            else:
                if mine.root_id != root_id:  # another directory at the path: a new repository, not shared
                    if mine.root_id:
                        mine.registered_at, mine.shared = now, False
                    mine.root_id = root_id
                mine.index, mine.model = index_s, model_id
                if changed:
                    mine.last_indexed_at = now
            _write(path, entries)
            return mine
    except OSError as exc:
        log.warning("could not update the repository registry %s: %s", path, exc.strerror or exc)
        return None


def load(prune: bool = True) -> tuple[list[Entry], list[str]]:
    """The registered indexes, by name, and warnings (one line each) about the registry.

    With ``prune``, entries whose work tree or index is gone are dropped from the result and from the file, each
    with a warning saying so."""
    path = registry_path()
    entries, warnings = _read(path)
    if not prune:
        return sorted(entries, key=lambda e: e.name), warnings
    gone = [(e, why) for e in entries if (why := e.gone())]
    if gone:
        try:
            with _locked(path):
                fresh, _ = _read(path)
                drop = {e.root for e, _ in gone}
                kept = [e for e in fresh if e.root not in drop or not e.gone()]
                if len(kept) != len(fresh):
                    _write(path, kept)
        except OSError as exc:
            warnings.append(f"could not update the repository registry {path}: {exc.strerror or exc}")
        warnings.extend(f"removed {e.name} from the repository registry: {why}" for e, why in gone)
        entries = [e for e in entries if e.root not in {g.root for g, _ in gone}]
    return sorted(entries, key=lambda e: e.name), warnings


def entries(prune: bool = True) -> list[Entry]:
    """``load``'s entries; its warnings go to the log."""
    found, warnings = load(prune=prune)
    for warning in warnings:
        log.warning("%s", warning)
    return found


def remove(target: str) -> Entry:
    """Remove the entry named ``target``, or else the one whose work tree is the path ``target``; returns it.
    Raises UsageError when none matches. The index itself is left alone."""
    path = registry_path()
    with _locked(path):
        found, _ = _read(path)
        match = _match(found, target)
        _write(path, [e for e in found if e.root != match.root])
    return match


def _match(found: list[Entry], target: str) -> Entry:
    match = next((e for e in found if e.name == target), None)
    if match is None:
        resolved = str(Path(target).expanduser().resolve())
        match = next((e for e in found if e.root == resolved), None)
    if match is None:
        known = ", ".join(e.name for e in found) or "none"
        raise UsageError(f"no registered repository named or at {target!r} (registered: {known})")
    return match


def share(target: str, shared: bool = True) -> Entry:
    """Let cross-repository search read the entry named ``target`` (or at the path ``target``), or (``shared``
    False) stop it; returns the entry. UsageError when none matches."""
    path = registry_path()
    with _locked(path):
        found, _ = _read(path)
        match = _match(found, target)
        if match.shared != shared:
            match.shared = shared
            _write(path, found)
    return match


def open_all(settings_loader: Callable | None = None, embedder=None) -> tuple[list[tuple[str, object]], list[str]]:
    """Open every registered index that cross-repository search may read, read-only: ``([(name, Index), ...],
    warnings)``.

    Only shared entries (``share``) are opened, and only those ``Entry.refused`` finds nothing against (checked
    before anything under the work tree or the index is read); the others are named in a warning. Each repository's
    settings come from ``settings_loader(root)`` (default ``load_settings``). Repositories indexed with the same
    model share one embedder (``embedder``, when given, serves those whose model id is its own). An index that
    cannot be opened is skipped with a warning. The caller closes the indexes (``Index.close``)."""
    from localidx.store.index import open_index_at

    if settings_loader is None:
        from localidx.config import load_settings as settings_loader
    found, warnings = load(prune=True)
    private = [e for e in found if not e.shared]
    if private:
        warnings.append(f"{len(private)} registered repositor{'y is' if len(private) == 1 else 'ies are'} not shared "
                        f"for cross-repository search (`localidx repos` lists them; `localidx repos share NAME` "
                        f"shares one)")
    embedders: dict[str, object] = {}
    if embedder is not None:
        embedders[embedder.model_id] = embedder
    opened: list[tuple[str, object]] = []
    answering: dict[str, str] = {}  # repository identity -> the name of the entry that answers for it
    # The latest indexed of several clones answers for them (its index is the freshest); the order of the answer's
    # sources is the registry's own (by name) all the same.
    chosen = sorted(found, key=lambda e: -e.last_indexed_at)
    for entry in chosen:
        if not entry.shared:
            continue
        why = entry.refused()
        if why is not None:
            warnings.append(f"skipped {entry.name}: {why}")
            continue
        identity = repository_identity(Path(entry.root))
        if identity is not None and identity in answering:
            warnings.append(f"skipped {entry.name}: the same repository at the same commit as "
                            f"{answering[identity]} ({identity[:12]}), which answers for both")
            continue
        if identity is not None:
            answering[identity] = entry.name
        try:
            settings = settings_loader(Path(entry.root))
            shared = embedders.get(entry.model) or embedders.get(f"name:{settings.embed_model}")
            if shared is None:
                from localidx.embed import get_embedder

                shared = get_embedder(settings.embed_model, threads=settings.embed_threads or None)
                embedders[shared.model_id] = shared
                embedders[f"name:{settings.embed_model}"] = shared
            opened.append((entry.name, open_index_at(entry.index_paths(), settings, read_only=True, embedder=shared)))
        except Exception as exc:  # one broken repository must not take the others down
            warnings.append(f"skipped {entry.name} ({entry.root}): {type(exc).__name__}: {exc}")
    order = {e.name: n for n, e in enumerate(found)}
    return sorted(opened, key=lambda item: order[item[0]]), warnings


def repository_identity(root: Path) -> str | None:
    """What makes two registered work trees one repository for cross-repository search: the commit checked out
    (HEAD's id), or None outside git or before a first commit (never merged with another).

    Why HEAD and not the git common dir or the first root commit: a commit id hashes its whole history, so two
    clones, or two worktrees of one clone, at the same HEAD hold the same repository at the same commit, and
    answering from both only repeats every match; the root commit adds nothing to that, and it names the clone's
    project rather than its content (a fork or another branch, whose files differ, would be merged with it), and the
    common dir would merge worktrees on different branches. Uncommitted edits are not compared: the entry indexed
    last answers for the others. One path (a symlink, ``..``) is one entry already: ``register`` keys entries by
    the resolved root."""
    from localidx.gitrepo import open_repo

    repo = open_repo(root)
    if repo is None:
        return None
    try:
        return None if repo.head_is_unborn else str(repo.head.target)
    except Exception:  # noqa: BLE001 - a HEAD pygit2 cannot read: not merged with anything
        return None
    finally:
        repo.free()
