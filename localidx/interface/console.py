"""What the ``localidx`` commands print, and how they end, without click.

Place in the flow: serve, beside ``cli.py``. ``cli.py``'s commands and ``localidx.interface.entry`` (a search through a
running
daemon, answered without loading click) print through these functions, so the two print the same.

- ``echo`` writes what ``click.echo`` writes: on a UTF-8 text stream both write the text and flush; on any other
  stream it is ``click.echo`` itself.
- ``error_exit`` is how every command ends on an exception: a ``LocalidxError`` as one line and its exit code, a
  closed pipe or ^C as 130, anything else as an internal error (exit 3).
- ``guard_terminal`` puts ``TerminalStream`` in front of stdout and stderr for the whole command
  (``localidx.interface.entry``
  does it first thing): whatever is written there, by these functions, ``click.echo``, ``print`` or a log handler,
  passes ``localidx.text.safe.terminal_text``, so no control sequence from file content reaches the terminal. Lines
  localidx colours itself go through ``echo(..., color=True)``, which keeps only colour sequences and carriage
  returns. JSON output (``echo_json``) carries every character, escaped by JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from localidx.errors import INTERNAL_ERROR_EXIT, NO_MATCH_EXIT, LocalidxError, UsageError
from localidx.text.safe import json_text, terminal_text, valid_text
from localidx.text.safe import printable as _p


_trust_warnings: set[str] = set()


def settings_for(root: Path | None, **overrides):
    """The settings of the work tree at ``root`` (None: outside any), with the command's flags as ``overrides``;
    what an untrusted repository file set and was not taken is said once on stderr."""
    from localidx.config import load_settings, trust_warning

    ignored: list = []
    settings = load_settings(root, overrides, ignored=ignored)
    message = trust_warning(ignored, root)
    if message and message not in _trust_warnings:
        _trust_warnings.add(message)
        echo_warnings([message])
    return settings


def text_args(*values):
    """Text arguments as valid Unicode: argv carries bytes that were not UTF-8 as lone surrogates, which no
    tokenizer or JSON writer takes (``localidx.text.safe.valid_text``); None stays None."""
    return tuple(valid_text(v) if isinstance(v, str) else v for v in values)


def parse_kinds(value: str | None) -> set[str] | None:
    """The chunk kinds of a comma-separated option value; UsageError naming the unknown ones."""
    if not value:
        return None
    from localidx.records import KINDS

    kinds = {k.strip() for k in value.split(",") if k.strip()}
    unknown = kinds - set(KINDS)
    if unknown:
        raise UsageError(f"unknown kind(s) {', '.join(sorted(unknown))}; known: {', '.join(KINDS)}")
    return kinds


def parse_language(value: str | None) -> str | None:
    """The chunk ``language`` a ``--lang`` value names (a name, alias or extension); UsageError for an unknown one.
    None or an empty value is no filter."""
    if not value:
        return value
    from localidx.chunk import resolve_language

    return resolve_language(value)


class TerminalStream:
    """A text stream in front of another (stdout, stderr) that writes what it is given through
    ``terminal_text``; ``write_styled`` keeps colour sequences and carriage returns too. It has no ``buffer``: a
    writer that looks for the bytes underneath (click does, on a stream it finds misconfigured) writes here, as
    text."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a text stream refuses bytes (click tells the two kinds apart so)
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.stream.write(terminal_text(text))
        return len(text)

    def write_styled(self, text: str) -> int:
        self.stream.write(terminal_text(text, styled=True))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self.stream, name)


def guard_terminal() -> None:
    """Put a ``TerminalStream`` in front of ``sys.stdout`` and ``sys.stderr`` (once) for the rest of the process."""
    if not isinstance(sys.stdout, TerminalStream):
        sys.stdout = TerminalStream(sys.stdout)
    if not isinstance(sys.stderr, TerminalStream):
        sys.stderr = TerminalStream(sys.stderr)


def _utf8(stream) -> bool:
    encoding = getattr(stream, "encoding", None)
    return (isinstance(encoding, str) and encoding.lower().replace("-", "").replace("_", "") == "utf8"
            and getattr(stream, "errors", None) is not None and sys.platform != "win32")


def echo(message: str = "", err: bool = False, color: bool | None = None, nl: bool = True) -> None:
    """``click.echo(message, err=err, color=color, nl=nl)`` for a ``str``, without importing click where the two
    write the same: a UTF-8 text stream, and no escape sequence that click would strip (none unless ``color``).
    ``message`` passes ``terminal_text`` first; with ``color``, its colour sequences and carriage returns stay (the
    caller made them, around text that passed ``printable``)."""
    stream = sys.stderr if err else sys.stdout
    message = terminal_text(message, styled=bool(color))
    if color and isinstance(stream, TerminalStream):
        stream.write_styled(message + "\n" if nl else message)
        stream.flush()
        return
    if not _utf8(stream):
        import click

        click.echo(message, err=err, color=color, nl=nl)
        return
    stream.write(message + "\n" if nl else message)
    stream.flush()


def echo_json(value) -> None:
    echo(json_text(json.dumps(value, indent=2, ensure_ascii=False)))


def echo_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        echo(f"localidx: warning: {_p(warning)}", err=True)


def root_or_none() -> Path | None:
    """The root of the work tree the current directory is in, or None outside one (or where it cannot be read)."""
    from localidx.discover import find_root

    try:
        return find_root(Path.cwd())[0]
    except LocalidxError:
        return None


def glob_from_here(path_glob: str | None, root: Path) -> str | None:
    """A ``--path`` glob as typed in the current directory, as the repository-relative glob search reads: from a
    subdirectory ``sub``, ``utils/**`` is ``/sub/utils/**`` and a bare name (``*.ts``) is any file of that name
    below ``sub`` (``/sub/**/*.ts``); one that starts with ``/`` is from the repository's root already."""
    if not path_glob or path_glob.startswith("/"):
        return path_glob
    try:
        here = Path.cwd().resolve().relative_to(root)
    except (OSError, ValueError):
        return path_glob
    if not here.parts:
        return path_glob
    glob = path_glob[2:] if path_glob.startswith("./") else path_glob
    if "/" in glob.rstrip("/"):
        return f"/{here.as_posix()}/{glob}"
    return f"/{here.as_posix()}/**/{glob}"


def path_shower(root: str | None):
    """A function showing a repository-relative path as the user should read it: relative to the current directory
    (as git status, ripgrep and compilers print paths), when that is inside the repository; the directory is looked
    up once, not for every match."""
    try:
        here = Path.cwd().resolve()
        here.relative_to(root or "")
    except (OSError, ValueError):
        return lambda path: path
    return lambda path: os.path.relpath(os.path.join(root, path), here)


def print_search(response: dict, as_json: bool, files: bool, mode: str, query: str, color_choice: str,
                 vimgrep: bool = False) -> None:
    """What ``localidx search`` prints for the daemon's (or the library's) answer, and its exit status 1 when
    nothing matched."""
    from localidx.interface.highlight import use_color

    if vimgrep and not as_json:
        print_vimgrep(response)
    else:
        print_matches(response, as_json, files, mode, query, use_color(color_choice, sys.stdout.isatty()))
    if not response["matches"]:
        sys.exit(NO_MATCH_EXIT)


def print_vimgrep(response: dict) -> None:
    """One ``path:line:column:text`` line per match (``rg --vimgrep``'s form, which editors' quickfix lists and
    terminals' link detection read): the match's first line, its symbol after the text."""
    echo_warnings(response.get("warnings", []))
    if not response["matches"]:
        echo("localidx: no matches", err=True)
    shown = path_shower(response.get("root"))
    for m in response["matches"]:
        first = next((line for line in (m.get("text") or "").splitlines() if line.strip()), "")
        label = m.get("symbol") or m.get("title") or ""
        repo = f"{_p(m['repo'])}: " if m.get("repo") else ""
        echo(f"{repo}{_p(shown(m['path']))}:{m['start_line']}:1:{_p(first.strip())}"
             + (f"  [{_p(label)}]" if label else ""))


def print_matches(response: dict, as_json: bool, files: bool = False, mode: str = "hybrid", query: str = "",
                  color: bool = False) -> None:
    if as_json:
        echo_json(response)
        return
    shown = path_shower(response.get("root"))
    echo_warnings(response.get("warnings", []))
    matches = response["matches"]
    if not matches:
        echo("localidx: no matches", err=True)
        return
    if mode != "vector" and not any(m.get("bm25_score") is not None for m in matches):
        best = matches[0].get("similarity")
        echo("localidx: weak matches only: no word of the query matched, only its meaning"
             + (f" (best similarity {best:.2f})" if best is not None else ""), err=True)
    if files:
        for f in response["files"]:
            repo = f"{_p(f['repo'])}: " if f.get("repo") else ""
            count = f"{f['matches']} match{'es' if f['matches'] != 1 else ''}"
            echo(f"{repo}{_p(shown(f['path']))}  {f['score']:.3f}  ({count}; best {f['start_line']}-{f['end_line']}"
                 f"{'  ' + _p(f['symbol']) if f['symbol'] else ''})")
        return
    from localidx.interface.highlight import MAGENTA, RESET, query_terms, render, snippet

    terms = query_terms(query)
    for m in matches:
        label = m["symbol"] or m["title"]
        stale = "  [stale: file changed since indexed]" if m["stale"] else ""
        repo = f"{_p(m['repo'])}: " if m.get("repo") else ""
        sim = f"  sim {m['similarity']:.2f}" if m.get("similarity") is not None else ""
        where = f"{repo}{_p(shown(m['path']))}:{m['start_line']}-{m['end_line']}"
        echo(f"{MAGENTA + where + RESET if color else where}  {_p(label)}  {m['score']:.3f}{sim}{stale}", color=color)
        for line in snippet(m["text"], m["start_line"], terms):
            echo(render(line, color, _p), color=color)


def error_exit(exc: BaseException) -> int:
    """How a command that raised ``exc`` ends: a LocalidxError as one line and its exit code; a closed pipe or ^C
    as 130; anything else is a bug, said in one line (exit 3; re-raised under ``LOCALIDX_DEBUG=1``)."""
    if not isinstance(exc, LocalidxError):
        from localidx.errors import disk_full

        exc = disk_full(exc) or exc
    if isinstance(exc, LocalidxError):
        echo(f"localidx: error: {_p(exc)}", err=True)
        return exc.exit_code
    if isinstance(exc, (BrokenPipeError, KeyboardInterrupt)):
        return 130
    if os.environ.get("LOCALIDX_DEBUG") == "1":
        raise exc
    echo(f"localidx: internal error: {type(exc).__name__}: {_p(exc)} (LOCALIDX_DEBUG=1 shows the traceback)", err=True)
    return INTERNAL_ERROR_EXIT
