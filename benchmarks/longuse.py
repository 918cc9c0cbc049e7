"""Benchmark: does localidx stay fast with use? N consecutive commits of a real repository, each indexed through the
installed git hooks, as a developer's checkouts would.

A clone of ``--repo`` (a local git repository with a long history) is checked out at the commit N first-parent
commits before its head and indexed once (``localidx index``); then the hooks are installed and every later commit is
checked out with ``git checkout --detach``, which fires post-checkout and its background ``localidx hook-run`` (no
daemon: the in-process pass). For each commit: the time from the checkout to the end of its pass, and three fixed
queries through the library's search. Per block of ``--block`` commits: the median pass time, the query p50, and the
files and bytes in the state dir. At the end: last block / first block for each (goal: at most 1.2x).

    nice .venv/bin/python benchmarks/longuse.py --repo /path/to/attrs --commits 500 [--model static-minilm]

Everything is written under ``--work`` (default: a new temp dir, removed unless ``--keep``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# benchmarks/hooks.py's wait for the hooks' background pass (loaded by path: the repository's hooks/ folder holds
# the hook templates under the same name).
_spec = importlib.util.spec_from_file_location("hooks_benchmark", Path(__file__).resolve().parent / "hooks.py")
_hooks_benchmark = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hooks_benchmark)
wait_idle = _hooks_benchmark.wait_idle

QUERIES = ("validate attribute values", "convert a class to a dict", "compare instances for equality")
IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localidx.invalid", "-c", "advice.detachedHead=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def disk(state: Path) -> tuple[int, float]:
    files = [p for p in state.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="a local git repository with a long history")
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--model", default="static-minilm")
    parser.add_argument("--work", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.commits < 1 or args.block < 1:
        print("error: --commits and --block must be at least 1", file=sys.stderr)
        return 2
    if not (Path(args.repo) / ".git").exists() and not (Path(args.repo) / "HEAD").exists():
        print(f"error: {args.repo} is not a git repository", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="localidx-longuse-"))
    clone, state = work / "clone", work / "state"
    if clone.exists() or state.exists():
        print(f"error: {work} already holds a run; name an empty --work", file=sys.stderr)
        return 2
    os.environ.update(LOCALIDX_HOME=str(state), LOCALIDX_EMBED_MODEL=args.model, HF_HUB_OFFLINE="1")
    try:
        return run(args, clone, state)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


def run(args, clone: Path, state: Path) -> int:
    from localidx.config import load_settings
    from localidx.embed import get_embedder
    from localidx.retrieve.search import search
    from localidx.store.index import open_index

    git(Path.cwd(), "clone", "-q", "--no-checkout", str(Path(args.repo).resolve()), str(clone))
    commits = git(clone, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    commits = commits[-(args.commits + 1):]
    git(clone, "checkout", "-q", "--detach", commits[0])
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "localidx", "index"], cwd=clone, check=True, capture_output=True)
    print(f"first index at {commits[0][:10]}: {time.perf_counter() - started:.1f} s; "
          f"{len(commits) - 1} commits follow through the hooks (model {args.model})")
    subprocess.run([sys.executable, "-m", "localidx", "hooks", "install"], cwd=clone, check=True,
                   capture_output=True)
    settings = load_settings(clone)
    embedder = get_embedder(settings.embed_model)

    def query_ms() -> list[float]:
        idx = open_index(clone, True, settings, read_only=True, embedder=embedder)
        try:
            out = []
            for q in QUERIES:
                t0 = time.perf_counter()
                search(idx, q, k=10)
                out.append((time.perf_counter() - t0) * 1000)
            return out
        finally:
            idx.close()

    query_ms()  # warm the embedder
    blocks = []
    passes: list[float] = []
    queries: list[float] = []
    for n, sha in enumerate(commits[1:], start=1):
        t0 = time.perf_counter()
        git(clone, "checkout", "-q", "--detach", sha)
        wait_idle(clone)
        passes.append(time.perf_counter() - t0)
        queries.extend(query_ms())
        if n % args.block == 0 or n == len(commits) - 1:
            files, mb = disk(state)
            block = (statistics.median(passes), statistics.median(queries), files, mb)
            blocks.append(block)
            print(f"commits {n - len(passes) + 1:>4}-{n:<4}  pass p50 {block[0]:6.2f} s  max {max(passes):6.2f} s  "
                  f"query p50 {block[1]:6.1f} ms  state dir {files} files {mb:7.1f} MB", flush=True)
            passes, queries = [], []
    if len(blocks) > 1:
        first, last = blocks[0], blocks[-1]
        print(f"last block / first block: pass {last[0] / first[0]:.2f}x  query {last[1] / first[1]:.2f}x  "
              f"files {last[2] / first[2]:.2f}x  bytes {last[3] / first[3]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
