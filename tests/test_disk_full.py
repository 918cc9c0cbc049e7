"""A full disk under LOCALIDX_HOME, as users meet it: the CLI, the daemon's pass and a real git repository, with the
state dir on a small tmpfs mounted in a private mount namespace (``unshare -m`` as root, ``unshare -rm`` otherwise),
so nothing is mounted outside the test and the mount goes when the script ends. Skipped where neither is allowed.

What must hold: every path says "no space left on device at <dir> (free N MB)", nothing is marked damaged or
repaired, and once there is room again the index is whole.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import daemon_environment, init_repo
from localidx.daemon import lifecycle

SCRIPT = r"""
set -u
L() { "$PY" -m localidx "$@"; echo "rc=$?"; }
mount -t tmpfs -o size=400k tmpfs "$LOCALIDX_HOME" || exit 99
cd "$REPO"
echo "== index"; L index --no-daemon -q
echo "== status"; L status --no-daemon
mount -o remount,size=64m "$LOCALIDX_HOME"
echo "== roomy index"; L index --no-daemon -q
echo "== roomy status"; L status --no-daemon
L daemon start
echo "pid=$(cat "$STATUS_FILE" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["pid"])')"
dd if=/dev/zero of="$LOCALIDX_HOME/filler" bs=4k 2>/dev/null
for i in $(seq 1 40); do printf 'def added_%s(x):\n    return x * %s\n' $i $i > "added_$i.py"; done
echo "== daemon pass"; L index
echo "== daemon status"; L status
L daemon stop
"""


def _namespace() -> list[str] | None:
    """The unshare command that gives this process a private mount namespace where it may mount, or None."""
    for command in (["unshare", "-m"], ["unshare", "-rm"]) if os.geteuid() == 0 else (["unshare", "-rm"],):
        try:
            probe = subprocess.run([*command, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                                    "mount -t tmpfs -o size=64k tmpfs \"$0\"", "/tmp"], capture_output=True,
                                   timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return command
    return None


def _section(out: str, name: str) -> str:
    return out.split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]


def test_a_full_disk_is_said_as_such_and_damages_nothing(tmp_path, monkeypatch):
    command = _namespace()
    if command is None:
        pytest.skip("no private mount namespace here (unshare -m / -rm refused)")
    home = tmp_path / "home"
    home.mkdir()
    daemon_environment(monkeypatch, home)
    files = {f"pkg/module_{i}.py": "".join(f"def function_{i}_{j}(value):\n    return value + {j}  # {'x' * 60}\n\n"
                                           for j in range(40)) for i in range(60)}
    repo = init_repo(tmp_path / "repo", files)
    status_file = lifecycle.daemon_paths(repo, True, __import__("localidx.config").config.load_settings(repo)).status
    env = {**os.environ, "PY": sys.executable, "REPO": str(repo), "STATUS_FILE": str(status_file),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([*command, "bash", "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    pid = next((int(line[4:]) for line in proc.stdout.splitlines() if line.startswith("pid=") and line[4:].isdigit()),
               None)
    if pid is not None and lifecycle.pid_alive(pid):  # the script stops it; never leave one behind
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode != 99, out
    full = f"no space left on device at {home}"
    index = _section(proc.stdout, "index")
    assert "rc=2" in index and full in proc.stderr and "MB)" in proc.stderr, out
    status = _section(proc.stdout, "status")
    assert "DAMAGED" not in status and "repair" not in out, out
    roomy = _section(proc.stdout, "roomy index")
    assert "rc=0" in roomy and "repaired" not in roomy, out
    assert _section(proc.stdout, "roomy status").startswith("READY"), out
    daemon_pass = _section(proc.stdout, "daemon pass")
    assert "rc=2" in daemon_pass, out
    after = _section(proc.stdout, "daemon status")
    assert f"the daemon's last update failed: {full}" in after and "DAMAGED" not in after, out
    assert proc.stderr.count("no space left on device") >= 2, out
