"""No command lets a repository's content drive the terminal: file text holding OSC 52 (clipboard), OSC 0 (window
title), OSC 8 (links), CSI, DCS and C1 bytes, and a file name holding an escape, go through every command of the real
CLI (``index``, its dry run, ``status``, ``search`` in this process and through a daemon, coloured or not,
``context``, ``ask`` without an LLM and with one that repeats the code it is sent, ``chunks``, ``repos``, errors);
stdout and stderr carry no ESC, no other C0 control but newline and tab, and no C1 character: the controls show as
``\\x1b``. With ``--json`` the text comes back whole, escaped by JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import init_repo
from llm_stub import serve_llm, user_message

CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
TITLE = "\x1b]0;pwned-title\x07"
LINK = "\x1b]8;;http://evil.invalid\x1b\\click here\x1b]8;;\x1b\\"
CSI = "\x1b[2J\x1b[1;1H\x1b[8m"
C1 = "\x9b31m\x9d0;c1-title\x9c\x90dcs-payload\x9c"
EVIL = ("def clipboard_thief():\n"
        f"    # {CLIPBOARD} title {TITLE} link {LINK}\n"
        f"    # csi {CSI} hidden c1 {C1} dcs \x1bP+q544e\x1b\\ bell\x07 cr\rover\n"
        "    return 'clipboard thief'\n")
EVIL_NAME = "\x1b]0;name-title\x07.py"
SGR = re.compile("\x1b\\[[0-9;]*m")


def _controls(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on: ESC and every other C0 control but newline and tab (a
    carriage return only as part of CRLF), DEL, C1."""
    text = text.replace("\r\n", "\n")
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("terminal")
    root = init_repo(base / "repo", {"evil.py": EVIL, EVIL_NAME: "def named_title():\n    return 'clipboard thief'\n",
                                     "plain.py": "def plain():\n    return 1\n",
                                     ".localidx.toml": ('max_tokens = 256\n[llm]\n'
                                                        'model = "\\u001b]0;toml-title\\u0007"\n')})
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_LLM")}
    env.update(LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(base / "state"), LOCALIDX_WATCH="0",
               LOCALIDX_REGISTRY=str(base / "registry.json"), LOCALIDX_CONFIG_DIR=str(base / "config"),
               LOCALIDX_DAEMON="running", LOCALIDX_DAEMON_IDLE_S="120")
    return root, env


def _run(world, *args: str, env_extra: dict | None = None, ok=(0,)) -> tuple[str, str]:
    root, env = world
    proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env={**env, **(env_extra or {})},
                          capture_output=True, timeout=300)
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert proc.returncode in ok, (args, proc.returncode, err)
    return out, err


def _assert_clean(args, out: str, err: str, color: bool = False) -> None:
    if color:
        out = SGR.sub("", out)
    assert _controls(out) == [], (args, out)
    assert _controls(err) == [], (args, err)


def _index(world):
    out, err = _run(world, "index", "-q")
    _assert_clean(("index",), out, err)


def test_no_command_prints_a_control_sequence_from_the_repository(world):
    _index(world)
    commands = [
        ("index", "--dry-run"), ("status",), ("search", "clipboard", "thief"),
        ("search", "--files", "clipboard", "thief"), ("search", "--no-daemon", "clipboard"),
        ("context", "clipboard", "thief"), ("ask", "clipboard", "thief"), ("chunks", "evil.py"), ("chunks", EVIL_NAME),
        ("repos",), ("trust", "--show"),
    ]
    seen = ""
    for args in commands:
        out, err = _run(world, *args)
        _assert_clean(args, out, err)
        seen += out + err
    # The controls are shown, escaped, not dropped: the reader sees what the file holds.
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in seen and "\\x9b31m" in seen and "\\x1b]0;name-title\\x07.py" in seen
    out, err = _run(world, "search", "--color", "always", "clipboard", "thief")
    assert SGR.search(out)  # its own colours stay
    _assert_clean(("search", "--color"), out, err, color=True)
    # Errors that quote what a user or a repository gave: a file name, an option.
    for args in (("chunks", f"missing-{TITLE}.py"), ("search", f"--bogus{TITLE}", "x"), (f"nosuch{CLIPBOARD}",)):
        out, err = _run(world, *args, ok=(1, 2))
        _assert_clean(args, out, err)
        assert "\\x1b]" in err, (args, err)


def test_an_llm_that_repeats_the_code_cannot_drive_the_terminal(world):
    _index(world)
    with serve_llm(lambda request: "Here is the code:\n" + user_message(request)) as url:
        llm = {"LOCALIDX_LLM_BASE_URL": url, "LOCALIDX_LLM_MODEL": "echo"}
        out, err = _run(world, "ask", "clipboard", "thief", env_extra=llm)
        assert url.requests, err
        assert CLIPBOARD in user_message(url.requests[-1])  # the stub did get, and repeat, the raw controls
        _assert_clean(("ask",), out, err)
        assert "\\x1b]52;c;" in out
        out, err = _run(world, "ask", "--json", "clipboard", "thief", env_extra=llm)
        _assert_clean(("ask", "--json"), out, err)
        assert CLIPBOARD in json.loads(out)["answer"]


def test_json_output_carries_the_text_whole_escaped_by_json(world):
    _index(world)
    for args in (("search", "--json", "clipboard", "thief"), ("search", "--no-daemon", "--json", "clipboard"),
                 ("context", "--json", "clipboard", "thief"), ("ask", "--json", "clipboard", "thief"),
                 ("chunks", "--json", "evil.py")):
        out, err = _run(world, *args)
        _assert_clean(args, out, err)
        assert "\\u001b]52;c;" in out and "\\u009b31m" in out, args  # escaped by JSON, not by us
        text = json.dumps(json.loads(out), ensure_ascii=False)
        for control in (CLIPBOARD, TITLE, C1):
            assert json.dumps(control, ensure_ascii=False)[1:-1] in text, (args, control)


def test_a_search_answered_by_a_running_daemon_prints_no_control_sequence(world):
    _index(world)
    out, err = _run(world, "daemon", "start")
    try:
        for args in (("search", "clipboard", "thief"), ("search", "--json", "clipboard", "thief"),
                     ("context", "clipboard", "thief"), ("status",)):
            out, err = _run(world, *args)
            _assert_clean(args, out, err)
    finally:
        _run(world, "daemon", "stop")
