"""Benchmark: warm query latency of localidx beside semble, on the same repositories and questions, in one run.

Each repository is indexed by both (localidx with the default static-minilm model, in this process; semble in a
worker process of its own virtual environment, ``--semble-python``). Then every question is asked in turn, one after
the other so that both see the same load: semble's ``SembleIndex.search(q, top_k=10)`` (timed inside its process),
localidx's ``search_response(index, q, k=10)`` on an index opened once, with the in-memory copy (``store/hot.py``)
and without it (``LOCALIDX_HOT=0``, the LanceDB path); ``search/query`` sent to the work tree's daemon over one
connection (the daemon's copy loaded first: the time of a request, socket and JSON included); and
``localidx search --json -k 10 Q`` run from the shell with that daemon (a whole process, timed from outside: the
interpreter's start, the fast entry, the round trip and the printing). Printed: p50 / p95 of wall time per variant,
the p50 of CPU time (this process's, all threads; for the daemon and the shell, none), their ratios to semble's,
and the memory of the copy: its arrays (also per 100k chunks) and what this process's anonymous memory grew by
when it loaded the copy, after 20 searches through LanceDB had warmed what those hold.

semble reads a model2vec model. Without access to a model hub, ``--semble-model`` is a directory in model2vec's
format made from localidx's own static-minilm table (the same tokenizer and dimension, 256, as semble's default
potion model, so the query embedding costs both about the same): ``tokenizer.json`` copied from
``localidx/embed/minilm/``, ``model.safetensors`` holding the table (``<cache>/models/static-minilm-*/table.f32.npy``)
as ``embeddings``, and ``config.json`` ``{"model_type": "model2vec", "hidden_dim": 256, "normalize": true}``.

Synthetic sizes (``--synthetic 10000,65000``): a git repository of copies of standard-library packages (the
packages of ``_corpus.STDLIB_PACKAGES`` copied again under ``copy<n>/``), grown until it holds about that many chunks
at 22 lines a chunk; localidx cuts about 1.5 times as many (65000 gives 100k chunks). The copies repeat each other's
text, which both tools index as separate chunks (and the copy holds once: its text column is then a code per row).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/side_by_side.py --semble-python /tmp/semble/bin/python \\
        --semble-model /tmp/semble-model --repos /tmp/flask,/tmp/aiohttp --synthetic 65000

Not a timed test: machines are noisy; run it, read it, quote it.
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
    from localidx.index.indexer import run_index
    from localidx.store.index import open_index

    settings = load_settings(root, {"home": str(home)})
    started = time.perf_counter()
    run_index(root, True, settings)
    took = time.perf_counter() - started
    return open_index(root, True, settings, read_only=True), took


def start_daemon(root: Path, chunks: int, env: dict):
    """The work tree's daemon started, once its copy of the index is loaded: a connection to it."""
    from localidx.config import load_settings
    from localidx.interface.client import connect

    subprocess.run([sys.executable, "-m", "localidx", "daemon", "start"], cwd=root, env=env, check=True,
                   capture_output=True)
    settings = load_settings(root)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        client = connect(root, True, settings, timeout=60, restart=False)
        client.request("search/query", {"query": "warm up", "k": 1}, timeout=600)  # its first query starts the load
        client.close()
        client = connect(root, True, settings, timeout=60, restart=False)
        loaded = client.hello.get("daemon", {}).get("memory", {}).get("in_memory", {})
        if loaded.get("chunks") == chunks:
            return client, client.hello["daemon"]["memory"]
        client.close()
        time.sleep(2)
    raise SystemExit("the daemon did not load its copy of the index")


def memory_mb() -> float:
    """This process's anonymous memory (what the daemon reports as ``anon_mb``), after a collection and a trim."""
    import gc

    from localidx.daemon.memory import trim, usage

    gc.collect()
    trim()
    return float(usage()["anon_mb"])


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
    os.environ["LOCALIDX_HOT"] = "0"
    for query in QUESTIONS[:20]:
        search_module.search_response(index, query, k=10)
    before_mb = memory_mb()
    load_started = time.perf_counter()
    copy = hot.wait(table, 1800)
    load_s = time.perf_counter() - load_started
    grown_mb = memory_mb() - before_mb
    # as installed: a package's modules compiled once (an installer writes them), not at every start
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["LOCALIDX_HOT"] = "1"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(search_module.__file__).parents[1])],
                   env=env, check=True)
    daemon, daemon_memory = start_daemon(root, copy.size, env)
    shell = [args.localidx] if args.localidx else [sys.executable, "-m", "localidx"]
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

    def in_daemon(query: str) -> tuple[float, float]:
        started = time.perf_counter()
        daemon.request("search/query", {"query": query, "k": 10}, timeout=120)
        return (time.perf_counter() - started) * 1e3, 0.0

    def from_shell(query: str) -> tuple[float, float]:
        started = time.perf_counter()
        subprocess.run([*shell, "search", "--json", "-k", "10", query], cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        return (time.perf_counter() - started) * 1e3, 0.0

    variants = {"semble": semble, "localidx (memory)": lambda q: localidx(q, True),
                "localidx (LanceDB)": lambda q: localidx(q, False), "localidx daemon (search/query)": in_daemon,
                "localidx search from the shell (daemon)": from_shell}
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
    daemon.close()
    subprocess.run([sys.executable, "-m", "localidx", "daemon", "stop"], cwd=root, env=env, capture_output=True)
    os.environ.pop("LOCALIDX_HOT", None)
    walls = {name: [wall for wall, _cpu in values] for name, values in times.items()}
    cpus = {name: [cpu for _wall, cpu in values] for name, values in times.items()}
    base = percentile(walls["semble"], 50), percentile(walls["semble"], 95), percentile(cpus["semble"], 50)
    out = {"repo": label, "localidx_chunks": copy.size if copy else None, "semble_chunks": ready["chunks"],
           "localidx_index_s": round(index_s, 1), "semble_index_s": round(ready["index_s"], 1),
           "memory_load_s": round(load_s, 2), "memory_mb": round(copy.nbytes() / 1e6, 1),
           "memory_mb_per_100k": round(copy.nbytes() / 1e6 * 100_000 / max(copy.size, 1), 1),
           "process_anon_grew_mb": round(grown_mb, 1),
           "process_anon_grew_mb_per_100k": round(grown_mb * 100_000 / max(copy.size, 1), 1),
           "daemon_rss_mb": daemon_memory.get("rss_mb"), "daemon_anon_mb": daemon_memory.get("anon_mb"),
           "load": loadavg()}
    for name in times:
        p50, p95, cpu = percentile(walls[name], 50), percentile(walls[name], 95), percentile(cpus[name], 50)
        out[name] = {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "x_semble_p50": round(p50 / base[0], 2),
                     "x_semble_p95": round(p95 / base[1], 2)}
        if cpu:
            out[name].update({"cpu_p50_ms": round(cpu, 2), "x_semble_cpu_p50": round(cpu / base[2], 2)})
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
    parser.add_argument("--localidx", default="", help="the localidx script timed from the shell (default: this "
                                                        "interpreter's -m localidx)")
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
