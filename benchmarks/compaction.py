"""Benchmark: the index's size after many branch switches, against an index built fresh at the last one.

A clone of a repository (default: psf/requests, from a git dir such as the one ``fetch`` brings) is checked out at two
refs in turn, ``--switches`` times, and indexed after each checkout the way the post-checkout hook does it
(``localidx index`` in its own process, no daemon). Then the same last checkout is indexed into a fresh state dir.
Printed per switch and at the end: the chunk tables' bytes (the ``lancedb`` directory; the vector cache, which keeps
both branches' vectors on purpose, is a separate file and not counted), table versions and deletion files, and the
ratio to the fresh index. Goal: ratio <= 1.3.

    .venv/bin/python benchmarks/compaction.py --source /work/.mirror/psf+requests/repo \\
        [--refs v2.0.0 HEAD] [--switches 10] [--work /tmp/localidx-bench/compaction] [--localidx CHECKOUT]

``--localidx``: the checkout whose ``localidx`` the index runs use (default: this one), to compare with another
version. Uses ``LOCALIDX_EMBED_MODEL=static-minilm``. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def footprint(directory: Path) -> tuple[int, int, int]:
    """(bytes, version manifests, deletion files) under ``directory``."""
    size = versions = deletions = 0
    for folder, _dirs, files in os.walk(directory):
        part = os.path.basename(folder)
        for name in files:
            size += os.path.getsize(os.path.join(folder, name))
            versions += part == "_versions" and name.endswith(".manifest")
            deletions += part == "_deletions"
    return size, versions, deletions


def index(repo: Path, home: Path, checkout: Path) -> dict:
    env = {**os.environ, "LOCALIDX_HOME": str(home), "LOCALIDX_EMBED_MODEL": "static-minilm",
           "LOCALIDX_DAEMON": "never", "LOCALIDX_REGISTRY": str(home / "registry.json"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-m", "localidx", "index", "-q", "--json"], cwd=repo, env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="a git dir or URL to clone (psf/requests)")
    parser.add_argument("--refs", nargs=2, default=["v2.0.0", "HEAD"])
    parser.add_argument("--switches", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/localidx-bench/compaction"))
    parser.add_argument("--localidx", type=Path, default=HERE)
    args = parser.parse_args()

    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    repo = args.work / "repo"
    git(args.work, "clone", "-q", "--no-checkout", args.source, str(repo))
    refs = [git(repo, "rev-parse", ref).strip() for ref in args.refs]
    changed = len(git(repo, "diff", "--name-only", refs[0], refs[1]).splitlines())
    files = [len(git(repo, "ls-tree", "-r", "--name-only", ref).splitlines()) for ref in refs]
    print(f"{args.source}: {args.refs[0]} ({files[0]} files) <-> {args.refs[1]} ({files[1]} files): "
          f"{changed} files differ; localidx from {args.localidx}")
    home = args.work / "home"
    for switch in range(args.switches + 1):
        which = 0 if switch % 2 else 1  # the newest first, then the old ref, and so on
        git(repo, "checkout", "-q", "--force", refs[which])
        started = time.perf_counter()
        stats = index(repo, home, args.localidx)
        size, versions, deletions = footprint(home / "lancedb")
        label = "initial" if switch == 0 else f"switch {switch:2d}"
        print(f"{label}  {args.refs[which]:>8}  "
              f"{time.perf_counter() - started:5.1f} s  {stats['chunks_written']:5d} chunks written  "
              f"tables {size / 1e6:6.2f} MB  {versions:3d} versions  {deletions:3d} deletion files", flush=True)
    fresh = args.work / "fresh"
    index(repo, fresh, args.localidx)
    fresh_size, fresh_versions, fresh_deletions = footprint(fresh / "lancedb")
    cache = (home / "vectors.sqlite").stat().st_size if (home / "vectors.sqlite").exists() else 0
    print(f"after {args.switches} switches: tables {size / 1e6:.2f} MB, {versions} versions, "
          f"{deletions} deletion files")
    print(f"fresh index of the same checkout: tables {fresh_size / 1e6:.2f} MB, {fresh_versions} versions, "
          f"{fresh_deletions} deletion files")
    print(f"ratio {size / fresh_size:.2f} (goal <= 1.3); vector cache, not counted: {cache / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
