"""README.md stays true: CI runs exactly the test command it gives, every flag it (and docs/commands.md) shows
exists, and its examples, run against a real index of this repository, still answer as shown.

The examples run on a clone of this repository's committed tree, indexed in a temporary state dir with the model
the README's output was made with (``static-minilm``; its table is built once per machine, into the user cache); the
per-user registry is a temporary file too. An example holds while its first line (the best match, the best file,
the pack's question) and the number of results are the same: line numbers and scores move with every edit.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from localidx.interface.cli import cli as cli_main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTED = [README, ROOT / "docs" / "commands.md"]


def _fenced_after(text: str, marker: str) -> str:
    block = re.search(re.escape(marker) + r"\s*```sh\n(.+?)\n```", text, re.DOTALL)
    assert block, f"no sh block after {marker!r} in README.md"
    return block.group(1).strip()


def test_ci_runs_the_readme_test_command():
    readme = README.read_text(encoding="utf-8")
    command = _fenced_after(readme, "Run the tests:")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    tail = command.split("&&", 1)[1].strip()  # the venv is created by .ci/run itself
    assert tail in ci, f".ci/run does not run {tail!r}"


# -- every documented flag exists -----------------------------------------------------------------------------------

def _command_lines(text: str) -> list[str]:
    """Every place a page shows a localidx command: inline code and the lines of code blocks."""
    found = re.findall(r"`(localidx [^`]+)`", text)
    for block in re.findall(r"```(?:sh|console)\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            found += re.findall(r"(?:^|&& |\| )(localidx [^|&#]+)", line)
    return found


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params
            for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]}


def _flags_used(line: str) -> list[tuple[list[str], str]]:
    """(the command path, e.g. ["daemon", "logs"], a flag) for every flag the line gives; ``a | b`` alternatives of a
    group (``daemon start | stop | logs [-n N]``) each name their own subcommand."""
    words = line.replace("\\|", " | ").replace("[", " ").replace("]", " ").split()[1:]
    found = []
    group_path: list[str] = []
    path: list[str] = []
    command: click.Command = cli_main
    expect_command = True
    after_bar = False
    for word in words:
        if word == "|":  # another subcommand of the group follows, or another value of an option
            after_bar = True
            continue
        if after_bar and word in _resolve(group_path).commands:  # type: ignore[attr-defined]
            path, command, expect_command = list(group_path), _resolve(group_path), True
        after_bar = False
        if expect_command and isinstance(command, click.Group) and word in command.commands:
            command = command.commands[word]
            path.append(word)
            if isinstance(command, click.Group):
                group_path = list(path)
            continue
        expect_command = False
        if re.fullmatch(r"--?[a-z][a-z-]*(=\S*)?", word):
            found.append((list(path), word.split("=")[0]))
    return found


def _resolve(path: list[str]) -> click.Command:
    command: click.Command = cli_main
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return command


def test_every_documented_flag_exists():
    missing = []
    for page in DOCUMENTED:
        for line in _command_lines(page.read_text(encoding="utf-8")):
            for path, flag in _flags_used(line):
                if flag not in _options(_resolve(path)) | {"--help", "-h"}:
                    missing.append(f"{page.name}: localidx {' '.join(path)} {flag}")
    assert missing == []


def test_the_flag_check_finds_a_flag_that_does_not_exist():
    assert _flags_used("localidx search QUERY --files --no-such-flag [-k N]") == [
        (["search"], "--files"), (["search"], "--no-such-flag"), (["search"], "-k")]
    assert "--no-such-flag" not in _options(_resolve(["search"]))
    assert _flags_used("localidx daemon start \\| status [--json] \\| logs [-n N]") == [
        (["daemon", "status"], "--json"), (["daemon", "logs"], "-n")]


# -- the examples answer as shown ------------------------------------------------------------------------------------

def _examples() -> list[tuple[list[str], list[str]]]:
    """(argv after `localidx`, the shown output's lines) for every `$ localidx ...` in README's console blocks."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL):
        lines = block.splitlines()
        assert lines[0].startswith("$ localidx "), lines[0]
        out.append((shlex.split(lines[0][2:])[1:], lines[1:]))
    return out


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    base = tmp_path_factory.mktemp("readme")
    repo = base / "localidx"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    env = {**os.environ, "LOCALIDX_HOME": str(base / "state"), "LOCALIDX_EMBED_MODEL": "static-minilm",
           "LOCALIDX_REGISTRY": str(base / "registry.json"), "HF_HUB_OFFLINE": "1", "LOCALIDX_WATCH": "0"}
    env.pop("LOCALIDX_SOCK", None)
    run = subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return repo, env


def test_the_readme_has_examples():
    assert {argv[0] for argv, _shown in _examples()} >= {"search", "context"}
    assert any("--files" in argv for argv, _shown in _examples())


@pytest.mark.parametrize("argv, shown", _examples(), ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else "")
def test_a_readme_example_answers_as_shown(indexed, argv, shown):
    repo, env = indexed
    run = subprocess.run([sys.executable, "-m", "localidx", *argv], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    results = lambda lines: [line for line in lines if line and not line.startswith(" ")]
    assert printed and printed[0].split()[0] == shown[0].split()[0], run.stdout
    if argv[0] == "search":
        assert len(results(printed)) == len(results(shown)), run.stdout
    else:  # a context pack: its sections, and the first excerpt from the file shown
        first = lambda lines: next(line.split()[1].split(":")[0] for line in lines if line.startswith("[1] "))
        assert results(printed)[1].startswith("Context (") and first(printed) == first(shown), run.stdout
