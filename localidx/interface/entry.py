"""The ``localidx`` command's entry point: a search through the work tree's running daemon is answered here without
loading click, whose import costs such a command more than all the rest of its work; every other command line goes
to ``localidx.interface.cli.main``.

Place in the flow: serve, before ``cli.py``. Invariants:

- One definition of the command line: click's, in ``cli.py``. ``SEARCH_OPTIONS`` is the part of ``search``'s
  definition this path takes, as click has it (tests compare the two, option by option, and the values parsed from
  many command lines). ``parse_search`` takes only what it reads the way click does: the listed options, each at
  most once, as ``--name value``, ``--name=value`` or ``-k N``, values click would accept, and query words.
  Anything else (``--help``, another option, ``--``, a value click would refuse) is left to click.
- The same answer and the same errors. Until the request has reached the daemon, anything short of a connection to
  a daemon of this version and these settings (none runs, another version, ``--no-daemon`` or ``daemon =
  "never"``, a bad setting, a bad argument) goes to ``cli.main``, which does it all again and says what is wrong as
  it always does; from then on the answer, or the daemon's error, is printed by the functions ``cli.py``'s
  ``search`` uses (``localidx.interface.console``), and an error ends as it ends there.
- Every command but ``mcp`` writes to the terminal through ``localidx.interface.console.guard_terminal``: no control
  sequence
  from file content reaches it, whichever command prints it.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from localidx.interface.console import (echo, error_exit, glob_from_here, guard_terminal, parse_kinds, parse_language,
                                        print_search, settings_for, text_args)

# The options of `localidx search` that the fast path takes: option -> (parameter, what it holds: bool for a flag,
# str, a range of integers or a tuple of choices) and the parameters' defaults, as cli.py's click definition has
# them. --all-repos and --no-daemon are not here: those searches are never a running daemon's.
SEARCH_OPTIONS: dict[str, tuple[str, object]] = {
    "-k": ("k", range(1, 101)),
    "--mode": ("mode", ("hybrid", "vector", "bm25")),
    "--lang": ("language", str),
    "--path": ("path_glob", str),
    "--kind": ("kind", str),
    "--files": ("files", bool),
    "--color": ("color", ("auto", "always", "never")),
    "--json": ("as_json", bool),
    "--vimgrep": ("vimgrep", bool),
}
SEARCH_DEFAULTS = {"k": 10, "mode": "hybrid", "language": None, "path_glob": None, "kind": None, "files": False,
                   "color": "auto", "as_json": False, "vimgrep": False}
COMPLETE_ENV = "_LOCALIDX_COMPLETE"  # click's shell completion for the prog name "localidx": click's to answer


def parse_search(args: list[str]) -> dict | None:
    """``localidx search``'s parameters from its arguments, as click would parse them, or None when they are not
    plainly what ``SEARCH_OPTIONS`` takes (click then parses them, and says what is wrong)."""
    values: dict = dict(SEARCH_DEFAULTS)
    words: list[str] = []
    seen: set[str] = set()
    at = 0
    while at < len(args):
        token = args[at]
        at += 1
        if not token.startswith("-"):
            words.append(token)
            continue
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if name not in SEARCH_OPTIONS or name in seen:
            return None
        seen.add(name)
        param, holds = SEARCH_OPTIONS[name]
        if holds is bool:
            if eq:
                return None
            values[param] = True
            continue
        if not eq:
            if at == len(args):
                return None
            value = args[at]
            at += 1
        if value.startswith("-"):
            return None
        if isinstance(holds, range):
            if not (value.isascii() and value.isdigit()) or int(value) not in holds:
                return None
            values[param] = int(value)
        elif isinstance(holds, tuple):
            if value not in holds:
                return None
            values[param] = value
        else:
            values[param] = value
    if not words:
        return None
    values["query"] = tuple(words)
    return values


def _search_through_daemon(args: list[str]) -> bool:
    """Answer ``localidx search ARGS`` through the work tree's running daemon; False (nothing printed) when the
    CLI must do it."""
    options = parse_search(args)
    if options is None:
        return False
    try:
        from localidx.discover.root import find_root
        from localidx.interface.backend import REQUEST_TIMEOUT_S, command_policy, search_params
        from localidx.interface.client import connect

        query, language, path_glob, kind = text_args(" ".join(options["query"]), options["language"],
                                                     options["path_glob"], options["kind"])
        if kind:
            parse_kinds(kind)
        language = parse_language(language)
        root, in_git = find_root(Path.cwd())
        settings = settings_for(root)
        if command_policy(settings) == "never":
            return False
        client = connect(root, in_git, settings, restart=False)
    except Exception:  # noqa: BLE001 - the CLI does it again and says what is wrong
        return False
    params = search_params(query, k=options["k"], mode=options["mode"], language=language,
                           path_glob=glob_from_here(path_glob, root), kind=kind, files=options["files"])
    with client:
        response = {"root": str(root), **client.request("search/query", params, timeout=REQUEST_TIMEOUT_S)}
    print_search(response, options["as_json"], options["files"], options["mode"], query, options["color"],
                 options["vimgrep"])
    return True


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``localidx`` script: a search through a running daemon here, anything else by the CLI.

    An interrupted or cut-off search ends as under click: ^C prints an empty line and ``localidx: aborted`` (exit
    130), a closed pipe exits 1 and silences the final flush, any other error ends as ``cli.main`` ends it."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] != ["mcp"]:  # the MCP server's stdout is its protocol (JSON, which escapes for itself)
        guard_terminal()
    if args[:1] == ["search"] and not os.environ.get(COMPLETE_ENV):
        try:
            done = _search_through_daemon(args[1:])
        except (EOFError, KeyboardInterrupt):
            echo("", err=True)
            echo("localidx: aborted", err=True)
            sys.exit(130)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                sys.exit(error_exit(exc))
            sys.stdout, sys.stderr = _Pacified(sys.stdout), _Pacified(sys.stderr)
            sys.exit(1)
        except Exception as exc:  # noqa: BLE001 - ended as cli.main ends it
            sys.exit(error_exit(exc))
        if done:
            sys.exit(0)
    from localidx.interface.cli import main as cli_main

    cli_main(args)


class _Pacified:
    """A stream whose flush ignores a closed pipe (the interpreter flushes stdout and stderr once more at exit)."""

    def __init__(self, stream):
        self.stream = stream

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
