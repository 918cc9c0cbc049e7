"""Nothing outlives a killed index run: the chunker's worker processes (localidx/index/workers.py), the fork server that
starts them and multiprocessing's resource tracker all end when the `localidx index` that started them is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import init_repo, kill_all, marked_processes, survivors

MARKER = "LOCALIDX_KILL_TEST"

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")


def _many_files(count: int) -> dict[str, str]:
    body = "".join(f"def step_{k}(x, y):\n    '''Step {k}.'''\n    total = x + y * {k}\n    return total\n\n\n"
                   for k in range(30))
    return {f"pkg{n // 50}/module_{n}.py": body.replace("step_", f"step_{n}_") for n in range(count)}


def test_kill_9_of_an_index_run_leaves_no_process_behind(tmp_path: Path):
    root = init_repo(tmp_path / "repo", _many_files(600))
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker, "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home"),
           "LOCALIDX_WORKERS": "2", "LOCALIDX_WATCH": "0"}
    run = subprocess.Popen([sys.executable, "-m", "localidx", "index", "--rebuild"], cwd=root, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and run.poll() is None:
            # the fork server and at least one worker (started by the server, with the server's command line)
            if sum("forkserver" in cmd for cmd in marked_processes(MARKER, marker).values()) >= 2:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the index run never started its workers (exit status {run.poll()})")
        started = marked_processes(MARKER, marker)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        left = survivors(MARKER, marker, wait_s=5.0)
        assert not left, f"still alive 5 s after kill -9 of {run.pid} (started: {started})"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        kill_all(marked_processes(MARKER, marker))
