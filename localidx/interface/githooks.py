"""Git hooks that keep the index fresh: installing them politely, and turning what git did into one reindex pass.

Where it sits: beside the daemon, in front of the single writer. A git command fires a hook rendered from
``hooks/hook.sh.tmpl``; the script writes an *event* (hook type, arguments, the commits involved, post-rewrite's
stdin) into ``<git dir>/localidx-hooks/`` and leaves a detached waiter that starts ``localidx hook-run`` once that git
process has exited (callers other than the script pass ``--git-pid`` and the runner waits itself). ``process_queue``
takes every queued event, works out with pygit2 which paths changed, and asks the daemon to reindex them
(``index/reindex``) or, with no daemon (or one that does not answer at once), runs one incremental pass of the indexer:
``localidx.interface.backend``'s "fallback" policy.

Invariants:

- A hook never fails or slows git. The script returns in milliseconds and exits with the status of the hook it
  chains, never with one of ours; ``hook-run`` always exits 0 and logs to ``<state>/worktrees/<key>/hooks.log``.
- One git command, at most one pass. Events are written synchronously by the script, so every event of a command
  is queued before that command exits; runners wait for the exit and one runner (``runner.lock``) drains them all.
  A rebase fires post-checkout, one post-commit per replayed commit and post-rewrite, all from one process: the
  post-commits are skipped in the script and the rest is one pass over the end state. An amend fires post-commit
  and post-rewrite(amend) from one ``git commit`` process: one pass over the union of their paths.
- While a rebase is stopped (a conflict, an ``edit``), events wait for its post-rewrite; the work tree is in flux.
- Only files carrying ``MARKER`` are ours. A hook that was there before is kept as ``<hook>.localidx-legacy``, run
  first with the same arguments and stdin, and put back by ``uninstall``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shlex
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localidx import gitrepo
from localidx.errors import LocalidxError, UsageError

log = logging.getLogger(__name__)

HOOK_TYPES = ("post-commit", "post-checkout", "post-merge", "post-rewrite")
MARKER = "# localidx-hook v1"
_MARKER_PREFIX = "# localidx-hook v"  # any version: an older install is still ours to update or remove
LEGACY_SUFFIX = ".localidx-legacy"
TEMPLATE = "hook.sh.tmpl"
QUEUE_DIR = "localidx-hooks"  # in the work tree's git dir, where the hook script can find it without Python
_EVENT_HEADER = "localidx-event 1"
_EVENT_PREFIX = "event."

MAX_LISTED_PATHS = 2000  # beyond this a full (stat-based) pass is cheaper than filtering by a long path list
GIT_WAIT_S = 3600.0  # the longest a runner waits for the git command that queued its event
REBASE_SETTLE_S = 2.0  # a rebase that only fast-forwards ends right after its post-checkout: give it this long
LOCK_WAIT_S = 300.0  # how long a pass waits for another indexer (a manual `localidx index`) to finish
STALE_EVENT_S = 60.0  # an event still without its "end" line after this long was left by a killed script
LOG_MAX_BYTES = 1024 * 1024


class HooksPathError(LocalidxError):
    """core.hooksPath hands the hooks to another tool; installing there needs --force."""


# -- installing -----------------------------------------------------------------------------------------------


@dataclass
class HookFile:
    """One hook type in the hooks directory, as ``localidx hooks status`` reports it."""

    type: str
    path: str
    state: str  # "ours", "chained" (ours, running a previous hook first), "foreign" or "missing"
    legacy: str | None = None  # the chained previous hook, when there is one
    python: str | None = None  # the interpreter our hook runs localidx with
    python_exists: bool | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class HooksReport:
    """What install, uninstall and status found or did, hook by hook."""

    hooks_dir: str
    core_hooks_path: str | None
    hooks: list[HookFile] = field(default_factory=list)
    actions: dict[str, str] = field(default_factory=dict)  # hook type -> what install/uninstall did
    queued_events: int = 0
    index_exists: bool | None = None  # install: whether there is an index to keep fresh yet

    def to_dict(self) -> dict:
        out = asdict(self)
        out["hooks"] = [h.to_dict() for h in self.hooks]
        return out


def render(hook_type: str, python: str) -> str:
    """The hook script for ``hook_type``, running localidx with the interpreter at ``python``."""
    from importlib.resources import files

    if hook_type not in HOOK_TYPES:
        raise UsageError(f"unknown hook type {hook_type!r}; localidx installs {', '.join(HOOK_TYPES)}")
    template = files("localidx").joinpath("hooks", TEMPLATE).read_text(encoding="utf-8")
    return template.replace("@HOOK_TYPE@", shlex.quote(hook_type)).replace("@INSTALL_PYTHON@", shlex.quote(python))


def is_ours(path: Path) -> bool:
    """Whether the hook file at ``path`` was written by localidx (it carries the marker line)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024).decode("utf-8", errors="replace")
    except OSError:  # missing, a directory, unreadable: not something we wrote
        return False
    return any(line.startswith(_MARKER_PREFIX) for line in head.splitlines())


def status(root: Path) -> HooksReport:
    """The state of each hook type in the hooks directory git uses for the work tree at ``root``."""
    location = gitrepo.hooks_location(root)
    report = HooksReport(hooks_dir=str(location.path), core_hooks_path=location.configured)
    for hook_type in HOOK_TYPES:
        report.hooks.append(_inspect(location.path, hook_type))
    repo = gitrepo.open_repo(root)
    if repo is not None:
        report.queued_events = len(_event_files(gitrepo.git_dir(repo) / QUEUE_DIR))
    return report


def install(root: Path, force: bool = False, python: str | None = None) -> HooksReport:
    """Install localidx's four hooks into the directory git uses, chaining any hook already there.

    Installing again rewrites only hooks whose text changed (another interpreter, a newer template). Refuses when
    core.hooksPath points at another tool's directory, unless ``force``; refuses, before writing anything, when a
    foreign hook and a kept previous hook would collide.
    """
    location = gitrepo.hooks_location(root)
    if location.custom and not force:
        raise HooksPathError(_hooks_path_recipe(location))
    python = python or sys.executable
    report = HooksReport(hooks_dir=str(location.path), core_hooks_path=location.configured)
    plan: list[tuple[str, Path, str, str]] = []  # (type, hook path, text, action)
    for hook_type in HOOK_TYPES:
        path = location.path / hook_type
        text = render(hook_type, python)
        legacy = _legacy(path)
        if is_ours(path):
            action = "unchanged" if _read(path) == text else "updated"
        elif os.path.lexists(path):
            if os.path.lexists(legacy):
                raise LocalidxError(
                    f"{path} and {legacy} both exist and neither is localidx's; move one of them away, then run "
                    f"`localidx hooks install` again")
            action = "chained"
        else:
            action = "installed"
        plan.append((hook_type, path, text, action))
    location.path.mkdir(parents=True, exist_ok=True)
    for hook_type, path, text, action in plan:
        if action == "chained":
            os.rename(path, _legacy(path))
        if action != "unchanged":
            _write_executable(path, text)
        report.actions[hook_type] = action
        report.hooks.append(_inspect(location.path, hook_type))
    try:
        from localidx.config import load_settings

        report.index_exists = _has_index(root, load_settings(root))
    except LocalidxError:  # a broken config: the hooks are in; the first pass will report it in hooks.log
        report.index_exists = None
    return report


def uninstall(root: Path) -> HooksReport:
    """Remove localidx's hooks and put back the hooks they chained; foreign hooks are left alone."""
    location = gitrepo.hooks_location(root)
    report = HooksReport(hooks_dir=str(location.path), core_hooks_path=location.configured)
    for hook_type in HOOK_TYPES:
        path = location.path / hook_type
        legacy = _legacy(path)
        if is_ours(path):
            os.remove(path)
            action = "removed"
        elif os.path.lexists(path):
            report.actions[hook_type] = "foreign, left alone"
            report.hooks.append(_inspect(location.path, hook_type))
            continue
        else:
            action = "not installed"
        if os.path.lexists(legacy):
            os.rename(legacy, path)
            action = "restored the previous hook" if action == "not installed" else "removed, previous hook restored"
        report.actions[hook_type] = action
        report.hooks.append(_inspect(location.path, hook_type))
    return report


def _hooks_path_recipe(location: gitrepo.HooksLocation) -> str:
    scope = location.scope or "local"
    flag = "" if scope == "local" else f" --{scope}"
    return (f"core.hooksPath is set to {location.configured!r} ({scope} config): another tool manages this "
            f"repository's hooks there; run `git config{flag} --unset core.hooksPath` to use {location.default}, "
            f"or `localidx hooks install --force` to install into {location.path}")


def _inspect(hooks_dir: Path, hook_type: str) -> HookFile:
    path = hooks_dir / hook_type
    legacy = _legacy(path)
    legacy_text = str(legacy) if os.path.lexists(legacy) else None
    if is_ours(path):
        python = _installed_python(path)
        return HookFile(hook_type, str(path), "chained" if legacy_text else "ours", legacy_text, python,
                        bool(python) and os.access(python, os.X_OK))
    if os.path.lexists(path):
        return HookFile(hook_type, str(path), "foreign", legacy_text)
    return HookFile(hook_type, str(path), "missing", legacy_text)


def _installed_python(path: Path) -> str | None:
    for line in _read(path).splitlines():
        if line.startswith("install_python="):
            words = shlex.split(line.partition("=")[2])
            return words[0] if words else None
    return None


def _legacy(path: Path) -> Path:
    return path.with_name(path.name + LEGACY_SUFFIX)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _write_executable(path: Path, text: str) -> None:
    # Written beside the target and renamed over it, so git never runs a half-written hook.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# -- events: what a git command did ---------------------------------------------------------------------------


@dataclass
class HookEvent:
    """One hook invocation, as the hook script (or ``record``) wrote it down at the time."""

    type: str
    head: str = ""  # HEAD when the hook ran (post-commit, post-merge, post-rewrite)
    orig: str = ""  # ORIG_HEAD when the hook ran (post-merge, post-rewrite)
    args: list[str] = field(default_factory=list)  # the hook's arguments
    rewritten: list[tuple[str, str]] = field(default_factory=list)  # post-rewrite's (old, new) pairs
    file: Path | None = None

    def to_text(self) -> str:
        lines = [_EVENT_HEADER, self.type, self.head, self.orig, " ".join(self.args)]
        lines += [f"{old} {new}" for old, new in self.rewritten]
        return "\n".join(lines + ["end"]) + "\n"


def parse_event(text: str, file: Path | None = None) -> HookEvent | None:
    """The event in ``text``, or None while it is incomplete (no ``end`` line yet) or not an event."""
    lines = text.split("\n")
    if len(lines) < 6 or lines[0] != _EVENT_HEADER or "end" not in lines[5:]:
        return None
    end = lines.index("end", 5)
    pairs = []
    for line in lines[5:end]:
        words = line.split()
        if len(words) >= 2:  # "old new [extra]": git may append extra info after the two ids
            pairs.append((words[0], words[1]))
    return HookEvent(type=lines[1], head=lines[2], orig=lines[3], args=lines[4].split(), rewritten=pairs, file=file)


def parse_rewritten(text: str) -> list[tuple[str, str]]:
    """post-rewrite's stdin as (old, new) pairs."""
    return [(w[0], w[1]) for w in (line.split() for line in text.splitlines()) if len(w) >= 2]


def event_paths(repo, event: HookEvent) -> list[str] | None:
    """The repo-relative paths an event may have changed in the work tree; None means "could be anything".

    - post-commit: the commit against its first parent (a root commit: every file in it).
    - post-checkout: old HEAD against new HEAD. A file checkout (flag 0) does not say which files it restored, and
      ``git status`` cannot tell either (a restored file looks clean), so it is None: a full pass, which compares
      every file's stat with the catalog and rereads only what changed. So is a checkout from nothing (a clone).
    - post-merge: ORIG_HEAD against HEAD; a squash merge moves no ref, so None.
    - post-rewrite rebase: the branch before the rebase (ORIG_HEAD) against its end state, once.
      post-rewrite amend: each rewritten commit against its replacement (the post-commit that the same
      ``git commit --amend`` fired covers the rest, in the same pass).
    """
    kind = event.type
    if kind == "post-commit":
        head = gitrepo.resolve_commit(repo, event.head or "HEAD")
        return gitrepo.commit_paths(repo, head) if head is not None else None
    if kind == "post-checkout":
        if len(event.args) < 3 or event.args[2] != "1":
            return None
        return _between(repo, event.args[0], event.args[1])
    if kind == "post-merge":
        if event.args[:1] == ["1"]:
            return None
        return _between(repo, event.orig or "ORIG_HEAD", event.head or "HEAD")
    if kind == "post-rewrite":
        if event.args[:1] == ["rebase"]:
            if event.orig:
                return _between(repo, event.orig, event.head or "HEAD")
            if event.rewritten:
                return _between(repo, event.rewritten[-1][0], event.head or event.rewritten[-1][1])
            return None
        pairs = event.rewritten
        if not pairs:  # pre-commit does not pass the list on: the amend is HEAD's newest reflog entry
            move = gitrepo.last_head_move(repo)
            if move is None or not move[2].startswith("commit (amend)"):
                return None
            pairs = [(move[0], move[1])]
        paths: set[str] = set()
        for old, new in pairs:
            changed = _between(repo, old, new)
            if changed is None:
                return None
            paths.update(changed)
        return sorted(paths)
    log.warning("unknown hook type %r in an event; reindexing everything", kind)
    return None


def _between(repo, old_rev: str, new_rev: str) -> list[str] | None:
    new = gitrepo.resolve_commit(repo, new_rev)
    if new is None:
        return None
    old = gitrepo.resolve_commit(repo, old_rev)
    if old is None:  # a null id (nothing checked out before) or a commit that is gone: take the whole tree
        return None
    return gitrepo.changed_paths(repo, old, new)


def record(repo, hook_type: str, args: list[str], rewritten: list[tuple[str, str]] | None = None) -> Path | None:
    """Queue an event for ``hook_type`` as the hook script would, naming HEAD and ORIG_HEAD now.

    For callers other than our script: pre-commit, or another hook manager running ``localidx hook-run TYPE``.
    Returns the event file, or None when the hook has nothing to add (a per-commit hook during a rebase).
    """
    if hook_type not in HOOK_TYPES:
        raise UsageError(f"unknown hook type {hook_type!r}; expected one of {', '.join(HOOK_TYPES)}")
    if hook_type in ("post-commit", "post-merge") and gitrepo.rebase_in_progress(repo):
        return None
    event = HookEvent(type=hook_type, args=list(args), rewritten=list(rewritten or []))
    if hook_type != "post-checkout":
        event.head = _rev_id(repo, "HEAD")
    if hook_type in ("post-merge", "post-rewrite"):
        event.orig = _rev_id(repo, "ORIG_HEAD")
    queue = gitrepo.git_dir(repo) / QUEUE_DIR
    queue.mkdir(exist_ok=True)
    fd, name = tempfile.mkstemp(dir=queue, prefix=_EVENT_PREFIX)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(event.to_text())
    return Path(name)


def pre_commit_event(env: dict[str, str]) -> tuple[str, list[str]]:
    """(hook type, git's arguments) for a run under the pre-commit framework, which passes them as variables."""
    if "PRE_COMMIT_CHECKOUT_TYPE" in env:
        return "post-checkout", [env.get("PRE_COMMIT_FROM_REF", ""), env.get("PRE_COMMIT_TO_REF", ""),
                                 env["PRE_COMMIT_CHECKOUT_TYPE"]]
    if "PRE_COMMIT_IS_SQUASH_MERGE" in env:
        return "post-merge", [env["PRE_COMMIT_IS_SQUASH_MERGE"]]
    if "PRE_COMMIT_REWRITE_COMMAND" in env:
        return "post-rewrite", [env["PRE_COMMIT_REWRITE_COMMAND"]]
    return "post-commit", []


def _rev_id(repo, rev: str) -> str:
    commit = gitrepo.resolve_commit(repo, rev)
    return str(commit.id) if commit is not None else ""


def _event_files(queue: Path) -> list[Path]:
    try:
        return sorted(p for p in queue.iterdir() if p.name.startswith(_EVENT_PREFIX))
    except OSError:
        return []


def _read_events(queue: Path) -> list[HookEvent]:
    """The complete events queued, oldest first; drops events a killed script left unfinished."""
    found: list[tuple[int, HookEvent]] = []
    now = time.time_ns()
    for path in _event_files(queue):
        try:
            mtime = path.stat().st_mtime_ns
            event = parse_event(path.read_text(encoding="utf-8", errors="replace"), path)
        except OSError:
            continue
        if event is not None:
            found.append((mtime, event))
        elif now - mtime > STALE_EVENT_S * 1e9:
            log.warning("dropping an unfinished event file %s", path.name)
            path.unlink(missing_ok=True)
    found.sort(key=lambda item: item[0])
    return [event for _mtime, event in found]


# -- running: one pass for everything queued ------------------------------------------------------------------


def hook_run(hook_type: str | None, args: list[str], git_pid: int | None = None, from_pre_commit: bool = False,
             stdin_text: str | None = None) -> int:
    """``localidx hook-run``: never raises, never prints, always returns 0 (the exit status for git).

    Without ``hook_type`` (how our hook script calls it, already detached): process the queue of this work tree.
    With one, or ``from_pre_commit``: queue the event now, then leave the work to a detached runner.
    """
    # Records go to hooks.log once the state dir is known, and nowhere before: never to git's terminal.
    logging.getLogger("localidx").addHandler(logging.NullHandler())
    clean = gitrepo.no_git_env()
    os.environ.clear()
    os.environ.update(clean)
    try:
        if os.environ.get("LOCALIDX") == "0":
            return 0
        repo = gitrepo.open_repo(Path.cwd())
        if repo is None:
            return 0
        root = gitrepo.work_root(repo)
        _log_to_state(root)
        if hook_type is None and not from_pre_commit:
            _detach()
            process_queue(root, git_pid=git_pid)
            return 0
        if from_pre_commit:
            hook_type, args = pre_commit_event(os.environ)
        elif hook_type == "post-rewrite" and stdin_text is None and sys.stdin is not None and not sys.stdin.isatty():
            stdin_text = sys.stdin.read()
        rewritten = parse_rewritten(stdin_text) if stdin_text else None
        if record(repo, hook_type, args, rewritten) is not None:
            _spawn_runner(root, git_pid or _git_ancestor_pid())
    except Exception:  # a hook must not fail git: note it where the user can look, and carry on
        log.exception("hook-run failed")
    return 0


def process_queue(root: Path, git_pid: int | None = None, settings=None) -> int:
    """Wait for the git command ``git_pid`` to exit, then reindex what every queued event changed; returns passes.

    Only one runner works at a time per work tree; one that finds another at work leaves the queue to it.
    """
    repo = gitrepo.open_repo(root)
    if repo is None:
        return 0
    queue = gitrepo.git_dir(repo) / QUEUE_DIR
    if git_pid:
        wait_for_exit(git_pid, GIT_WAIT_S)
    passes = 0
    while True:
        with _RunnerLock(queue) as held:
            if not held:
                return passes
            passes += _drain(repo, root, queue, settings)
        # An event queued after the last look, whose runner then found the lock held and left: look again.
        events = _read_events(queue)
        if not events or _rebase_waiting(repo, events):
            return passes


def is_idle(root: Path) -> bool:
    """True when no event waits in this work tree's queue and no runner is at work (for tests and benchmarks)."""
    repo = gitrepo.open_repo(root)
    if repo is None:
        return True
    queue = gitrepo.git_dir(repo) / QUEUE_DIR
    if not queue.is_dir():
        return True
    if _event_files(queue):
        return False
    with _RunnerLock(queue) as held:
        return held


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait until process ``pid`` (not our child) has exited; False when it is still running after ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):  # not Linux, or an old kernel: poll
        fd = None
    if fd is not None:
        import select

        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(timeout * 1000))
        finally:
            os.close(fd)
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return False


def _drain(repo, root: Path, queue: Path, settings) -> int:
    passes = 0
    while True:
        events = _read_events(queue)
        if not events:
            return passes
        if _rebase_waiting(repo, events):
            log.info("a rebase is in progress: %d event(s) wait for its end", len(events))
            return passes
        try:
            _reindex(repo, root, events, settings)
        except Exception:
            log.exception("reindexing after %s failed", _reason(events))
        passes += 1
        # Dropped even when the pass failed, so that one bad event cannot fail every later pass.
        for event in events:
            if event.file is not None:
                event.file.unlink(missing_ok=True)


def _rebase_waiting(repo, events: list[HookEvent]) -> bool:
    """Whether to leave ``events`` queued: a rebase is stopped midway and its post-rewrite has not come yet."""
    if any(e.type == "post-rewrite" and e.args[:1] == ["rebase"] for e in events):
        return False  # the rebase is ending: git removes its state right after this hook
    deadline = time.monotonic() + REBASE_SETTLE_S
    while gitrepo.rebase_in_progress(repo):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


def _reason(events: list[HookEvent]) -> str:
    return "+".join(dict.fromkeys(e.type for e in events))[:64]


def _reindex(repo, root: Path, events: list[HookEvent], settings) -> None:
    from localidx.config import load_settings
    from localidx.interface.backend import Backend

    settings = settings or load_settings(root)
    paths: set[str] | None = set()
    for event in events:
        try:
            changed = event_paths(repo, event)
        except Exception as exc:  # a corrupt or partial repository: fall back to comparing everything
            log.warning("cannot diff for %s (%s); reindexing everything", event.type, exc)
            changed = None
        if changed is None:
            paths = None
            break
        paths.update(changed)
    reason = _reason(events)
    if paths is not None and not paths:
        log.info("index pass skipped: reason=%s changed nothing", reason)
        return
    if paths is not None and (len(paths) > MAX_LISTED_PATHS or not _has_index(root, settings)):
        paths = None  # too many paths to filter by, or no index yet: build it whole, not from a few files
    listed = "all" if paths is None else str(len(paths))
    started = time.perf_counter()
    # A running daemon is handed the paths (queued, not waited for); without one, or when it does not answer at once,
    # this process runs the pass, so a change is never lost.
    backend = Backend(root, True, settings, daemon="fallback")
    stats = backend.index(only=sorted(paths) if paths is not None else None, wait=False, wait_s=LOCK_WAIT_S,
                          reason=reason)
    if backend.via == "daemon":
        log.info("index pass: reason=%s paths=%s via=daemon", reason, listed)
        return
    log.info("index pass: reason=%s paths=%s via=index files_processed=%d files_deleted=%d chunks_written=%d "
             "%.2f s", reason, listed, stats["files_processed"], stats["files_deleted"], stats["chunks_written"],
             time.perf_counter() - started)


def _has_index(root: Path, settings) -> bool:
    from localidx.paths import index_paths
    from localidx.store.catalog import lists_files

    return lists_files(index_paths(root, True, settings.home).catalog)


class _RunnerLock:
    """A non-blocking ``flock`` on ``<queue>/runner.lock``; entering yields whether it was taken."""

    def __init__(self, queue: Path):
        self.path = queue / "runner.lock"
        self._fd: int | None = None

    def __enter__(self) -> bool:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _detach() -> None:
    # Our own session: a terminal closing or a Ctrl-C in it does not stop a pass halfway.
    try:
        os.setsid()
    except OSError:  # already a session leader
        pass


def _spawn_runner(root: Path, git_pid: int | None) -> None:
    import subprocess

    command = [sys.executable, "-m", "localidx", "hook-run"]
    if git_pid:
        command += ["--git-pid", str(git_pid)]
    subprocess.Popen(command, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def _git_ancestor_pid() -> int | None:
    """The nearest ancestor process that is git (Linux), so a runner started via pre-commit waits for it too."""
    pid = os.getppid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            return None
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        if name == "git":
            return pid
        fields = stat[stat.rfind(")") + 2 :].split()
        pid = int(fields[1])
        if pid <= 1:
            return None
    return None


def _log_to_state(root: Path) -> None:
    """Send localidx's log records to ``hooks.log`` in the work tree's state dir (never to a terminal)."""
    from localidx.config import load_settings
    from localidx.paths import index_paths

    try:
        home = load_settings(root).home
    except LocalidxError:
        home = os.environ.get("LOCALIDX_HOME", "")
    path = index_paths(root, True, home).worktree / "hooks.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass
    from localidx.safety.redact import LogFilter

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(LogFilter())  # no secret an error message carried reaches the log
    package = logging.getLogger("localidx")
    package.addHandler(handler)
    package.setLevel(logging.INFO)
