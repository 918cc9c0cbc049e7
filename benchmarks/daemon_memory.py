"""Benchmark: what the daemons of five repositories searched one after another hold, right after the searches and
once they have been idle.

Five small repositories (default: attrs, ky, echo, viper and flask, cloned from git dirs under ``--mirrors``, as the
``fetch`` tool leaves them) are each indexed (``localidx index``) and searched three times (``localidx search``, the
CLI's default daemon use: the first search runs in its own process and starts the work tree's daemon in the
background, the next ones go through it). Then ``localidx daemon list --json`` is read at once and again after
``--release`` seconds plus a margin (the benchmark sets ``daemon_release_s`` to ``--release``; the default is 300).
Printed: each daemon's work tree, RSS, threads and idle time at both moments, their count against
``daemon_max_running`` and the total RSS. Goal: at most ``daemon_max_running`` daemons, under 600 MB RSS in all when
idle. Every daemon is stopped at the end. Everything (state dir, runtime dir, clones) lives under ``--work``; the
daemons of the user's own runtime dir are not seen or touched.

    .venv/bin/python benchmarks/daemon_memory.py [--mirrors /work/.mirror] [--release 20] \\
        [--work /tmp/localidx-bench/daemon-memory] [--localidx CHECKOUT]

Uses the default embedding model (static-minilm). Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
REPOS = {"attrs": "python-attrs+attrs", "ky": "sindresorhus+ky", "echo": "labstack+echo", "viper": "spf13+viper",
         "flask": "pallets+flask"}
QUERIES = ("how are errors handled", "configuration loading", "parse the request")


def run(cwd: Path, env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout


def daemons(cwd: Path, env: dict) -> list[dict]:
    return json.loads(run(cwd, env, "daemon", "list", "--json"))["daemons"]


def pss_mb(pid: int) -> float:
    """The process's proportional set size: shared pages (the libraries every daemon maps) split between the
    processes that map them, so that the daemons' sum is the memory they take together."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def show(label: str, found: list[dict]) -> float:
    total = pss = 0.0
    print(f"{label}: {len(found)} daemons")
    for daemon in sorted(found, key=lambda d: str(d.get("root"))):
        memory = daemon.get("memory") or {}
        total += memory.get("rss_mb") or 0
        share = pss_mb(int(daemon.get("pid") or 0))
        pss += share
        print(f"  {Path(str(daemon.get('root'))).name:<6} pid {daemon.get('pid'):>7}"
              f"  RSS {memory.get('rss_mb', 0):4.0f} MB"
              f" (anon {memory.get('anon_mb', 0):4.0f}, files {memory.get('file_mb', 0):4.0f}), PSS {share:4.0f} MB"
              f"  {memory.get('threads', 0):3d} threads  idle {daemon.get('idle_s', 0):4.0f} s"
              f"  released {memory.get('released')}")
    print(f"  total RSS {total:.0f} MB, PSS {pss:.0f} MB")
    return total


def wait_for_daemon(cwd: Path, env: dict, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run([sys.executable, "-m", "localidx", "daemon", "status", "--json"], cwd=cwd, env=env,
                              capture_output=True, text=True)
        if done.returncode == 0 and json.loads(done.stdout).get("state") == "running":
            return
        time.sleep(0.5)
    raise SystemExit(f"no daemon answered for {cwd} within {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--release", type=float, default=20.0, help="daemon_release_s for the daemons started here")
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-bench/daemon-memory"))
    parser.add_argument("--localidx", type=Path, default=HERE, help="the checkout whose localidx runs (default: this)")
    args = parser.parse_args()

    if args.work.exists():
        shutil.rmtree(args.work)
    runtime = args.work / "run"
    runtime.mkdir(parents=True, mode=0o700)
    env = {**os.environ, "PYTHONPATH": str(args.localidx), "LOCALIDX_HOME": str(args.work / "home"), "XDG_RUNTIME_DIR":
           str(runtime), "LOCALIDX_REGISTRY": str(args.work / "registry.json"), "LOCALIDX_DAEMON": "auto",
           "LOCALIDX_DAEMON_RELEASE_S": str(args.release), "HF_HUB_OFFLINE": "1"}
    env.pop("CI", None)
    roots = []
    try:
        for name, mirror in REPOS.items():
            root = args.work / name
            subprocess.run(["git", "clone", "-q", str(args.mirrors / mirror / "repo"), str(root)], check=True)
            roots.append(root)
            started = time.perf_counter()
            run(root, env, "index", "-q")
            indexed = time.perf_counter() - started
            run(root, env, "search", QUERIES[0])  # in this process; starts the daemon in the background
            wait_for_daemon(root, env)
            for query in QUERIES:
                run(root, env, "search", query)
            files = len(subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout.split())
            print(f"{name}: {files} files, indexed in {indexed:.1f} s, searched {1 + len(QUERIES)} times", flush=True)
        first = daemons(roots[-1], env)
        limit = 3  # daemon_max_running's default
        print()
        show(f"right after the searches (daemon_max_running {limit})", first)
        time.sleep(args.release + 10)
        print()
        total = show(f"after {args.release + 10:g} s idle (daemon_release_s {args.release:g})", daemons(roots[-1], env))
        count = len(daemons(roots[-1], env))
        print(f"\n{count} daemons (goal <= {limit}), {total:.0f} MB RSS in all when idle (goal < 600 MB)")
    finally:
        for root in roots:
            subprocess.run([sys.executable, "-m", "localidx", "daemon", "stop"], cwd=root, env=env,
                           capture_output=True)
        for daemon in daemons(args.work, env) if roots else []:
            try:
                os.kill(int(daemon["pid"]), signal.SIGTERM)
            except (OSError, ValueError, KeyError):
                pass


if __name__ == "__main__":
    main()
