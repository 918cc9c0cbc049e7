"""The search that is answered without click (localidx.interface.entry) reads its command line as click's definition of
``search`` in cli.py does: the same options, types, choices, ranges and defaults, and the same values from the same
arguments; whatever it does not read that way is left to click. (That its output and errors are click's is
tests/test_daemon.py's, against a real daemon.)"""

from __future__ import annotations

import itertools

import click
import pytest

from localidx.interface import console, entry
from localidx.interface.cli import cli

SEARCH = cli.commands["search"]
NOT_TAKEN = {"query", "all_repos", "no_daemon"}  # the query is read as words; the two others never reach a daemon


def test_the_options_taken_are_click_s_options_of_search():
    taken = {param for param, _holds in entry.SEARCH_OPTIONS.values()}
    params = {p.name: p for p in SEARCH.params}
    defaults = click_params(["a", "query"])
    assert taken | NOT_TAKEN == set(params)  # an option added to `search` must be taken here or left to click
    for name in NOT_TAKEN - {"query"}:
        assert not set(params[name].opts) & set(entry.SEARCH_OPTIONS)
    for option, (name, holds) in entry.SEARCH_OPTIONS.items():
        param = params[name]
        assert set(param.opts) | set(param.secondary_opts) == {o for o, (n, _) in entry.SEARCH_OPTIONS.items()
                                                               if n == name}
        assert option in param.opts and param.envvar is None and not param.multiple
        assert entry.SEARCH_DEFAULTS[name] == defaults[name]
        if holds is bool:
            assert param.is_flag and defaults[name] is False and click_params(["a", option])[name] is True
        elif holds is str:
            assert param.type is click.STRING and not param.is_flag
        elif isinstance(holds, range):
            assert isinstance(param.type, click.IntRange) and not param.type.clamp
            assert not param.type.min_open and not param.type.max_open
            assert (param.type.min, param.type.max) == (holds.start, holds.stop - 1)
        else:
            assert isinstance(param.type, click.Choice) and param.type.case_sensitive
            assert tuple(param.type.choices) == holds
    assert set(entry.SEARCH_DEFAULTS) == taken


def click_params(args: list[str]) -> dict | None:
    try:
        with SEARCH.make_context("search", list(args)) as ctx:
            return dict(ctx.params)
    except click.exceptions.Exit:  # --help
        return None
    except click.ClickException:
        return None


PIECES = [["verify"], ["token", "signature"], ["-k", "3"], ["-k", "100"], ["-k", "0"], ["-k", "101"], ["-k", "07"],
          ["-k", "+3"], ["-k", "3.0"], ["-k", "٣"], ["-k3"], ["-k=3"], ["--mode", "bm25"], ["--mode=vector"],
          ["--mode", "BM25"], ["--mode="], ["--lang", "python"], ["--lang="], ["--lang", "-x"], ["--path=src/*.py"],
          ["--path", "[x"], ["--kind", "function,method"], ["--files"], ["--files=1"], ["--json"], ["--no-daemon"],
          ["--all-repos"], ["--color", "always"], ["--color=never"], ["--color", "yes"], ["--"], ["-"], ["-x"],
          ["--verbose"], ["-h"], ["--help"], ["--mode"], ["-k"], ["--jso"], [" "], ["é"]]


@pytest.mark.parametrize("size, step", [(1, 1), (2, 1), (3, 17)])
def test_what_is_taken_is_what_click_parses_and_the_rest_is_left_to_it(size, step):
    taken = left = 0
    for combo in itertools.islice(itertools.permutations(range(len(PIECES)), size), 0, None, step):
        args = [token for n in combo for token in PIECES[n]]
        ours = entry.parse_search(args)
        theirs = click_params(args)
        if ours is None:
            left += 1
            continue
        taken += 1
        assert theirs is not None, args
        assert theirs["all_repos"] is False and theirs["no_daemon"] is False, args
        assert ours == {name: theirs[name] for name in ours}, args
    assert taken > 0 and left > 0


@pytest.mark.parametrize("args, expected", [
    (["parse", "options", "-k", "3"], {"query": ("parse", "options"), "k": 3}),
    (["--mode=bm25", "x", "--json"], {"query": ("x",), "mode": "bm25", "as_json": True}),
    (["x", "--path", "src/*.py", "--files", "--color", "never"], {"query": ("x",), "path_glob": "src/*.py",
                                                                  "files": True, "color": "never"}),
])
def test_plain_command_lines_are_taken(args, expected):
    assert entry.parse_search(args) == {**entry.SEARCH_DEFAULTS, **expected}


@pytest.mark.parametrize("args", [["x", "-k", "0"], ["x", "--json", "--json"], ["x", "--"], ["--help"], [],
                                  ["x", "--no-daemon"], ["x", "--all-repos"], ["x", "-k"], ["x", "--lang", "--json"]])
def test_anything_else_is_left_to_click(args):
    assert entry.parse_search(args) is None


def test_echo_writes_what_click_echo_writes(capsys):
    for text, err, color in [("a line é", False, None), ("to stderr", True, None), ("\x1b[35mred\x1b[0m", False, True),
                             ("", False, None)]:
        console.echo(text, err=err, color=color)
        mine = capsys.readouterr()
        click.echo(text, err=err, color=color)
        assert capsys.readouterr() == mine
    # Escapes it did not colour itself are shown, not stripped (click strips colours only, and only off a terminal).
    console.echo("\x1b[35mshown\x1b[0m \x1b]0;title\x07")
    assert capsys.readouterr().out == "\\x1b[35mshown\\x1b[0m \\x1b]0;title\\x07\n"
