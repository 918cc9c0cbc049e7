"""Bad input a user can give — odd bytes, odd files, odd settings, long text — through the real CLI and the real
daemon: one line, a clear exit code, nothing lost from the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI in ``cwd``; ``env`` adds variables, and removes those it sets to None."""
    full = {name: value for name, value in {**os.environ, **(env or {})}.items() if value is not None}
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full)


def fake_env(tmp_path: Path, name: str = "home") -> dict:
    return {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / name)}


def one_line_error(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return lines[0]


# -- plain output: one line per location, whatever a file name holds ------------------------------------------

ODD_NAME = "we\nird\tname.py"


def test_plain_output_escapes_newlines_and_tabs_in_file_names(make_repo, tmp_path):
    root = make_repo({ODD_NAME: "def odd_helper():\n    return 1\n", "plain.py": "def plain_helper():\n    return 2\n"})
    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    shown = "we\\nird\\tname.py:1-2"
    chunks = run(root, "chunks", ODD_NAME, env=env)
    search = run(root, "search", "odd helper", env=env)
    context = run(root, "context", "odd helper", env=env)
    for proc in (chunks, search, context):
        assert proc.returncode == 0, proc.stderr
        assert "\t" not in proc.stdout.replace("\n    ", "\n"), proc.stdout
        assert any(line.lstrip().startswith(shown) or f"] {shown} " in line for line in proc.stdout.splitlines()), \
            proc.stdout
        assert "ird\tname" not in proc.stdout and "we\nird" not in proc.stdout
    assert search.stdout.splitlines()[0].startswith(f"{shown}  odd_helper  ")
    # JSON keeps the name as it is.
    found = json.loads(run(root, "search", "odd helper", "--json", env=env).stdout)["matches"]
    assert found[0]["path"] == ODD_NAME


# -- files that are not files ---------------------------------------------------------------------------------


def test_chunks_refuses_fifos_devices_and_symlink_loops_in_one_line(make_repo):
    root = make_repo({"ok.py": "def fine():\n    return 1\n"})
    os.mkfifo(root / "pipe.py")
    (root / "loop_a.py").symlink_to("loop_b.py")
    (root / "loop_b.py").symlink_to("loop_a.py")
    assert "is a FIFO, not a regular file" in one_line_error(run(root, "chunks", "pipe.py", timeout=30), 2)
    assert "a symlink loop" in one_line_error(run(root, "chunks", "loop_a.py", timeout=30), 2)
    assert "is a device, not a regular file" in one_line_error(run(root, "chunks", "/dev/null", timeout=30), 2)
    ok = run(root, "chunks", "ok.py", timeout=30)
    assert ok.returncode == 0 and "ok.py:1-2" in ok.stdout


def test_reading_a_file_swapped_for_a_fifo_fails_at_once(tmp_path):
    # The indexer reads what discovery listed; a file replaced by a FIFO in between must not block the run.
    from localidx.discover import read_source
    from localidx.errors import UsageError

    os.mkfifo(tmp_path / "was_a_file.py")
    try:
        read_source(tmp_path / "was_a_file.py")
    except UsageError as exc:
        assert "a FIFO, not a regular file" in str(exc)
    else:
        raise AssertionError("read_source read a FIFO")


# -- settings: every value checked, one line naming the key, the source and what is allowed ---------------------


@pytest.mark.parametrize("where, text, needles", [
    (".localidx.toml", "max_file_bytes = 1e400\n", ["max_file_bytes must be an integer from 1 to", "inf"]),
    (".localidx.toml", "workers = 1.5\n", ["workers must be an integer from 0 to 1,024", "1.5"]),
    (".localidx.toml", 'watch = "yes"\n', ["watch must be true or false", "'yes'"]),
    (".localidx.toml", "home = 5\n", ["home must be a string", "5"]),
    (".localidx.toml", "overlap_lines = 50\n", ["overlap_lines must be an integer from 0 to 49"]),
    (".localidx.toml", "parse_timeout_s = nan\n", ["parse_timeout_s must be a number from 0 to"]),
    (".localidx.toml", '[llm]\nbase_url = "localhost:8080"\n', ["llm_base_url must be an http:// or https:// URL"]),
    ("pyproject.toml", '[tool.localidx]\nsummarize = "on"\n', ["[tool.localidx]", "summarize must be true or false"]),
])
def test_a_bad_setting_in_a_file_is_one_line_naming_key_source_and_what_is_allowed(make_repo, tmp_path, where,
                                                                                     text, needles):
    root = make_repo({"a.py": "def f():\n    return 1\n"})
    (root / where).write_text(text)
    env = {"LOCALIDX_HOME": None}  # the file's home, if any, is the one that counts
    for command in (("chunks", "a.py"), ("index", "-q"), ("status",)):
        line = one_line_error(run(root, *command, env=env, timeout=60), 2)
        assert str(root / where) in line, line
        for needle in needles:
            assert needle in line, line
    assert sorted(p.name for p in root.iterdir()) == sorted([".git", "a.py", where]), "nothing written anywhere"


@pytest.mark.parametrize("name, value, needle", [
    ("LOCALIDX_WORKERS", "1.5", "workers must be an integer from 0 to 1,024, got '1.5'"),
    ("LOCALIDX_MAX_FILE_BYTES", "1e400", "max_file_bytes must be an integer"),
    ("LOCALIDX_WATCH", "maybe", "watch must be true or false, got 'maybe'"),
    ("LOCALIDX_DAEMON_IDLE_S", "inf", "daemon_idle_s must be a number from 0 to"),
    ("LOCALIDX_LLM_API_KEY_ENV", "MY KEY", "llm_api_key_env must be the name of an environment variable"),
])
def test_a_bad_environment_variable_is_one_line_naming_it(make_repo, tmp_path, name, value, needle):
    root = make_repo({"a.py": "def f():\n    return 1\n"})
    line = one_line_error(run(root, "chunks", "a.py", env={name: value}, timeout=60), 2)
    assert line.startswith(f"localidx: error: {name}: ") and needle in line, line


def test_a_relative_home_in_the_config_file_is_under_the_root_from_any_directory(make_repo, tmp_path):
    root = make_repo({"src/a.py": "def verify_token():\n    return 1\n", ".localidx.toml": 'home = "idx"\n'})
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": None}
    assert run(root, "index", "-q", env=env).returncode == 0
    assert (root / "idx" / "lancedb").is_dir() and not (root / "src" / "idx").exists()
    found = run(root / "src", "search", "verify token", env=env)
    assert found.returncode == 0 and "src/a.py:1-2" in found.stdout, found.stderr
