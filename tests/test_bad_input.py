"""Bad input a user can give — odd bytes, odd files, odd settings, long text — through the real CLI and the real
daemon: one line, a clear exit code, nothing lost from the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


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
