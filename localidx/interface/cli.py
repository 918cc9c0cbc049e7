"""The ``localidx`` command line: thin click commands over the library.

Each command parses its arguments, calls one library function and prints. Heavy imports (tree-sitter, the chunker)
happen inside the commands, so ``localidx --help`` and hook calls start fast. Errors a user can cause are
``LocalidxError``s and print as one line with a non-zero exit; anything else is reported as an internal error
(exit 3) with the traceback only under ``LOCALIDX_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import click

from localidx import __version__
from localidx.errors import NO_MATCH_EXIT, UsageError
from localidx.interface.cli_manage import COMMANDS
from localidx.interface.console import echo_json as _echo_json
from localidx.interface.console import echo_warnings as _echo_warnings
from localidx.interface.console import error_exit, glob_from_here, parse_language, print_search
from localidx.interface.console import parse_kinds as _parse_kinds
from localidx.interface.console import root_or_none as _root_or_none
from localidx.interface.console import settings_for as _settings
from localidx.interface.console import text_args as _text_args
from localidx.text.safe import printable as _p  # every plain printer: file names and messages on one line each


def _backend(root: Path, in_git: bool, settings, no_daemon: bool = False, starts: bool = True):
    """The work tree's operations as the CLI does them: through its daemon when one runs (a warm model, no lancedb
    import here); when none runs, one is started in the background for the next command while this one does its
    work itself (``starts``; never under CI, with ``daemon = "running"`` or for ``index``); ``--no-daemon`` and
    ``daemon = "never"``: this process only (``localidx.interface.backend.command_policy``)."""
    from localidx.interface.backend import Backend, command_policy

    return Backend(root, in_git, settings, daemon=command_policy(settings, no_daemon, starts))


def _say_if_started(backend) -> None:
    if backend.started:
        click.echo("localidx: started this work tree's daemon in the background: the next commands answer from it "
                   "(`localidx daemon stop` stops it; --no-daemon or daemon = \"never\" starts none)", err=True)


_NO_DAEMON = click.option("--no-daemon", is_flag=True, help="Do the work in this process: use no daemon and start "
                          "none (the setting daemon = \"never\" does this always).")


def _repo_relative(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{path} is outside the repository at {root}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="localidx")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A local-first code indexer: chunk, index and search the repository you are in.

    search, context, ask, status and chunks answer through the work tree's daemon, which keeps the index, the
    model and the chunker warm. When none runs, the command answers by itself and then starts one in the background
    for the next (not under CI); the daemon stops after an hour without use. --no-daemon, or daemon = "never" in
    .localidx.toml or LOCALIDX_DAEMON=never, keeps every command in its own process."""
    from localidx.safety.private import restrict_umask

    if ctx.invoked_subcommand != "cluster":  # an organisation's shared index is meant to be read by others
        restrict_umask()  # what localidx writes about your code is yours alone (files 0600, directories 0700)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the chunk records as JSON.")
@click.option("--max-tokens", type=int, default=None, help="Split chunks over this many tokens.")
@_NO_DAEMON
def chunks(paths: tuple[Path, ...], as_json: bool, max_tokens: int | None, no_daemon: bool) -> None:
    """Show how files are chunked: one line per chunk (lines, kind, tokens, symbol)."""
    from localidx.discover import find_root

    for path in paths:
        _check_file_argument(path)
    records = []
    backends: dict = {}
    for path in paths:
        # Each path is chunked as part of its own repository (the one it is in, not the current directory's), by
        # that work tree's daemon when one runs.
        root, in_git = find_root(path.absolute().parent)
        if root not in backends:
            if max_tokens is not None:
                _settings(root, max_tokens=max_tokens)  # a bad --max-tokens is said before any file is read
            backends[root] = _backend(root, in_git, _settings(root), no_daemon)
        rel = _repo_relative(root, path.absolute())
        result = backends[root].chunks([rel], max_tokens=max_tokens)["files"][0]
        if result["skipped"]:
            click.echo(f"{_p(rel)}: skipped ({result['skipped']})", err=True)
            continue
        if as_json:
            records.extend(result["chunks"])
            continue
        click.echo(f"{_p(rel)}  ({result['language']}, {len(result['chunks'])} chunks)")
        for c in result["chunks"]:
            label = c["symbol"] or c["title"]
            click.echo(f"  {_p(rel)}:{c['start_line']}-{c['end_line']}  {c['kind']:<9} {c['token_count']:>5} tok  "
                       f"{_p(label)}")
    for backend in backends.values():
        _say_if_started(backend)
    if as_json:
        _echo_json(records)


def _check_file_argument(path: Path) -> None:
    """UsageError unless ``path`` is a regular file (after symlinks): never open a FIFO, a device or a loop."""
    import errno

    from localidx.discover.root import file_kind

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{path}: a symlink loop") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise UsageError(f"{path}: no such file") from None
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    kind = file_kind(mode)
    if kind == "a directory":
        raise UsageError(f"{path} is a directory; give files (or run `localidx index --dry-run {path}`)")
    if kind != "a file":
        raise UsageError(f"{path} is {kind}, not a regular file")


PROGRESS_S_ENV = "LOCALIDX_PROGRESS_S"  # seconds between progress lines when stderr is not a terminal (default 10)


class _Progress:
    """Renders the indexer's progress events on stderr: one rewritten line on a terminal; otherwise (a log, an IDE
    task, CI) a line at each phase change and, while a phase runs, the latest state at least every
    ``LOCALIDX_PROGRESS_S`` seconds (a ticker thread repeats it when the indexer is inside one long step); and the
    backend's ``daemon`` event (a running daemon does the run) as a line of its own. ``close`` stops the ticker."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self._phase = ""  # the event name of the running phase (chunk, embed)
        self._state = ""  # its latest line, repeated by the ticker
        self._last = ""  # the last line printed
        self._printed_at = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        try:
            self.interval = max(float(os.environ.get(PROGRESS_S_ENV, "") or 10.0), 0.05)
        except ValueError:
            raise UsageError(f"{PROGRESS_S_ENV} must be a number of seconds, not "
                             f"{os.environ.get(PROGRESS_S_ENV)!r}") from None

    def _line(self, text: str) -> None:
        with self._lock:
            if text != self._last:  # a phase's last state can arrive twice (after a model call, after its commit)
                click.echo(text, err=True)
            self._last, self._printed_at = text, time.monotonic()

    def _show(self, text: str, final: bool = False, phase: str = "") -> None:
        if self.quiet:
            return
        if self.tty:
            from localidx.interface.console import echo

            echo(f"\r{_p(text):<78}", err=True, nl=final, color=True)  # its carriage return is kept, nothing else
            return
        changed = phase != self._phase
        self._phase, self._state = ("", "") if final else (phase, text)
        if final or changed or time.monotonic() - self._printed_at >= self.interval:
            self._line(text)
        if self._state and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="localidx-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(min(self.interval / 4, 1.0)):
            state = self._state
            if state and time.monotonic() - self._printed_at >= self.interval:
                self._line(f"{state} ({time.monotonic() - self.started:.0f} s in)")

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()

    def __call__(self, event: str, **data) -> None:
        if event == "daemon":
            if not self.quiet:
                click.echo(f"indexing through the daemon (pid {data['pid']})", err=True)
        elif event in ("repair", "rebuild", "switched"):
            self._show(f"{event}: {data['message']}" if event == "repair" else data["message"], final=True)
        elif event == "scan":
            skipped = f" ({data['skipped']} skipped by name or rule)" if data["skipped"] else ""
            self._show(f"{data['files']} files{skipped}: {data['changed']} new or changed to read, "
                       f"{data['deleted']} deleted", final=True)
        elif event == "chunk":
            done, total = data["done"], data["total"]
            self._show(f"chunking {done}/{total} files", final=done == total, phase=event)
        elif event == "written":
            self._show(f"{data['chunks']} chunks written: searchable now (BM25)", final=True)
        elif event == "embed":
            done, total, rate = data["done"], data["total"], data["rate"]
            eta = f", ETA {int((total - done) / rate)} s" if rate > 0 and done < total else ""
            self._show(f"embedding {done}/{total} chunks ({rate:.1f}/s{eta})", final=done == total, phase=event)


@cli.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Report what indexing would do, writing nothing.")
@click.option("--rebuild", is_flag=True, help="Drop this work tree's index and build it again.")
@click.option("--no-embed", is_flag=True, help="Write chunks (BM25 works) and leave embedding for a later run.")
@click.option("--wait", "wait_s", type=float, default=0.0, help="Seconds to wait for another indexer to finish.")
@click.option("--include-kinds", default=None, help="Dry run: count only these chunk kinds (comma-separated).")
@click.option("--limit-files", type=click.IntRange(min=1), default=None, help="Dry run: stop after this many files.")
@click.option("--json", "as_json", is_flag=True, help="Print the run's record (or the dry-run report) as JSON on "
              "stdout; progress still goes to stderr (-q: none).")
@click.option("--workers", type=click.IntRange(min=0), default=None, help="Processes to chunk with (0: every core).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--no-daemon", is_flag=True, help="Index in this process even when a daemon runs (it holds the "
              "index: the command then waits --wait seconds, or says who holds it).")
def index(path: Path | None, dry_run: bool, rebuild: bool, no_embed: bool, wait_s: float, include_kinds: str | None,
          limit_files: int | None, as_json: bool, workers: int | None, quiet: bool, no_daemon: bool) -> None:
    """Index the repository (or only PATH inside it): chunk what changed, embed what is new."""
    from localidx.discover import find_root
    from localidx.index.dryrun import dry_run as run_dry

    target = path or Path.cwd()
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory")
    root, in_git = find_root(target if target.is_dir() else target.parent)
    only = None if target.resolve() == root.resolve() else [_repo_relative(root, target)]
    kinds = _parse_kinds(include_kinds)
    settings = _settings(root, workers=workers)
    if dry_run:
        report = run_dry(root, settings, only=only, include_kinds=kinds, limit_files=limit_files)
        _echo_json(report.to_dict()) if as_json else _print_dry_run(report)
        return
    if kinds or limit_files:
        raise UsageError("--include-kinds and --limit-files only apply to --dry-run")
    # A running daemon holds the write lock: it runs the update (and always embeds) and answers with the run's record.
    # Progress goes to stderr with --json too: the record is stdout's, and a long run is not silent.
    progress = _Progress(quiet)
    try:
        stats = _backend(root, in_git, settings, no_daemon, starts=False).index(
            only=only, rebuild=rebuild, embed=not no_embed, wait_s=wait_s, progress=progress)
    finally:
        progress.close()
    if as_json:
        _echo_json(stats)
        return
    failed = f", {stats['files_failed']} failed" if stats.get("files_failed") else ""
    click.echo(f"indexed {root}: {stats['files_processed']} files chunked, {stats['files_unchanged']} unchanged, "
               f"{stats['files_skipped']} skipped{failed}; {stats['files_deleted']} deleted")
    click.echo(f"  chunks: {stats['chunks_written']} written, {stats['chunks_deleted']} deleted, "
               f"{stats['chunks_embedded']} embedded, {stats['chunks_reused']} vectors reused, "
               f"{stats['chunks_pending']} waiting for vectors")
    # Each figure says what it measures: chunking and writing (embedding inline included) and embedding alone are
    # times of their own; the run's rate divides its written chunks by the whole run, the embedding rate by embedding.
    rates = []
    if stats["chunks_written"] and stats["duration_s"]:
        rates.append(f"{stats['chunks_written'] / stats['duration_s']:.0f} chunks/s over the whole run")
    if stats["rate"]:
        rates.append(f"{stats['rate']:.0f} chunks/s while embedding")
    click.echo(f"  {stats['duration_s']:.2f} s in all (chunking and writing {stats['write_s']:.2f} s, embedding "
               f"{stats['embed_s']:.2f} s of it){': ' + ', '.join(rates) if rates else ''}")
    if stats.get("rebuilt"):
        click.echo(f"  rebuilt: a new index replaced the old one (generation {stats['generation']})")
    if stats.get("repairs"):
        click.echo(f"  repaired: {'; '.join(stats['repairs'])}")
    problems = stats.get("failed_files") or []
    if problems or stats["errors"]:
        paths = {p["path"] for p in problems} | {e["path"] for e in stats["errors"]}
        click.echo(f"  {len(paths)} files had errors ({len(stats['errors'])} error chunks, {len(problems)} failed "
                   f"stages): `localidx status` lists them")


@cli.command(epilog="Exit status: 0 when something is indexed (READY, STALE, INDEXING), 1 when nothing is yet (EMPTY), "
             "2 when the index is DAMAGED (`localidx index` repairs it) or the settings are bad, 3 for a bug.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@_NO_DAEMON
def status(as_json: bool, no_daemon: bool) -> None:
    """Where the index is, what it holds, and whether it is up to date (READY, STALE, EMPTY, INDEXING, DAMAGED)."""
    from localidx.discover import find_root

    root, in_git = find_root(Path.cwd())
    backend = _backend(root, in_git, _settings(root), no_daemon)
    report = backend.status()
    _say_if_started(backend)
    report.pop("daemon", None)  # the same report either way; `localidx daemon status` shows the daemon
    if as_json:
        _echo_json(report)
    else:
        _print_status(root, report)
    if report["state"] == "DAMAGED":
        sys.exit(2)
    if report["state"] == "EMPTY":
        sys.exit(NO_MATCH_EXIT)


def _print_status(root: Path, report: dict) -> None:
    click.echo(f"{report['state']}  {_p(root)}")
    click.echo(f"  index   {report['index']}")
    click.echo(f"  model   {report['model']}")
    click.echo(f"  files   {report['files']}   chunks {report['chunks']}   "
               f"embedded {report['chunks_with_vectors']} ({100 * report['embedding_progress']:.0f}%)")
    if report.get("chunks_pending"):
        since = f" since {report['pending_since']}" if report.get("pending_since") else ""
        click.echo(f"  pending {report['chunks_pending']} chunks without vectors{since} (run `localidx index`)")
    for title, key in (("kinds", "chunks_by_kind"), ("languages", "chunks_by_language")):
        if report[key]:
            click.echo(f"  {title:<7} " + ", ".join(f"{k} {v}" for k, v in report[key].items()))
    if report["changed_files"] or report["deleted_files"]:
        click.echo(f"  changed since indexed: {len(report['changed_files'])} files, "
                   f"deleted: {len(report['deleted_files'])} (run `localidx index`)")
    run = report["last_run"]
    if report.get("last_error"):
        click.echo(f"  the daemon's last update failed: {_p(report['last_error'])}")
    if run:
        click.echo(f"  last run: {run['files_processed']} files chunked, {run['chunks_embedded']} embedded, "
                   f"{run['duration_s']} s")
    if report.get("skipped_by_reason"):
        click.echo("  skipped " + ", ".join(f"{k} {v}" for k, v in report["skipped_by_reason"].items()))
    for err in report["errors"][:20]:
        click.echo(f"  error chunk  {_p(err['path'])}:{err['lines'][0]}-{err['lines'][1]}  {_p(err['reason'])}")
    for problem in report.get("failed_files", [])[:20]:
        click.echo(f"  failed  {_p(problem['path'])}  {problem['stage']}: {_p(problem['reason'])}")
    for line in report.get("damage", []):
        remedy = "" if "localidx index" in line else " (run `localidx index`)"
        click.echo(f"  damaged: {_p(line)}{remedy}")
    if report["state"] == "EMPTY" and report.get("nothing_to_index"):
        click.echo(f"  {report['nothing_to_index']}")
    elif report["state"] == "EMPTY":
        click.echo("  nothing indexed yet: run `localidx index`")


def _print_dry_run(report) -> None:
    click.echo(f"Dry run of {report.root}{'' if report.in_git else ' (not a git repository)'}: nothing written")
    click.echo(f"  files processed  {report.files_processed}  ({report.bytes / 1e6:.2f} MB, {report.symbols} symbols)")
    click.echo(f"  files skipped    {report.files_skipped}")
    for reason, count in report.skipped_by_reason.items():
        click.echo(f"    {reason:<16} {count}")
    click.echo(f"  chunks           {report.chunks}")
    for kind, count in report.chunks_by_kind.items():
        click.echo(f"    {kind:<16} {count}")
    click.echo("  by language")
    for language, count in report.chunks_by_language.items():
        click.echo(f"    {language:<16} {count}")
    if report.errors:
        click.echo(f"  error chunks     {len(report.errors)}")
        for err in report.errors[:20]:
            click.echo(f"    {_p(err['path'])}: {_p(err['reason'])}")
    if report.invalid_utf8_files:
        click.echo(f"  invalid UTF-8 (bytes replaced): {len(report.invalid_utf8_files)} files")
    if report.redactions:
        click.echo(f"  secrets redacted {report.redactions}")
    click.echo(f"  duration         {report.duration_s:.2f} s  ({report.files_per_s} files/s, {report.mb_per_s} MB/s)")
    if report.skipped_files:
        click.echo("  skipped files")
        for item in report.skipped_files[:50]:
            click.echo(f"    {_p(item['path'])}  ({item['reason']})")
        if len(report.skipped_files) > 50:
            click.echo(f"    ... and {len(report.skipped_files) - 50} more (--json lists all)")


@cli.command(epilog="Exit status: 0 when something matched, 1 when nothing did, 2 for bad arguments, no index or a "
             "damaged one, 3 for a bug.")
@click.argument("query", nargs=-1, required=True)
@click.option("-k", "k", type=click.IntRange(min=1, max=100), default=10, show_default=True, help="Matches to show.")
@click.option("--mode", type=click.Choice(["hybrid", "vector", "bm25"]), default="hybrid", show_default=True)
@click.option("--lang", "language", default=None,
              help="Only this language: a name, alias or extension (python, ts, c++, markdown, ...).")
@click.option("--path", "path_glob", default=None, help="Only paths matching this glob (gitignore style).")
@click.option("--kind", default=None, help="Only this chunk kind (function, method, class, ...).")
@click.option("--all-repos", is_flag=True, help="Search every repository shared in the per-user registry "
              "(`localidx repos share`).")
@click.option("--files", "files", is_flag=True, help="Rank files instead: the k best files, from the best 100 "
              "matches (\"which file do I open\").")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Highlight the query's terms (auto: on a terminal, unless NO_COLOR is set).")
@click.option("--json", "as_json", is_flag=True, help="Print {\"root\": ..., \"matches\": [...]} as JSON (paths from "
              "the repository's root).")
@click.option("--vimgrep", is_flag=True, help="One path:line:column:text line per match, for editors' quickfix lists.")
@_NO_DAEMON
def search(query: tuple[str, ...], k: int, mode: str, language: str | None, path_glob: str | None, kind: str | None,
           all_repos: bool, files: bool, color: str, as_json: bool, vimgrep: bool, no_daemon: bool) -> None:
    """Search the index for QUERY (the remaining words, quoted or not): BM25 and vectors fused; prints
    path:start-end (from the current directory), symbol, score, the query's similarity to the chunk, and the lines
    that matched; --path globs are read from the current directory too (with --files:
    one line per file, its best match and how many matches it holds). A match counts when a query word matched or
    its similarity clears the model's floor; "weak" says when only meaning matched."""
    from localidx.discover import find_root

    query = " ".join(query)
    query, language, path_glob, kind = _text_args(query, language, path_glob, kind)
    if kind:
        _parse_kinds(kind)
    language = parse_language(language)
    if all_repos:
        from localidx.retrieve.across import search_all_repos

        response = search_all_repos(query, _settings(_root_or_none()), k=k, mode=mode, language=language,
                                    path_glob=path_glob, kind=kind, files=files)
    else:
        root, in_git = find_root(Path.cwd())
        backend = _backend(root, in_git, _settings(root), no_daemon)
        response = backend.search(query, k=k, mode=mode, language=language,
                                  path_glob=glob_from_here(path_glob, root), kind=kind, files=files)
        response = {"root": str(root), **response}
        _say_if_started(backend)
    print_search(response, as_json, files, mode, query, color, vimgrep)


_CONTEXT_OPTIONS = [
    click.option("--profile", default=None, help="Retrieval profile: balanced (default), conservative, aggressive, "
                 "legacy, or one of .localidx.toml's [profiles.*]."),
    click.option("--max-tokens", type=int, default=None, help="The most tokens (cl100k) the pack may take: the "
                 "instructions, question, code, file list and call relations together (200..128000; default: the "
                 "profile's, 3000 in balanced)."),
    click.option("--top-k", type=int, default=None, help="Candidates kept from search (clamped to 1..40)."),
    click.option("--turn", "turns", multiple=True, help="An earlier turn of the conversation, oldest first; "
                 "repeat it. A follow-up question borrows their terms."),
    click.option("--locale", default=None, help="The answer's language tag for the instructions (default en)."),
    click.option("--lang", "language", default=None,
                 help="Only this language: a name, alias or extension (python, ts, c++, markdown, ...)."),
    click.option("--path", "path_glob", default=None, help="Only paths matching this glob (gitignore style)."),
    click.option("--kind", default=None, help="Only this chunk kind (function, method, class, ...)."),
    click.option("--all-repos", is_flag=True, help="Every repository shared in the per-user registry "
                 "(`localidx repos share`)."),
    _NO_DAEMON,
]


def _context_options(func):
    for option in reversed(_CONTEXT_OPTIONS):
        func = option(func)
    return func


def _build_pack(question: str, profile, max_tokens, top_k, turns, locale, language, path_glob, kind,
                all_repos: bool, no_daemon: bool = False) -> dict:
    """The context pack: from every registered repository, from this work tree's daemon, or in-process."""
    from localidx.discover import find_root

    question, language, path_glob, kind, profile, locale = _text_args(question, language, path_glob, kind, profile,
                                                                      locale)
    turns = _text_args(*turns)
    language = parse_language(language)
    options = {"profile": profile, "max_tokens": max_tokens, "top_k": top_k,
               "conversation_context": list(turns) or None, "locale": locale, "language": language,
               "path_glob": path_glob, "kind": kind}
    if all_repos:
        from localidx.retrieve.context import build_context_all_repos

        return build_context_all_repos(question, settings=_settings(_root_or_none()), **options)
    root, in_git = find_root(Path.cwd())
    backend = _backend(root, in_git, _settings(root), no_daemon)
    pack = backend.context(question, **{**options, "path_glob": glob_from_here(path_glob, root)})
    _say_if_started(backend)
    return pack


def _report_pack(pack: dict) -> None:
    from localidx.errors import NOT_READY_ONE, NOT_READY_WARNINGS

    warnings = pack.get("warnings", [])
    if pack.get("noResultsReason") == "INDEX_NOT_READY":
        from localidx.errors import IndexNotReady

        # The advice is the error line; it is said once, not also as a warning.
        _echo_warnings([w for w in warnings if w not in NOT_READY_WARNINGS])
        raise IndexNotReady(next((w for w in warnings if w in NOT_READY_WARNINGS), NOT_READY_ONE))
    _echo_warnings(warnings)
    if pack.get("noResults"):
        click.echo("localidx: no matches for this question", err=True)


@cli.command(epilog="Exit status: 0 when the pack holds a match, 1 when nothing matched, 2 for bad arguments, no "
             "index or a damaged one, 3 for a bug.")
@click.argument("question", nargs=-1, required=True)
@_context_options
@click.option("--json", "as_json", is_flag=True, help="Print the whole response (matches, augmentedPrompt, "
              "instructions, appliedModules, warnings, ...) as JSON.")
def context(question: tuple[str, ...], profile, max_tokens, top_k, turns, locale, language, path_glob, kind,
            all_repos: bool, no_daemon: bool, as_json: bool) -> None:
    """Build a context pack for QUESTION (the remaining words, quoted or not): the question plus the code that answers it, cited as path:lines, within
    a token budget. Plain output is the augmented prompt, ready to pipe into any LLM."""
    if kind:
        _parse_kinds(kind)
    pack = _build_pack(" ".join(question), profile, max_tokens, top_k, turns, locale, language, path_glob, kind,
                       all_repos, no_daemon)
    if as_json:
        _echo_json(pack)
        if pack.get("noResultsReason") == "INDEX_NOT_READY":
            sys.exit(2)  # IndexNotReady's exit code; the JSON above says why
    else:
        _report_pack(pack)
        click.echo(pack["augmentedPrompt"])
    if pack.get("noResults") or not pack.get("matches"):
        sys.exit(NO_MATCH_EXIT)


@cli.command(epilog="Exit status: 0 when answered (or the pack printed instead), 1 when nothing matched (the model "
             "is not asked), 2 for bad arguments, no index, a damaged one or an LLM that failed, 3 for a bug.")
@click.argument("question", nargs=-1, required=True)
@_context_options
@click.option("--json", "as_json", is_flag=True, help="Print {answer, error, pack, citations, plan} as JSON, the "
              "pack also when the LLM failed.")
def ask(question: tuple[str, ...], profile, max_tokens, top_k, turns, locale, language, path_glob, kind, all_repos: bool,
        no_daemon: bool, as_json: bool) -> None:
    """Answer QUESTION (the remaining words, quoted or not) with the configured OpenAI-compatible LLM (llama.cpp,
    Ollama, ...) from a context pack sized to the model's window; the answer is printed as it arrives. Without an
    LLM configured, prints the pack and how to configure one."""
    from localidx import llm
    from localidx.retrieve.ask import answer_settings, ask_pack

    if kind:
        _parse_kinds(kind)
    text = " ".join(question)
    settings = _settings(_root_or_none())
    if not llm.configured(settings):
        pack = _build_pack(text, profile, max_tokens, top_k, turns, locale, language, path_glob, kind, all_repos,
                           no_daemon)
        if as_json:
            _echo_json({"answer": None, "configured": False, "message": llm.not_configured_message(), "pack": pack})
            return
        _report_pack(pack)
        click.echo(pack["instructions"])
        click.echo(f"localidx: the pack above was printed instead of an answer: {llm.not_configured_message()}",
                   err=True)
        return
    answer_tokens, temperature = answer_settings(settings, profile, _root_or_none())
    packs: list[dict] = []

    def build(budget: int) -> dict:
        pack = _build_pack(text, profile, budget, top_k, turns, locale, language, path_glob, kind, all_repos,
                           no_daemon)
        if pack.get("noResultsReason") == "INDEX_NOT_READY":
            _report_pack(pack)  # raises: nothing to answer from
        if pack.get("noResults"):
            raise _NothingMatched(pack)  # the model is not asked to answer from nothing
        if not packs and not as_json:
            _echo_warnings(pack.get("warnings", []))
        packs.append(pack)
        return pack

    def on_send(attempt: dict) -> None:
        again = "the server refused the last one as too long: " if attempt["attempt"] > 1 else ""
        who = settings.llm_model.strip() or "the LLM"
        click.echo(f"localidx: asking {_p(who)}: {again}a pack of {attempt['promptTokens']} "
                   f"tokens, {attempt['answerTokens']} for the answer, window {attempt['window']} "
                   f"({attempt['windowSource']})", err=True)

    streamed: list[bool] = []

    def on_text(piece: str) -> None:
        streamed.append(True)
        click.echo(_ask_printable(piece), nl=False)

    try:
        result = ask_pack(settings, build, answer_tokens=answer_tokens, temperature=temperature,
                              max_tokens=max_tokens, on_text=None if as_json else on_text,
                              on_send=None if as_json else on_send)
    except _NothingMatched as nothing:
        if as_json:
            _echo_json({"answer": None, "configured": True, "noResults": True, "error": None, "pack": nothing.pack})
        else:
            _report_pack(nothing.pack)  # "no matches for this question"
        sys.exit(NO_MATCH_EXIT)
    if as_json:
        _echo_json(_ask_record(result, settings))
        if result.error is not None:
            sys.exit(result.error.exit_code)
        return
    if streamed:
        click.echo()
    if result.error is not None:
        if streamed:
            click.echo("localidx: the answer above is incomplete", err=True)
        raise result.error
    _print_sources(result)


class _NothingMatched(Exception):
    """The question's pack holds no match: ``ask`` says so as ``search`` does, without asking the model."""

    def __init__(self, pack: dict):
        super().__init__("no matches")
        self.pack = pack


def _ask_printable(piece: str) -> str:
    """A piece of a streamed answer for the terminal: its line breaks kept, every other control character shown
    escaped (``localidx.text.safe.printable`` line by line)."""
    return "\n".join(_p(line) if line else "" for line in piece.split("\n"))


def _ask_record(result, settings) -> dict:
    """``ask --json``: the pack always, the answer or null, the error (code and message) or null."""
    from localidx import llm

    pack = result.pack or {}
    matches = pack.get("matches") or []
    return {"answer": result.answer, "configured": True, "model": llm.model_label(settings),
            "error": result.error_dict(),
            "citations": {"cited": [{"n": n, "citation": _citation(matches[n - 1])} for n in result.cited],
                          "notInPack": result.invented},
            "plan": result.plan.as_dict() if result.plan else None, "attempts": result.attempts,
            "firstTokenS": result.first_token_s, "totalS": round(result.total_s, 3), "pack": result.pack}


def _citation(match: dict) -> str:
    from localidx.retrieve.context import citation

    return citation(match)


def _print_sources(result) -> None:
    """``Sources:`` the excerpts the answer cited; then one line for each citation that the pack does not hold."""
    matches = (result.pack or {}).get("matches") or []
    if result.cited:
        click.echo("\nSources:")
        for n in result.cited:
            match = matches[n - 1]
            click.echo(f"  [{n}] {_citation(match)}  {_p(match.get('symbol') or match.get('title') or '')}")
    elif matches:
        click.echo(f"\nSources: the answer cites none of the pack's {len(matches)} excerpts")
    for place in result.invented:
        click.echo(f"  not in the pack: {_p(place)}")
    if result.invented:
        click.echo(f"localidx: warning: the answer cites {len(result.invented)} place(s) the pack does not hold: "
                   "the model may have invented them", err=True)


@cli.command(name="eval")
@click.argument("queries", type=click.Path(path_type=Path))
@click.option("--mode", type=click.Choice(["hybrid", "vector", "bm25"]), default="hybrid", show_default=True)
@click.option("--fusion", type=click.Choice(["linear", "rrf"]), default=None, help="Fusion (default: the tuned one).")
@click.option("--vector-weight", type=click.FloatRange(0, 1), default=None, help="Weight of the vector arm (linear).")
@click.option("--profile", default=None, help="Rank by the context pipeline's pack under this profile instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures and per-query ranks as JSON.")
def eval_(queries: Path, mode: str, fusion: str | None, vector_weight: float | None, profile: str | None,
          as_json: bool) -> None:
    """File-level Recall@1/5/10 and MRR of search over QUERIES.jsonl ({"query": ..., "gold": [paths]} per line)."""
    from localidx.discover import find_root
    from localidx.retrieve.evaluate import evaluate, load_queries
    from localidx.store.index import open_index

    if not queries.is_file():
        raise UsageError(f"{queries}: no such file")
    items = load_queries(queries)
    root, in_git = find_root(Path.cwd())
    index = open_index(root, in_git, _settings(root), read_only=True)
    try:
        report = evaluate(index, items, mode=mode, fusion=fusion, vector_weight=vector_weight, profile=profile)
    finally:
        index.close()
    if as_json:
        _echo_json(report)
        return
    click.echo(f"{report['queries']} queries, " + (f"profile {profile}" if profile else f"mode {mode}"))
    for key in ("recall@1", "recall@5", "recall@10", "mrr"):
        click.echo(f"  {key:<10} {report[key]:.3f}")
    if profile:
        pack = report["pack"]
        click.echo(f"  pack       {pack['mean_matches']} matches, {pack['mean_tokens']} tokens, {pack['mean_ms']} ms "
                   f"(mean); auto-merge {pack['merge_windows_before']} -> {pack['merge_windows_after']} windows, "
                   f"{pack['merge_tokens_before']} -> {pack['merge_tokens_after']} tokens")


for _command in COMMANDS:  # hooks, hook-run, daemon, protocol, mcp, trust, repos, cluster
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``localidx`` script: runs the CLI and turns errors into one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="localidx", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("localidx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a LocalidxError, ^C, a closed pipe or a bug
        sys.exit(error_exit(exc))
    sys.exit(0)
