"""Progress of ``localidx index`` where stderr is not a terminal (a log, an IDE task, CI), and what ``status`` says is
still waiting for vectors: a real CLI process on a real repository, with the test hasher slowed to a model's pace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


def _cli(root: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(root.parent / f"{root.name}-index"),
               LOCALIDX_WATCH="0", **env_extra)
    env.pop("LOCALIDX_SOCK", None)
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def _repo(make_repo) -> Path:
    return make_repo({f"pkg/mod{i}.py": f"def handler_{i}(request):\n    return request.value + {i}\n\n\n"
                      f"def helper_{i}(x):\n    return x * {i}\n" for i in range(150)})


def test_index_to_a_pipe_prints_every_phase_and_a_line_per_interval_while_embedding(make_repo):
    root = _repo(make_repo)
    proc = _cli(root, "index", LOCALIDX_FAKE_EMBED_DELAY="0.02", LOCALIDX_PROGRESS_S="0.4")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(re.match(r"\d+ files: 150 new or changed to read, 0 deleted", line) for line in lines), lines
    assert any(line.startswith("chunking ") for line in lines), lines
    assert any(re.match(r"\d+ chunks written: searchable now \(BM25\)", line) for line in lines), lines
    embedding = [line for line in lines if line.startswith("embedding ")]
    # about 3 s of embedding (more new chunks than are embedded inline) at one line per 0.4 s: the phase's first line, the ticks, and the last one
    assert len(embedding) >= 4, lines
    assert re.match(r"embedding \d+/\d+ chunks \([\d.]+/s", embedding[0])
    done, total = re.match(r"embedding (\d+)/(\d+)", embedding[-1]).groups()
    assert done == total and "\r" not in proc.stderr


def test_status_shows_chunks_still_waiting_for_vectors_and_since_when(make_repo):
    root = _repo(make_repo)
    assert _cli(root, "index", "--no-embed", "-q").returncode == 0
    report = json.loads(_cli(root, "status", "--json").stdout)
    assert report["chunks_pending"] == report["chunks"] > 0 and report["chunks_with_vectors"] == 0
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", report["pending_since"]), report["pending_since"]
    human = _cli(root, "status").stdout
    assert f"pending {report['chunks']} chunks without vectors since {report['pending_since']}" in human, human
    assert _cli(root, "index", "-q").returncode == 0
    report = json.loads(_cli(root, "status", "--json").stdout)
    assert report["chunks_pending"] == 0 and report["pending_since"] is None
    assert "pending" not in _cli(root, "status").stdout


def test_index_with_json_prints_progress_on_stderr_and_only_the_record_on_stdout(make_repo):
    root = _repo(make_repo)
    proc = _cli(root, "index", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files_processed"] == 150
    lines = proc.stderr.splitlines()
    assert any(re.match(r"\d+ files: 150 new or changed to read, 0 deleted", line) for line in lines), lines
    assert any(re.match(r"\d+ chunks written: searchable now \(BM25\)", line) for line in lines), lines
    quiet = _cli(root, "index", "--json", "-q")
    assert quiet.returncode == 0 and quiet.stderr == "" and json.loads(quiet.stdout)["files_unchanged"] == 150
