"""Output that says what is true: labels, scores and messages as a user reads them, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def fake_env(tmp_path: Path, name: str = "home") -> dict:
    return {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / name)}


# -- languages ------------------------------------------------------------------------------------------------


def test_files_no_grammar_reads_are_text_unless_their_type_has_a_name(make_repo, tmp_path):
    root = make_repo({
        "pkg/__init__.py": "def main():\n    return 1\n",
        "pkg/py.typed": "partial\n",
        "VERSION": "1.2.3\n",
        "notes.unknownext": "some notes\n",
        "scripts/run.sh": "#!/bin/sh\necho hi\n",
        "Dockerfile": "FROM python:3.12\n",
    })
    proc = run(root, "chunks", "pkg/py.typed", "VERSION", "scripts/run.sh", "Dockerfile", "--json")
    assert proc.returncode == 0, proc.stderr
    assert {r["path"]: r["language"] for r in json.loads(proc.stdout)} == {
        "pkg/py.typed": "text", "VERSION": "text", "scripts/run.sh": "sh", "Dockerfile": "dockerfile"}
    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    status = json.loads(run(root, "status", "--json", env=env).stdout)
    assert status["chunks_by_language"] == {"text": 3, "python": 1, "sh": 1, "dockerfile": 1}


# -- messages said once ---------------------------------------------------------------------------------------


def test_advice_is_given_once(make_repo, tmp_path):
    root = make_repo({"auth.py": "def verify_token(token):\n    return token.valid\n"})
    env = {**fake_env(tmp_path), "LOCALIDX_LLM_BASE_URL": "", "LOCALIDX_LLM_MODEL": ""}
    for command in ("context", "ask"):
        proc = run(root, command, "where are tokens verified", env=env)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "run `localidx index`" in lines[0], proc.stderr
    assert run(root, "index", "-q", env=env).returncode == 0
    proc = run(root, "ask", "where are tokens verified", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("no LLM is configured") == 1, proc.stderr
    assert "auth.py:1-2" in proc.stdout
