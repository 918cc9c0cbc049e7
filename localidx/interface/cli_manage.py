"""The ``localidx`` commands that install, run and connect localidx's parts around an index: ``hooks``, ``hook-run``,
``daemon``, ``protocol``, ``mcp``, ``trust``, ``repos`` and ``cluster``.

Place in the flow: serve, beside ``cli.py``, which registers ``COMMANDS`` on its click group; the indexing and
query commands (``index``, ``status``, ``search``, ``context``, ``ask``, ``chunks``, ``eval``) are there. As thin as
``cli.py``: parse the arguments, call the library (imported inside each command), print.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from localidx.errors import NO_MATCH_EXIT, UsageError
from localidx.interface.console import echo_json as _echo_json
from localidx.interface.console import echo_warnings as _echo_warnings
from localidx.interface.console import root_or_none as _root_or_none
from localidx.interface.console import settings_for as _settings
from localidx.text.safe import printable as _p  # every plain printer: file names and messages on one line each


@click.group()
def hooks() -> None:
    """Git hooks that keep the index fresh after commit, checkout, merge and rebase (LOCALIDX=0 skips them)."""


def _hooks_root() -> Path:
    from localidx.discover import find_root

    root, in_git = find_root(Path.cwd())
    if not in_git:
        raise UsageError(f"{root} is not in a git repository; hooks need one")
    return root


def _print_hooks(report, title: str) -> None:
    click.echo(f"{title} {report.hooks_dir}")
    for hook in report.hooks:
        action = report.actions.get(hook.type)
        line = f"  {hook.type:<14} {action or hook.state}"
        if hook.legacy:
            line += f"  (runs {Path(hook.legacy).name} first)"
        if hook.python and not hook.python_exists:
            line += f"  (its interpreter {hook.python} is gone: run `localidx hooks install` again)"
        click.echo(line)


@hooks.command(name="install")
@click.option("--force", is_flag=True, help="Install even where core.hooksPath points (another tool's directory).")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def hooks_install(force: bool, as_json: bool) -> None:
    """Install post-commit, post-checkout, post-merge and post-rewrite hooks; a hook already there runs first."""
    import localidx.interface.githooks as githooks

    report = githooks.install(_hooks_root(), force=force)
    if as_json:
        _echo_json(report.to_dict())
        return
    _print_hooks(report, "localidx hooks in")
    click.echo("  each hook queues what changed and reindexes it in the background; LOCALIDX=0 skips them")
    if report.index_exists is False:
        click.echo("  no index yet: the first hook builds it in the background (`localidx index` builds it now)")


@hooks.command(name="uninstall")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def hooks_uninstall(as_json: bool) -> None:
    """Remove localidx's hooks and put back the hooks they chained."""
    import localidx.interface.githooks as githooks

    report = githooks.uninstall(_hooks_root())
    _echo_json(report.to_dict()) if as_json else _print_hooks(report, "localidx hooks removed from")


@hooks.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print the state of each hook as JSON.")
def hooks_status(as_json: bool) -> None:
    """Each hook: ours, chained (ours, running a previous hook first), foreign or missing."""
    import localidx.interface.githooks as githooks

    report = githooks.status(_hooks_root())
    if as_json:
        _echo_json(report.to_dict())
        return
    _print_hooks(report, "hooks dir")
    if report.core_hooks_path:
        click.echo(f"  core.hooksPath = {report.core_hooks_path}")
    if report.queued_events:
        click.echo(f"  {report.queued_events} hook event(s) waiting to be indexed")


@click.command(name="hook-run", hidden=True, context_settings={"ignore_unknown_options": True})
@click.option("--git-pid", type=int, default=None, help="Wait for this git process to exit first.")
@click.option("--pre-commit", "from_pre_commit", is_flag=True, help="Take the hook from pre-commit's variables.")
@click.argument("hook_type", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook_run(git_pid: int | None, from_pre_commit: bool, hook_type: str | None, args: tuple[str, ...]) -> None:
    """Run by the git hooks: queue HOOK_TYPE's event, or (without one) reindex what is queued. Always exits 0."""
    from localidx.interface.githooks import hook_run as run_hook

    run_hook(hook_type, list(args), git_pid=git_pid, from_pre_commit=from_pre_commit)


@click.group(name="daemon")
def daemon_group() -> None:
    """The background daemon: keeps the index current (watcher, git hooks) and answers searches with a warm model."""


def _here():
    from localidx.discover import find_root

    root, in_git = find_root(Path.cwd())
    return root, in_git, _settings(root)


@daemon_group.command(name="start")
def daemon_start() -> None:
    """Start this work tree's daemon in the background, or find the one running; prints its pid and socket."""
    from localidx.interface.client import start_daemon

    hello, started = start_daemon(*_here())
    what = "daemon started" if started else "daemon already running"
    click.echo(f"{what}: pid {hello['pid']}, socket {hello['daemon']['socket']}")


@daemon_group.command(name="stop")
def daemon_stop() -> None:
    """Stop this work tree's daemon and wait until it has exited."""
    from localidx.daemon.lifecycle import daemon_paths
    from localidx.interface.client import stop_daemon

    pid = stop_daemon(daemon_paths(*_here()))
    click.echo(f"daemon stopped (pid {pid})" if pid else "no daemon running")


@daemon_group.command(name="restart")
def daemon_restart() -> None:
    """Stop this work tree's daemon (if one runs) and start it again, with the settings this shell has now."""
    from localidx.daemon.lifecycle import daemon_paths
    from localidx.interface.client import start_daemon, stop_daemon

    root, in_git, settings = _here()
    old = stop_daemon(daemon_paths(root, in_git, settings))
    hello, _started = start_daemon(root, in_git, settings)
    was = f"stopped pid {old}, " if old else ""
    click.echo(f"daemon restarted: {was}pid {hello['pid']}, socket {hello['daemon']['socket']}")


@daemon_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the daemons as JSON.")
def daemon_list(as_json: bool) -> None:
    """Every daemon of yours that runs, over all work trees: work tree, pid, memory and idle time (longest idle
    first; at most `daemon_max_running` run at once). Looking does not keep them up."""
    from localidx.interface.client import list_daemons

    found = list_daemons()
    if as_json:
        _echo_json({"daemons": found})
        return
    if not found:
        click.echo("no daemons running")
        return
    for daemon in found:
        memory = daemon.get("memory") or {}
        writer = (daemon.get("writer") or {}).get("state", "?")
        click.echo(f"{daemon.get('pid'):>7}  {memory.get('rss_mb', 0):>7.0f} MB  idle {daemon.get('idle_s', 0):>6.0f} s"
                   f"  {writer:<9} {_p(str(daemon.get('root')))}")


@daemon_group.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's state as JSON.")
def daemon_status(as_json: bool) -> None:
    """Whether a daemon serves this work tree (or is starting) and what it is doing; exit status 1 when none runs.

    Files left by a daemon that crashed are removed."""
    from localidx.interface.client import probe

    found = probe(*_here())
    report = {"running": found.state in ("running", "starting"), "state": found.state, "socket": str(found.paths.socket),
              "status_file": str(found.paths.status), "log": str(found.paths.log)}
    if found.hello:
        report.update(found.hello["daemon"])
    elif found.status:
        report.update({key: found.status.get(key) for key in ("pid", "package_version", "protocol_version")})
    if found.cleaned is not None:
        report["removed_stale"] = {"pid": found.cleaned.get("pid")}
    if found.problem:
        report["problem"] = found.problem
    if as_json:
        _echo_json(report)
    elif found.state == "running" and found.hello:
        writer = report["writer"]
        queued = "everything" if writer["queued"] < 0 else writer["queued"]
        click.echo(f"running  pid {report['pid']}  localidx {report['package_version']} (protocol "
                   f"{report['protocol_version']})  up {report['uptime_s']:.0f} s")
        click.echo(f"  socket   {report['socket']}")
        click.echo(f"  writer   {writer['state']}, {queued} queued, {writer['pending_vectors']} vectors pending, "
                   f"{writer['runs']} runs")
        click.echo(f"  watcher  {report['watcher']}")
        click.echo(f"  log      {report['log']}")
    elif found.state == "running":
        click.echo(f"running  pid {report.get('pid')}, but {found.problem}")
    elif found.state == "starting":
        click.echo(f"starting  pid {report.get('pid')} ({found.problem})")
        click.echo(f"  socket   {report['socket']}")
    elif found.state == "unreachable":
        click.echo(f"unreachable: pid {report.get('pid')} is alive but does not answer on {report['socket']} "
                   f"({found.problem})")
    else:
        stale = f" (removed files left by pid {found.cleaned.get('pid')})" if found.cleaned is not None else ""
        click.echo(f"not running{stale}")
    if not report["running"]:
        sys.exit(1)


@daemon_group.command(name="run")
@click.option("--detached", is_flag=True, hidden=True, help="Started by `daemon start`: log to the file only.")
def daemon_run(detached: bool) -> None:
    """Serve this work tree in the foreground (for debugging and service managers); logs go to stderr too."""
    from localidx.daemon.start import run_daemon

    run_daemon(*_here(), log_to_stderr=not detached)


@daemon_group.command(name="logs")
@click.option("-n", "lines", type=click.IntRange(min=1), default=50, show_default=True, help="Lines to show.")
def daemon_logs(lines: int) -> None:
    """Show the end of the daemon's log."""
    from localidx.daemon.lifecycle import daemon_paths, log_tail

    log_path = daemon_paths(*_here()).log
    tail = log_tail(log_path, lines)
    if not tail:
        click.echo(f"no daemon log yet ({log_path})", err=True)
    for line in tail:
        click.echo(line)


@click.group(name="protocol")
def protocol_group() -> None:
    """The daemon's socket protocol."""


@protocol_group.command(name="schema")
def protocol_schema() -> None:
    """Print the protocol's machine-readable description (methods, params, results, errors) as JSON."""
    from localidx.protocol import schema

    _echo_json(schema())


@click.command(name="mcp")
@click.option("--repo", "repo", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Serve this repository instead of the one the current directory is in.")
def mcp_command(repo: Path | None) -> None:
    """Serve MCP over stdio for this repository: rag_search, rag_search_simple, rag_context, index_status and
    rag_search_global (every registered repository). Read-only; logs go to stderr."""
    from localidx.discover import find_root
    from localidx.interface.mcp_server import serve

    root, in_git = find_root(repo or Path.cwd())
    serve(root, in_git)


@click.command(name="trust", epilog="Exit status: 0 when the repository has a config file, 1 when it has none.")
@click.option("--show", is_flag=True, help="Say whether each config file is trusted and what it sets; change nothing.")
@click.option("--revoke", is_flag=True, help="Stop trusting this repository's config files.")
@click.option("--json", "as_json", is_flag=True, help="Print each file's state and its settings that need trust.")
def trust_command(show: bool, revoke: bool, as_json: bool) -> None:
    """Trust this repository's .localidx.toml and [tool.localidx] as they are now: let them set what reaches the
    network, credentials, files outside the work tree or more processes (the LLM, summarize, home, shared_index,
    workers over the cores, ...). Read the files first. Editing a file ends its trust."""
    from localidx import config
    from localidx.discover import find_root

    if show and revoke:
        raise UsageError("--show and --revoke do not go together")
    root, _in_git = find_root(Path.cwd())
    action = config.trust_report if show else config.revoke_repository if revoke else config.trust_repository
    report = action(root)
    if as_json:
        _echo_json({"root": str(root), "files": report})
    elif not report:
        click.echo(f"no .localidx.toml or [tool.localidx] in {_p(root)}: nothing to trust", err=True)
    for entry in [] if as_json else report:
        settings = ", ".join(f"{name} = {json.dumps(value)}" for name, value in entry["needs_trust"].items())
        state = {"trusted": "trusted", "untrusted": "not trusted",
                 "changed": "not trusted (changed since it was trusted)"}[entry["state"]]
        click.echo(f"{_p(entry['file'])}: {state}")
        click.echo(f"  sets what needs trust: {_p(settings)}" if settings else "  sets nothing that needs trust")
    if not report:
        sys.exit(NO_MATCH_EXIT)


@click.group(name="repos", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the registry's entries as JSON.")
@click.pass_context
def repos_group(ctx: click.Context, as_json: bool) -> None:
    """Every index on this machine (the per-user registry); repositories gone are dropped. `--all-repos` and MCP's
    rag_search_global read those shared with `localidx repos share`."""
    if ctx.invoked_subcommand is not None:
        return
    from localidx.index import registry

    found, warnings = registry.load(prune=True)
    _echo_warnings(warnings)
    if as_json:
        _echo_json({"registry": str(registry.registry_path()), "repos": [e.to_dict() for e in found]})
        return
    if not found:
        click.echo(f"no repositories registered yet ({registry.registry_path()}); `localidx index` registers one",
                   err=True)
        return
    width = max(len(e.name) for e in found)
    for e in found:
        indexed = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_indexed_at))
        shared = "shared" if e.shared else "not shared"
        click.echo(f"{_p(e.name):<{width}}  {_p(e.root)}  ({e.model}, indexed {indexed}, {shared})")


@repos_group.command(name="remove")
@click.argument("target")
def repos_remove(target: str) -> None:
    """Forget the repository named TARGET (or at the path TARGET); its index is left in place."""
    from localidx.index import registry

    entry = registry.remove(target)
    click.echo(f"removed {entry.name} ({entry.root}) from the registry; its index stays in {entry.index}")


@repos_group.command(name="share")
@click.argument("target")
def repos_share(target: str) -> None:
    """Let --all-repos and MCP's rag_search_global read the repository named TARGET (or at the path TARGET).
    Whatever asks them then gets its code: an agent working in any other repository included."""
    from localidx.index import registry

    entry = registry.share(target, True)
    click.echo(f"{_p(entry.name)} ({_p(entry.root)}) is shared for cross-repository search")


@repos_group.command(name="unshare")
@click.argument("target")
def repos_unshare(target: str) -> None:
    """Stop cross-repository search from reading the repository named TARGET (or at the path TARGET)."""
    from localidx.index import registry

    entry = registry.share(target, False)
    click.echo(f"{_p(entry.name)} ({_p(entry.root)}) is not shared for cross-repository search")


@click.group()
def cluster() -> None:
    """An organisation's repositories, indexed by a Ray job into a shared database that --all-repos reads
    (needs `pip install 'localidx[cluster]'` to write; reading needs nothing more)."""


@cluster.command(name="index")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "uri", required=True, help="The shared database: a path, s3://, gs://, az://... (storage "
              "credentials come from the environment).")
@click.option("--ray", "ray_address", default=None, help="The Ray cluster to run on (auto, ray://host:10001); "
              "default: a local instance.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Embedding workers (default: one per GPU, "
              "else one per CPU; a local instance gets this many CPUs).")
@click.option("--clones", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where each node keeps its checkouts (default: the user cache dir).")
@click.option("--prune", is_flag=True, help="Remove repositories no longer in the manifest from the shared index.")
@click.option("--json", "as_json", is_flag=True, help="Print the job's record as JSON.")
def cluster_index(manifest: Path, uri: str, ray_address: str | None, workers: int | None, clones: Path | None,
                  prune: bool, as_json: bool) -> None:
    """Index the repositories of MANIFEST (TOML: [[repo]] url/path, name, ref) into the shared database."""
    from localidx.cluster.manifest import load_manifest
    from localidx.cluster.pipeline import run_job

    specs = load_manifest(manifest)
    settings = _settings(_root_or_none())

    def progress(stage: str, **info) -> None:
        if not as_json:
            click.echo(f"cluster: {stage} {' '.join(f'{k}={v}' for k, v in info.items())}".rstrip(), err=True)

    stats = run_job(specs, uri, model=settings.embed_model, ray_address=ray_address, workers=workers,
                    clones=clones, prune=prune, progress=progress).to_dict()
    if as_json:
        _echo_json(stats)
        return
    click.echo(f"indexed {stats['repos']} repositories into {stats['uri']} ({stats['repos_changed']} changed, "
               f"{len(stats['repos_failed'])} failed): {stats['files_processed']} files chunked, "
               f"{stats['files_unchanged']} unchanged, {stats['files_deleted']} deleted")
    click.echo(f"  chunks: {stats['chunks_written']} written, {stats['chunks_deleted']} deleted, "
               f"{stats['chunks_embedded']} embedded, {stats['chunks_reused']} vectors reused")
    click.echo(f"  {stats['duration_s']:.1f} s ({stats['workers']} workers, {stats['gpus']} GPUs; pipeline "
               f"{stats['pipeline_s']:.1f} s, {stats['rate']} chunks/s; commit {stats['commit_s']:.1f} s, "
               f"indexes {stats['index_s']:.1f} s)")
    for failed in stats["repos_failed"]:
        click.echo(f"  failed: {failed['repo']}: {failed['reason']} (its rows stay as they were)")


@cluster.command(name="status")
@click.argument("uri")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def cluster_status(uri: str, as_json: bool) -> None:
    """What the shared database at URI holds: repositories, commits, rows, indexes (never a credential)."""
    from localidx.retrieve.shared_index import status

    report = status(uri)
    if as_json:
        _echo_json(report)
        return
    if not report["sets"]:
        click.echo(f"{report['uri']}: no organisation index here", err=True)
        return
    for entry in report["sets"]:
        click.echo(f"{report['uri']}  tables {entry['tables']}: {entry.get('chunks', 0)} chunks, version "
                   f"{entry.get('version', 0)}, indexes {', '.join(entry.get('indexes', [])) or 'none'}")
        for r in entry["repos"]:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["indexed_at"])) if r["indexed_at"] else "never"
            commit = (r["commit"] or "")[:12] or "-"
            click.echo(f"  {r['repo']}  {r['url']}@{r['ref']}  {commit}  {r['files'] or 0} files, "
                       f"{r['chunks'] or 0} chunks, indexed {when}  {r['status']}")


COMMANDS = (hooks, hook_run, daemon_group, protocol_group, mcp_command, trust_command, repos_group, cluster)
