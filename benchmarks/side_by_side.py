"""Benchmark: warm query latency of localidx beside semble, on the same repositories and questions, in one run.

Each repository is indexed by both (localidx with the default static-minilm model, in this process; semble in a
worker process of its own virtual environment, ``--semble-python``). Then every question is asked in turn, one after
the other so that both see the same load: semble's ``SembleIndex.search(q, top_k=10)`` (timed inside its process),
localidx's ``search_response(index, q, k=10)`` on an index opened once, as the daemon answers, with the in-memory
copy (``store/hot.py``) and without it (``LOCALIDX_HOT=0``, the LanceDB path), and ``localidx search --json -k 10``
through the CLI's entry point in this process (settings, index opening and JSON output included). Printed: p50 / p95
of wall time per variant, the p50 of CPU time (the process's, all threads: on a machine others load, wall time is
mostly waiting for a core), and their ratios to semble's.

semble reads a model2vec model. Without access to a model hub, ``--semble-model`` is a directory in model2vec's
format made from localidx's own static-minilm table (the same tokenizer and dimension, 256, as semble's default
potion model, so the query embedding costs both about the same): ``tokenizer.json`` copied from
``localidx/embed/minilm/``, ``model.safetensors`` holding the table (``<cache>/models/static-minilm-*/table.f32.npy``)
as ``embeddings``, and ``config.json`` ``{"model_type": "model2vec", "hidden_dim": 256, "normalize": true}``.

Synthetic sizes (``--synthetic 10000,100000``): a git repository of copies of standard-library packages, grown until
localidx indexes about that many chunks.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/side_by_side.py --semble-python /tmp/semble/bin/python \\
        --semble-model /tmp/semble-model --repos /tmp/flask,/tmp/aiohttp --synthetic 10000

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, STDLIB_PACKAGES, WORK, git, loadavg, percentile  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = [
    "how is the request body read", "client session timeout", "parse multipart form data",
    "close the websocket connection", "cookie expiry", "register a route", "serve static files",
    "encode a json response", "connection pool limit", "follow redirects", "url routing", "handle exceptions",
    "graceful shutdown", "chunked transfer encoding", "basic authentication header", "resolve a host name",
    "test client", "stream the response", "signal when the application starts", "read configuration from a file",
    "retry on failure", "log a warning", "compress data", "parse a date", "thread pool", "temporary directory",
    "escape html", "decode bytes to text", "compare two versions", "lock around shared state",
]

SEMBLE_WORKER = r"""
import json, sys, time
from semble import SembleIndex
root, model = sys.argv[1], sys.argv[2]
started = time.perf_counter()
index = SembleIndex.from_path(root, model_path=model)
print(json.dumps({"ready": True, "chunks": len(index.chunks), "index_s": time.perf_counter() - started}), flush=True)
for line in sys.stdin:
    query = json.loads(line)
    t, c = time.perf_counter(), time.process_time()
    found = index.search(query, top_k=10)
    print(json.dumps({"ms": (time.perf_counter() - t) * 1e3, "cpu_ms": (time.process_time() - c) * 1e3,
                      "n": len(found)}), flush=True)
"""


def synthetic_repo(root: Path, chunks: int) -> Path:
    """A repository of standard-library packages, copied again under ``copy<n>/`` until it has about ``chunks``
    chunks (at about 22 lines of Python a chunk, as localidx chunks the standard library)."""
    marker = root / ".bench-chunks"
    if marker.exists() and marker.read_text() == str(chunks):
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    lines, copy = 0, 0
    while lines < chunks * 22:
        for name in STDLIB_PACKAGES:
            if lines >= chunks * 22:
                break
            target = root / f"copy{copy}" / name
            shutil.copytree(STDLIB / name, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "test*"))
            lines += sum(sum(1 for _ in open(p, "rb")) for p in target.rglob("*.py"))
        copy += 1
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "stdlib copies")
    marker.write_text(str(chunks))
    return root


def index_localidx(root: Path, home: Path):
    from localidx.config import load_settings
    from localidx.indexer import run_index
    from localidx.store.index import open_index

    settings = load_settings(root, {"home": str(home)})
    started = time.perf_counter()
    run_index(root, True, settings)
    took = time.perf_counter() - started
    return open_index(root, True, settings, read_only=True), took


def cli_search(root: Path, query: str) -> None:
    from localidx.cli import cli

    previous = Path.cwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["search", "--json", "-k", "10", "--no-daemon", query], standalone_mode=False)
    finally:
        os.chdir(previous)


def timed(action) -> tuple[float, float]:
    """Wall and CPU milliseconds of ``action()`` (CPU: this process, all its threads)."""
    started, cpu = time.perf_counter(), time.process_time()
    action()
    return (time.perf_counter() - started) * 1e3, (time.process_time() - cpu) * 1e3


def run_repo(label: str, root: Path, args) -> dict:
    import importlib

    from localidx.store import hot
    from localidx.store.index import pinned

    search_module = importlib.import_module("localidx.retrieve.search")
    home = Path(args.work) / "home"
    os.environ["LOCALIDX_HOME"] = str(home)
    index, index_s = index_localidx(root, home)
    table = pinned(index)
    load_started = time.perf_counter()
    copy = hot.wait(table)
    load_s = time.perf_counter() - load_started
    worker = subprocess.Popen([args.semble_python, "-c", SEMBLE_WORKER, str(root), args.semble_model],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = json.loads(worker.stdout.readline())

    def semble(query: str) -> tuple[float, float]:
        worker.stdin.write(json.dumps(query) + "\n")
        worker.stdin.flush()
        answer = json.loads(worker.stdout.readline())
        return answer["ms"], answer["cpu_ms"]

    def localidx(query: str, hot_on: bool) -> tuple[float, float]:
        os.environ["LOCALIDX_HOT"] = "1" if hot_on else "0"
        return timed(lambda: search_module.search_response(index, query, k=10))

    def via_cli(query: str) -> tuple[float, float]:
        os.environ["LOCALIDX_HOT"] = "1"
        return timed(lambda: cli_search(root, query))

    variants = {"semble": semble, "localidx (memory)": lambda q: localidx(q, True),
                "localidx (LanceDB)": lambda q: localidx(q, False), "localidx CLI entry (memory)": via_cli}
    for query in QUESTIONS[:5]:  # warm-up: models, caches, the CLI's first in-process load of this version
        for action in variants.values():
            action(query)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _round in range(args.rounds):
        for query in QUESTIONS:
            for name, action in variants.items():
                times[name].append(action(query))
    worker.stdin.close()
    worker.wait(timeout=60)
    os.environ.pop("LOCALIDX_HOT", None)
    walls = {name: [wall for wall, _cpu in values] for name, values in times.items()}
    cpus = {name: [cpu for _wall, cpu in values] for name, values in times.items()}
    base = percentile(walls["semble"], 50), percentile(walls["semble"], 95), percentile(cpus["semble"], 50)
    out = {"repo": label, "localidx_chunks": copy.size if copy else None, "semble_chunks": ready["chunks"],
           "localidx_index_s": round(index_s, 1), "semble_index_s": round(ready["index_s"], 1),
           "memory_load_s": round(load_s, 2), "memory_mb": round(copy.nbytes() / 1e6, 1) if copy else None,
           "load": loadavg()}
    for name in times:
        p50, p95, cpu = percentile(walls[name], 50), percentile(walls[name], 95), percentile(cpus[name], 50)
        out[name] = {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "cpu_p50_ms": round(cpu, 2),
                     "x_semble_p50": round(p50 / base[0], 2), "x_semble_p95": round(p95 / base[1], 2),
                     "x_semble_cpu_p50": round(cpu / base[2], 2)}
    index.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", default="", help="comma-separated git work trees to index and query")
    parser.add_argument("--synthetic", default="", help="comma-separated chunk counts of standard-library corpora")
    parser.add_argument("--semble-python", default="", help="the python of a virtual environment with semble")
    parser.add_argument("--semble-model", default="", help="a model2vec model directory for semble")
    parser.add_argument("--rounds", type=int, default=2, help="times each question is asked")
    parser.add_argument("--work", default=str(WORK / "side-by-side"))
    args = parser.parse_args()
    if not args.semble_python or not args.semble_model:
        parser.error("--semble-python and --semble-model are required")
    repos = [(Path(p).name, Path(p)) for p in args.repos.split(",") if p]
    for size in (int(s) for s in args.synthetic.split(",") if s):
        repos.append((f"stdlib-{size}", synthetic_repo(Path(args.work) / f"stdlib-{size}", size)))
    for label, root in repos:
        print(json.dumps(run_repo(label, root, args)), flush=True)


if __name__ == "__main__":
    main()
