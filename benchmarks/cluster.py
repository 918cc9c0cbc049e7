"""Benchmark: the cluster job (``localidx cluster index``) on a local Ray instance with 1 and 2 CPU workers.

Four git repositories are built in /tmp from standard-library packages (``--packages``; about 7k lines, 650 chunks
by default). For each worker count the job indexes them from scratch into a fresh shared database with the real
default model (one embedding actor per worker, one ONNX thread each; ``ray.init(num_cpus=N)``), then once more after
a commit that edits one function (the daily incremental run). For comparison, ``localidx index`` indexes the same
repositories one after the other on this machine (every core). Printed per run: chunks, wall seconds (whole job, and
the Ray pipeline alone: prepare -> chunk -> embed -> write), chunks/s, CPU seconds of the whole process tree (Ray's
workers included) and chunks per CPU-second, and the scaling factor from 1 to 2 workers.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cluster.py [--packages json,concurrent,wsgiref,xmlrpc]
                                   [--workers 1,2] [--model fake] [--no-local] [--ray ADDRESS] [--work DIR]

No GPU here: GPU actor throughput is not measured (the job starts one actor per GPU with ``num_gpus=1`` when the
cluster has GPUs; ``--ray ADDRESS`` runs this benchmark on such a cluster). Not a timed test: machines are noisy (the load average is printed); run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, WORK, TreeMonitor, du_mb, git, loadavg  # noqa: E402



def edit_one_function(repo: Path) -> None:
    """Add a comment line under the first top-level function of the repository's first Python file that has one."""
    for path in sorted(repo.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        at = text.find("\ndef ")
        if at >= 0:
            end = text.index("\n", at + 1)
            path.write_text(text[: end + 1] + "    # edited\n" + text[end + 1 :], encoding="utf-8")
            return
    raise SystemExit(f"no top-level function to edit in {repo}")


def build_repos(base: Path, packages: list[str]) -> dict[str, Path]:
    repos = {}
    for name in packages:
        root = base / name
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(STDLIB / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "stdlib package")
        repos[name] = root
    return repos


def cpu_of(monitor: TreeMonitor) -> float:
    return sum(monitor.cpu.values())


RAY_ADDRESS: str | None = None  # --ray: run on that cluster instead of a local instance


def job(specs, uri: Path, clones: Path, workers: int, model: str = "") -> dict:
    from localidx.cluster.pipeline import run_job
    from localidx.embed import DEFAULT_MODEL

    with TreeMonitor(os.getpid(), interval=0.2) as monitor:
        started = time.perf_counter()
        stats = run_job(specs, str(uri), model=model or DEFAULT_MODEL, workers=workers, clones=clones,
                        ray_address=RAY_ADDRESS).to_dict()
        wall = time.perf_counter() - started
        monitor.sample()
    cpu = cpu_of(monitor)
    return {**stats, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_tree_mb": round(monitor.peak_tree_mb),
            "per_cpu_s": round(stats["chunks_written"] / cpu, 2) if cpu else 0.0, "load": loadavg()}


def local_baseline(repos: dict[str, Path], work: Path) -> dict:
    from localidx.config import load_settings
    from localidx.index.indexer import run_index

    chunks = embedded = 0
    with TreeMonitor(os.getpid(), interval=0.2) as monitor:
        started = time.perf_counter()
        for name, root in repos.items():
            settings = load_settings(root, {"home": str(work / "local" / name)}, env={})
            stats = run_index(root, True, settings)
            chunks += stats.chunks_written
            embedded += stats.chunks_embedded
        wall = time.perf_counter() - started
        monitor.sample()
    cpu = cpu_of(monitor)
    return {"chunks": chunks, "embedded": embedded, "wall_s": round(wall, 1), "rate": round(chunks / wall, 2),
            "cpu_s": round(cpu, 1), "per_cpu_s": round(chunks / cpu, 2) if cpu else 0.0, "load": loadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="json,concurrent,wsgiref,xmlrpc")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--work", type=Path, default=WORK / "cluster")
    parser.add_argument("--no-local", action="store_true", help="Skip the `localidx index` baseline.")
    parser.add_argument("--model", default="", help="The embedding model (default: the real default model; `fake` "
                        "measures checkout, chunking, writing and Ray alone).")
    parser.add_argument("--ray", default=None, help="A Ray cluster's address (GPU actors where it has GPUs; --work "
                        "must then be on a filesystem every node sees).")
    args = parser.parse_args()
    global RAY_ADDRESS
    RAY_ADDRESS = args.ray
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["LOCALIDX_REGISTRY"] = str(args.work / "registry.json")  # keep the user's registry out of it
    from localidx.cluster.manifest import RepoSpec

    packages = args.packages.split(",")
    shutil.rmtree(args.work, ignore_errors=True)
    repos = build_repos(args.work / "repos", packages)
    specs = [RepoSpec(name=name, url=str(root), ref="HEAD") for name, root in repos.items()]
    print(f"{len(repos)} repositories ({', '.join(packages)}), {os.cpu_count()} cores, load {loadavg()}")

    results = {}
    for workers in (int(w) for w in args.workers.split(",")):
        # Each worker count starts from scratch: empty database, no cached vectors (the model itself is warm on
        # disk).
        uri = args.work / f"shared-{workers}"
        clones = args.work / f"clones-{workers}"
        full = job(specs, uri, clones, workers, args.model)
        repo = repos[packages[0]]
        edit_one_function(repo)
        git(repo, "commit", "-qam", "edit one function")
        incremental = job(specs, uri, clones, workers, args.model)
        git(repo, "revert", "--no-edit", "HEAD")
        results[workers] = {"full": full, "incremental": incremental, "disk_mb": round(du_mb(uri), 1)}
        print(f"\n{workers} worker(s): full job {full['chunks_written']} chunks in {full['wall_s']} s "
              f"(pipeline {full['pipeline_s']} s: {full['rate']} chunks/s; commit {full['commit_s']} s, indexes "
              f"{full['index_s']} s)")
        print(f"  CPU {full['cpu_s']} s over the process tree ({full['per_cpu_s']} chunks per CPU-second), peak "
              f"tree RSS {full['peak_tree_mb']} MB, load {full['load']}")
        print(f"  incremental (one function edited): {incremental['wall_s']} s, {incremental['files_processed']} "
              f"file(s) chunked, {incremental['chunks_embedded']} chunk(s) embedded, "
              f"{incremental['chunks_reused']} vectors reused; shared database {results[workers]['disk_mb']} MB")
    if args.model != "fake":
        # The same job with the fake embedder: what checkout, chunking, writing and Ray cost without the model.
        top = max(results)
        fake = job(specs, args.work / "shared-fake", args.work / "clones-fake", top, model="fake")
        results["fake-model"] = fake
        print(f"\nwithout the model (fake embedder, {top} workers): {fake['chunks_written']} chunks, pipeline "
              f"{fake['pipeline_s']} s ({fake['rate']} chunks/s), CPU {fake['cpu_s']} s ({fake['per_cpu_s']} chunks "
              f"per CPU-second), load {fake['load']}")
    counts = sorted(k for k in results if isinstance(k, int))
    if len(counts) >= 2:
        low, high = results[counts[0]]["full"], results[counts[-1]]["full"]
        print(f"\nscaling {counts[0]} -> {counts[-1]} workers: pipeline chunks/s x{high['rate'] / low['rate']:.2f}, "
              f"whole job x{low['wall_s'] / high['wall_s']:.2f}")
    if not args.no_local:
        base = local_baseline(repos, args.work)
        results["local"] = base
        print(f"\nlocalidx index (the same repositories, one after the other, every core): {base['chunks']} chunks in "
              f"{base['wall_s']} s ({base['rate']} chunks/s; {base['per_cpu_s']} per CPU-second), load {base['load']}")
    (args.work / "results.json").write_text(json.dumps(results, indent=2))
    print(f"\nfigures: {args.work / 'results.json'}")


if __name__ == "__main__":
    main()
