"""Shared by the benchmarks: real chunks from the Python standard library, git repositories in /tmp, and
measurement helpers (CPU seconds, peak RSS of a process tree, percentiles).

Not a benchmark itself. Everything a benchmark writes lives under ``/tmp`` (``WORK``), never in the repository.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORK = Path(os.environ.get("LOCALIDX_BENCH_WORK", "/tmp/localidx-bench"))
STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Packages of real library code, in the order they are taken until a repository holds enough lines.
STDLIB_PACKAGES = ("asyncio", "email", "json", "http", "logging", "xml", "concurrent", "importlib",
                   "multiprocessing", "urllib", "unittest")


def stdlib_files(limit: int | None = None, every: int = 1) -> list[Path]:
    """The standard library's ``.py`` files (no site-packages, no test suite), sorted; every ``every``-th one."""
    files = sorted(p for p in STDLIB.rglob("*.py")
                   if "site-packages" not in p.parts and "test" not in p.parts and "tests" not in p.parts)
    files = files[::every]
    return files[:limit] if limit else files


def stdlib_chunks(want: int, every: int = 1, code_only: bool = True, seed: int = 0):
    """``want`` real chunks (``localidx.chunk.chunk_file`` over stdlib files), a seeded random sample of the chunks of
    every ``every``-th file; code kinds only unless ``code_only`` is False. Chunking stops once there are 4x
    ``want`` candidates, so the sample spans many files without chunking the whole library."""
    from localidx.chunk import chunk_file
    from localidx.records import CODE_KINDS
    from localidx.config import Settings

    settings = Settings()
    files = stdlib_files(every=every)
    random.Random(seed).shuffle(files)
    pool = []
    for path in files:
        result = chunk_file(path.relative_to(STDLIB).as_posix(), path.read_bytes(), settings)
        pool.extend(c for c in result.chunks if not code_only or c.kind in CODE_KINDS)
        if len(pool) >= 4 * want:
            break
    rng = random.Random(seed)
    return rng.sample(pool, min(want, len(pool)))


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localidx.invalid",
                    "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
                   cwd=cwd, check=True, capture_output=True)


def count_lines(root: Path) -> int:
    total = 0
    for p in root.rglob("*.py"):
        with open(p, "rb") as fh:
            total += sum(1 for _ in fh)
    return total


def stdlib_repo(root: Path, min_lines: int) -> tuple[list[str], int]:
    """A fresh git repository at ``root`` holding copies of whole stdlib packages (``STDLIB_PACKAGES`` in order)
    until it has ``min_lines`` lines of Python; one commit. Returns (packages, lines)."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    taken, lines = [], 0
    for name in STDLIB_PACKAGES:
        if lines >= min_lines:
            break
        shutil.copytree(STDLIB / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        taken.append(name)
        lines = count_lines(root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "stdlib subset")
    return taken, lines


def tiny_repo(root: Path) -> Path:
    """An empty-ish git repository (one README), for opening an ``Index`` over a synthetic table."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "README.md").write_text("synthetic benchmark repository\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def du_mb(path: Path) -> float:
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total / 1e6


def cpu_self() -> float:
    """User + system CPU seconds of this process (every thread, ONNX Runtime's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def in_child(target, *args):
    """``target(*args, queue)`` in a fresh spawned process (its own imports, model and peak RSS); what it puts on
    the queue."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank-interpolated percentile (q in 0..100)."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out


def _proc_sample(pid: int) -> tuple[float, float] | None:
    """(CPU seconds, RSS MB) of one process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime 14, stime 15, rss 24 (1-based in proc(5)).
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE / 1e6


class TreeMonitor:
    """Samples a process and all its descendants (forkserver workers included, which the root never reaps) every
    ``interval`` seconds: total CPU seconds (last sample of each pid, so a worker's final < interval is missed),
    peak RSS of the largest single process and peak RSS summed over the tree."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid = pid
        self.interval = interval
        self.cpu: dict[int, float] = {}
        self.peak_single_mb = 0.0
        self.peak_tree_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "TreeMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        tree = 0.0
        for p in _descendants(self.pid):
            got = _proc_sample(p)
            if got is None:
                continue
            cpu, rss = got
            self.cpu[p] = max(self.cpu.get(p, 0.0), cpu)
            self.peak_single_mb = max(self.peak_single_mb, rss)
            tree += rss
        self.peak_tree_mb = max(self.peak_tree_mb, tree)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())
