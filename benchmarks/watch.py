"""Benchmark: the watcher on big trees: start time, inotify watches, latency of one change, stop time, and the cost
of one polling scan (the fallback when the kernel refuses watches).

For each size it builds, in a temp dir, a git repository with DIRS untracked directories (100 per level) plus an
ignored node_modules/ of the same size (which must cost no watches), and FILES tracked files for the polling scan.

    .venv/bin/python benchmarks/watch.py [--dirs 10000 20000] [--files 10000] [--debounce 0.3]

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localidx.config import Settings  # noqa: E402
from localidx.discover.watch import Watcher  # noqa: E402


def git(root: Path, *args: str) -> None:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args]
    subprocess.run(cmd, cwd=root, check=True, capture_output=True)


def make_tree(base: Path, dirs: int) -> None:
    for i in range(dirs):
        os.makedirs(base / f"d{i // 100}" / f"e{i % 100}", exist_ok=True)


def make_repo(root: Path, dirs: int, files: int) -> None:
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text("node_modules/\n")
    for i in range(files):
        path = root / "src" / f"p{i // 100}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "files")
    make_tree(root / "tree", dirs)
    make_tree(root / "node_modules", dirs)


def proc_watches() -> int:
    """Inotify watches this process holds, as the kernel counts them."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as fh:
                total += sum(1 for line in fh if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


def measure(root: Path, dirs: int, debounce: float) -> None:
    got: list[set[str]] = []
    arrived = threading.Event()

    def on_change(paths: set[str]) -> None:
        got.append(paths)
        arrived.set()

    watcher = Watcher(root, Settings(), on_change, debounce_s=debounce)
    began = time.perf_counter()
    watcher.start()
    started = time.perf_counter() - began
    kernel = proc_watches()
    target = root / "tree" / f"d{(dirs - 1) // 100}" / f"e{(dirs - 1) % 100}" / "deep.py"
    began = time.perf_counter()
    target.write_text("X = 1\n")
    ok = arrived.wait(30)
    latency = time.perf_counter() - began
    began = time.perf_counter()
    watcher.stop()
    stopped = time.perf_counter() - began
    print(
        f"{dirs:>7,} dirs (+{dirs:,} ignored): mode={watcher.mode} start={started:.2f}s "
        f"watches={kernel:,} change->batch={latency:.2f}s (debounce {debounce}s, ok={ok}) stop={stopped:.2f}s"
    )


def measure_polling(root: Path, files: int) -> None:
    watcher = Watcher(root, Settings(), lambda paths: None, watch_limit=0, poll_interval_s=3600)
    began = time.perf_counter()
    watcher.start()  # takes the polling baseline: one full scan
    scan = time.perf_counter() - began
    watcher.stop()
    print(f"polling fallback: one scan of {files:,} tracked files takes {scan:.2f}s "
          f"(so it repeats every {max(2.0, scan / 0.1):.1f}s at most)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirs", type=int, nargs="+", default=[10_000, 20_000])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--debounce", type=float, default=0.3)
    args = parser.parse_args()
    logging.basicConfig(format="  log: %(levelname)s %(message)s")
    with open("/proc/sys/fs/inotify/max_user_watches") as fh:
        print(f"fs.inotify.max_user_watches = {fh.read().strip()}; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        for n, dirs in enumerate(args.dirs):
            root = Path(tmp) / f"r{n}"
            make_repo(root, dirs, args.files if n == 0 else 0)
            measure(root, dirs, args.debounce)
            if n == 0:
                measure_polling(root, args.files)


if __name__ == "__main__":
    main()
