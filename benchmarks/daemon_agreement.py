"""Do `search`, `daemon stop`, `daemon status` and `index`, run in turn from two terminals, ever disagree about
whether a work tree's daemon runs? Prints each disagreement and the counts; exits 1 when there was one.

Two terminals take turns on one repository (a copy of this one's `localidx/` tree as `code/`, committed), each running a random
command of the four (half the searches followed at once by `daemon stop`, the race a daemon being started loses). After every command the truth is read from /proc (a `localidx daemon run` process whose working
directory is the repository, a daemon being started included) and compared with what the command said:

- `daemon stop` must leave no daemon process behind, whatever it printed;
- `daemon status` must exit 0 exactly when a daemon process exists (a daemon on its way up counts as running);
- at the end no process is left.

    python benchmarks/daemon_agreement.py [--commands 50] [--seed 1] [--work DIR] [--verbose]

The state dir, the registry and the sockets live under --work (a temporary dir by default), outside any work tree.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def daemon_pids(root: Path) -> list[int]:
    """Pids of `localidx daemon run` processes serving ``root`` (by their working directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"daemon" in cmdline and b"run" in cmdline and any(b"localidx" in part for part in cmdline) \
                and Path(cwd) == root:
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            if state != "Z":
                found.append(int(entry.name))
    return found


def make_repo(work: Path) -> Path:
    root = work / "repo"
    # Not under the name localidx: `python -m localidx` run there would import the copy instead of the package.
    shutil.copytree(HERE / "localidx", root / "code", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localidx.invalid"]
    subprocess.run([*git, "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "snapshot"], check=True)
    return root.resolve()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true", help="Print every command, its answer and the truth.")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="lx-agree-", dir="/tmp")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    root = make_repo(work)
    env = {**os.environ, "LOCALIDX_HOME": str(work / "home"), "LOCALIDX_REGISTRY": str(work / "registry.json"),
           "XDG_RUNTIME_DIR": str(work / "run"), "LOCALIDX_DAEMON": "auto", "CI": "", "LOCALIDX_WATCH": "0",
           "LOCALIDX_DAEMON_IDLE_S": "600", "LOCALIDX_EMBED_MODEL": os.environ.get("LOCALIDX_EMBED_MODEL", "fake")}
    (work / "run").mkdir(mode=0o700, exist_ok=True)

    def lx(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "localidx", *words], cwd=root, env=env, capture_output=True,
                              text=True, timeout=300)

    lx("index", "-q")
    rng = random.Random(args.seed)
    commands = [("search", "daemon", "lifecycle"), ("daemon", "stop"), ("daemon", "status"), ("index", "-q")]
    disagreements: list[str] = []
    counts: dict[str, int] = {}
    started = time.perf_counter()
    for n in range(args.commands):
        terminal = "AB"[n % 2]
        words = rng.choice(commands)
        if words[0] == "search" and rng.random() < 0.5:
            lx(*words)  # and at once, as `localidx search ...; localidx daemon stop` does, the stop below
            words = ("daemon", "stop")
        proc = lx(*words)
        name = " ".join(words[:2]) if words[0] == "daemon" else words[0]
        counts[name] = counts.get(name, 0) + 1
        alive = daemon_pids(root)
        said = (proc.stdout + proc.stderr).strip().replace("\n", " | ")[:160]
        if proc.returncode not in (0, 1) and words[0] != "index":
            disagreements.append(f"#{n} {terminal}: {' '.join(words)} exit {proc.returncode}: {said}")
        if args.verbose:
            print(n, terminal, " ".join(words), proc.returncode, said[:100], alive)
        if words == ("daemon", "stop") and alive:
            disagreements.append(f"#{n} {terminal}: daemon stop said {said!r}, but pids {alive} still run")
        if words == ("daemon", "status") and (proc.returncode == 0) != bool(alive):
            # The truth can change between the command and the look at /proc only by a daemon that was starting.
            if not (proc.returncode == 0 and "starting" in proc.stdout):
                disagreements.append(f"#{n} {terminal}: daemon status exit {proc.returncode} ({said}), daemons "
                                     f"{alive}")
    lx("daemon", "stop")
    time.sleep(0.5)
    left = daemon_pids(root)
    if left:
        disagreements.append(f"left running at the end: {left}")
    for line in disagreements:
        print(line)
    print(f"{args.commands} commands ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) in "
          f"{time.perf_counter() - started:.0f} s: {len(disagreements)} disagreements, {len(left)} processes left")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
