"""Benchmark: context pack latency through a warm daemon at ~100k chunks, per profile, with the stage timings.

The repository is real: copies of the standard library's ``.py`` files (no tests, no site-packages) under
``v0/``, ``v1/``, ... until the dry run counts ``--chunks`` chunks, one commit. It is indexed with
``localidx index -q --no-embed`` (real chunks, [META], the full-text index and the call relations), then every row
gets a seeded random 384-d unit vector written straight into the table (embedding 100k chunks with the real model
would take hours on 2 cores; query embedding still runs the real model in the daemon), and ``ensure_indexes()``
builds the ANN index. Then ``localidx daemon start`` (watcher off); its reconcile on start finds nothing changed.

Printed: for each profile, ``context/build`` round trips through one ``Client`` over the socket (5 warm-up, then the
questions), p50 / p95 / max, the mean pack (matches, tokens) and the median of each stage's time from the
response's ``stats.timingsMs``; ``search/query`` (k=10) through the same socket for comparison; the daemon's RSS.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/context.py [--chunks 100000] [--work /tmp/lxc] [--reuse]
        [--build-only] [--profiles balanced,legacy]

``--reuse`` keeps an existing repository and index under ``--work`` (building them takes ~12 minutes on 2 cores);
``--build-only`` stops after building, so the measuring run can wait for a quiet machine.
Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, git, loadavg, percentile, stdlib_files  # noqa: E402
from daemon import cli, fill_vectors, ms, vm, wait_idle  # noqa: E402
from query import QUERIES, WARMUP  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("LOCALIDX_EMBED_MODEL", None)

QUESTIONS = QUERIES[:30]  # the same questions as benchmarks/query.py


def build(repo: Path, want_chunks: int) -> int:
    """Copies of the stdlib under v0/, v1/, ... until the dry run counts ``want_chunks`` chunks; one commit."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    files = stdlib_files()
    copy, chunks = 0, 0
    while chunks < want_chunks:
        for src in files:
            dst = repo / f"v{copy}" / src.relative_to(STDLIB)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        _, proc = cli(repo, "index", "--dry-run", "--json", "-q", f"v{copy}")
        chunks += json.loads(proc.stdout)["chunks"]
        print(f"  copy v{copy}: {chunks} chunks in the dry run")
        copy += 1
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stdlib copies")
    return chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/lxc"))
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--reuse", action="store_true", help="keep the repository and index built by a former run")
    parser.add_argument("--profiles", default="balanced,legacy,conservative,aggressive")
    parser.add_argument("--build-only", action="store_true", help="build the repository and index, measure nothing")
    args = parser.parse_args()

    work = args.work.resolve()
    repo = work / "repo"
    run_dir = work / "run"
    os.environ["LOCALIDX_HOME"] = str(work / "home")
    os.environ["XDG_RUNTIME_DIR"] = str(run_dir)
    os.environ["LOCALIDX_WATCH"] = "0"
    os.environ["LOCALIDX_REGISTRY"] = str(work / "registry.json")
    os.environ.pop("LOCALIDX_SOCK", None)
    print(f"cores {len(os.sched_getaffinity(0))}   load average at start {loadavg()}")
    if not (args.reuse and repo.is_dir()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True, mode=0o700)
        run_dir.mkdir(mode=0o700)
        t0 = time.perf_counter()
        chunks = build(repo, args.chunks)
        print(f"repository        {chunks} chunks in the dry run, {time.perf_counter() - t0:.0f} s")
        wall, _ = cli(repo, "index", "-q", "--no-embed")
        print(f"index --no-embed  {wall:.0f} s")
        t0 = time.perf_counter()
        rows = fill_vectors(repo)
        print(f"vectors + indexes {rows} rows, {time.perf_counter() - t0:.0f} s (synthetic unit vectors)")

    if args.build_only:
        return
    from localidx.config import load_settings
    from localidx.interface.client import connect

    settings = load_settings(repo)
    cli(repo, "daemon", "start")
    try:
        client = connect(repo, True, settings, timeout=120)
        status = wait_idle(client)
        print(f"daemon            pid {client.hello['pid']}   state {status.get('state')}   "
              f"chunks {status.get('chunks')}   with vectors {status.get('chunks_with_vectors')}")
        for q in WARMUP:
            client.request("context/build", {"query": q}, timeout=300)
            client.request("search/query", {"query": q, "k": 10}, timeout=300)
        times = []
        for q in QUESTIONS:
            t0 = time.perf_counter()
            client.request("search/query", {"query": q, "k": 10}, timeout=300)
            times.append(time.perf_counter() - t0)
        print(f"search/query k=10       {ms(times)}")
        for profile in args.profiles.split(","):
            times, stages, matches, tokens, inside = [], {}, [], [], []
            for q in QUESTIONS:
                t0 = time.perf_counter()
                r = client.request("context/build", {"query": q, "profile": profile}, timeout=300)
                times.append(time.perf_counter() - t0)
                inside.append(r["stats"]["totalMs"] / 1e3)
                matches.append(len(r["matches"]))
                tokens.append(r["stats"].get("tokens", 0))
                for name, value in r["stats"]["timingsMs"].items():
                    stages.setdefault(name, []).append(value)
            print(f"context/build {profile:<12} {ms(times)}   in the daemon p50 {percentile(inside, 50) * 1e3:.1f} ms")
            print(f"    pack: mean {statistics.mean(matches):.1f} matches, {statistics.mean(tokens):.0f} tokens;"
                  f" stage medians (ms): " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items()))
        print(f"daemon memory     {vm(client.hello['pid'])}")
        client.close()
    finally:
        cli(repo, "daemon", "stop", check=False)


if __name__ == "__main__":
    main()
