"""Benchmark: the daemon end to end with the real model: save -> searchable latency (watcher debounce included),
warm queries through the socket (against the same queries in-process), CLI round trips with and without a
daemon, and the idle daemon's memory.

The repository is built in /tmp as a git repository (one commit) from copies of the standard library's ``.py``
files (no tests, no site-packages: about 800 files), indexed with ``localidx index -q`` (the default model; with
``--no-embed`` only chunks and the full-text index are written, and the daemon then embeds in the background while
it is measured, which the output says). Everything lives under ``--work`` (``LOCALIDX_HOME`` there, and a short
``XDG_RUNTIME_DIR`` for the socket). The daemon is started with ``localidx daemon start`` and stopped at the end,
on errors too.

Printed: (1) 20 editor-style atomic saves (temp file + ``os.replace``), each adding one new uniquely named
function to an existing file, and the time from the save until a ``search/query`` (bm25, k=1) through one open
``Client`` returns the new chunk; (2) 50 hybrid queries (after 5 warm-up) through the socket and the same in-process
on a read-only index (``localidx.retrieve.search``), and ``localidx search Q --json`` wall time with the daemon
running and stopped; (3) the daemon's VmRSS / VmHWM when idle after the queries, with the chunk count.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/daemon.py [--work /tmp/lxd] [--no-embed] [--smallest 1000]

``--smallest 1000`` takes the 1000 smallest files of the whole stdlib (tests included, 2.7 MB) instead: about the
size of repository the issue names, and one a 2-core machine embeds in minutes (README's figures use it).

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, git, loadavg, percentile, stdlib_files  # noqa: E402

WARMUP = ["open a file and read lines", "parse command line arguments", "http request headers",
          "json encoder default", "thread pool executor submit"]
PROBES = 20
CLI_RUNS = 5
CLI_QUERY = "call_soon_threadsafe event loop"


def ms(values: list[float]) -> str:
    return (f"p50 {percentile(values, 50) * 1e3:7.1f} ms   p95 {percentile(values, 95) * 1e3:7.1f} ms   "
            f"max {max(values) * 1e3:7.1f} ms   (n={len(values)})")


def cli(repo: Path, *args: str, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=repo, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise RuntimeError(f"localidx {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, proc


def build_repo(repo: Path, smallest: int | None = None) -> int:
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    if smallest:
        # About 1000 files that a 2-core machine can embed in minutes: the smallest of the whole stdlib.
        files = sorted((p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts),
                       key=lambda p: (p.stat().st_size, str(p)))[:smallest]
    else:
        files = stdlib_files()
    for src in files:
        dst = repo / src.relative_to(STDLIB)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stdlib")
    return len(files)


def atomic_save(path: Path, text: str) -> None:
    """As editors do: write a temp file next to it, fsync-free, then rename over the original."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def wait_idle(client, timeout: float = 600.0) -> dict:
    """Poll index/status until the daemon's writer is idle with nothing queued; returns the last status."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.request("index/status", {"check_work_tree": False}, timeout=60)
        writer = status.get("daemon", {}).get("writer", {})
        if writer.get("state") == "idle" and writer.get("queued", 0) == 0 and status.get("state") != "INDEXING":
            return status
        if time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def vm(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS", "VmHWM", "Threads")):
                key, value = line.split(":", 1)
                out[key] = value.strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/lxd"))
    parser.add_argument("--no-embed", action="store_true", help="initial index without vectors (BM25 only)")
    parser.add_argument("--smallest", type=int, default=None, help="use the N smallest stdlib files (tests included)")
    args = parser.parse_args()

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, mode=0o700)
    run_dir = work / "run"
    run_dir.mkdir(mode=0o700)
    os.environ["LOCALIDX_HOME"] = str(work / "home")
    os.environ["XDG_RUNTIME_DIR"] = str(run_dir)
    os.environ.pop("LOCALIDX_SOCK", None)
    repo = work / "repo"

    print(f"cores {len(os.sched_getaffinity(0))}   load average at start {loadavg()}   "
          f"HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')}")
    t0 = time.perf_counter()
    n_files = build_repo(repo, args.smallest)
    print(f"repository        {n_files} stdlib .py files, one commit, {time.perf_counter() - t0:.1f} s  ({repo})")

    index_args = ["index", "-q"] + (["--no-embed"] if args.no_embed else [])
    wall, _ = cli(repo, *index_args)
    print(f"initial index     localidx {' '.join(index_args)}: {wall:.1f} s")

    from localidx.client import connect, stop_daemon
    from localidx.config import load_settings
    from localidx.daemon import lifecycle

    settings = load_settings(repo)
    paths = lifecycle.daemon_paths(repo, True, settings)
    print(f"settings          watch_debounce_s {settings.watch_debounce_s}   daemon_idle_s {settings.daemon_idle_s}   "
          f"model {settings.embed_model}")

    try:
        wall, _ = cli(repo, "daemon", "start")
        _, proc = cli(repo, "daemon", "status", "--json")
        info = json.loads(proc.stdout)
        client = connect(repo, True, settings, timeout=30)
        hello = client.hello
        pid = hello["pid"]
        print(f"daemon start      {wall:.2f} s (CLI wall)   pid {pid}   watcher {hello['daemon'].get('watcher')}   "
              f"idle timeout {hello['daemon'].get('idle_timeout_s')} s   socket {info.get('socket')}")
        t0 = time.perf_counter()
        status = wait_idle(client)
        print(f"writer idle after {time.perf_counter() - t0:.1f} s   state {status.get('state')}   "
              f"chunks {status.get('chunks')}   with vectors {status.get('chunks_with_vectors')}")

        # (1) save -> searchable
        candidates = sorted((p for p in repo.rglob("*.py") if ".git" not in p.parts),
                            key=lambda p: p.stat().st_size)
        step = max(1, len(candidates) // (PROBES + 1))
        targets = [candidates[(i + 1) * step] for i in range(PROBES)]
        latencies, polls = [], []
        for n, path in enumerate(targets):
            ident = f"zz_probe_{n}_{secrets.token_hex(4)}"
            text = path.read_text() + f"\n\ndef {ident}():\n    return {n}\n"
            t_save = time.perf_counter()
            atomic_save(path, text)
            tries = 0
            while True:
                tries += 1
                found = client.request("search/query", {"query": ident, "mode": "bm25", "k": 1}, timeout=30)["matches"]
                if found and ident in found[0]["text"]:
                    latencies.append(time.perf_counter() - t_save)
                    polls.append(tries)
                    break
                if time.perf_counter() - t_save > 30:
                    print(f"  probe {n}: not found after 30 s ({path.relative_to(repo)})")
                    break
                time.sleep(0.005)
            time.sleep(0.3)
            wait_idle(client, 60)
        print(f"(1) save -> searchable (bm25 via socket, polled every ~5 ms + query time), sizes "
              f"{targets[0].stat().st_size}..{targets[-1].stat().st_size} B, debounce {settings.watch_debounce_s} s")
        if latencies:
            print(f"    {ms(latencies)}   polls per probe median {sorted(polls)[len(polls) // 2]}")
            print("    each: " + " ".join(f"{v * 1e3:.0f}" for v in latencies) + " ms")

        # (2) warm queries through the socket vs in-process
        from query import QUERIES

        for q in WARMUP:
            client.request("search/query", {"query": q, "k": 10}, timeout=60)
        sock_times = []
        for q in QUERIES:
            t0 = time.perf_counter()
            client.request("search/query", {"query": q, "k": 10}, timeout=60)
            sock_times.append(time.perf_counter() - t0)
        status = client.request("index/status", {"check_work_tree": False}, timeout=60)
        chunks = status.get("chunks")
        print(f"(2) hybrid k=10, {len(QUERIES)} queries after {len(WARMUP)} warm-up, {chunks} chunks "
              f"({status.get('chunks_with_vectors')} with vectors)")
        print(f"    socket (one Client)   {ms(sock_times)}")

        from localidx.store.index import open_index
        from localidx.retrieve import search

        index = open_index(repo, True, settings, read_only=True)
        try:
            t0 = time.perf_counter()
            for q in WARMUP:
                search(index, q, k=10)
            warm_s = time.perf_counter() - t0
            local_times = []
            for q in QUERIES:
                t0 = time.perf_counter()
                search(index, q, k=10)
                local_times.append(time.perf_counter() - t0)
        finally:
            index.close()
        print(f"    in-process read-only  {ms(local_times)}   (warm-up incl. model load {warm_s:.1f} s)")
        print(f"    socket overhead       p50 {(percentile(sock_times, 50) - percentile(local_times, 50)) * 1e3:+.1f} ms")

        cli_running = []
        for _ in range(CLI_RUNS):
            wall, proc = cli(repo, "search", CLI_QUERY, "--json")
            json.loads(proc.stdout)
            cli_running.append(wall)

        # (3) idle memory
        time.sleep(2.0)
        mem = vm(pid)
        print(f"(3) idle daemon pid {pid}: VmRSS {mem.get('VmRSS')}   VmHWM {mem.get('VmHWM')}   "
              f"threads {mem.get('Threads')}   chunks {chunks}")

        client.close()
        t0 = time.perf_counter()
        stop_daemon(paths)
        print(f"daemon stop       {time.perf_counter() - t0:.2f} s")
        cli_stopped = []
        for _ in range(CLI_RUNS):
            wall, proc = cli(repo, "search", CLI_QUERY, "--json")
            json.loads(proc.stdout)
            cli_stopped.append(wall)
        print(f"(2b) CLI `localidx search {CLI_QUERY!r} --json` wall, {CLI_RUNS} runs each")
        print(f"    daemon running   {ms(cli_running)}")
        print(f"    daemon stopped   {ms(cli_stopped)}")
    finally:
        try:
            if lifecycle.read_status(paths.status) is not None or paths.socket.exists():
                stop_daemon(paths)
        except Exception as exc:  # noqa: BLE001 - report, never mask the real error
            print(f"stopping the daemon failed: {exc}", file=sys.stderr)
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
