"""Benchmark: query latency of ``localidx.retrieve.search`` at 10k and 100k chunks, in-process, model loaded.

The table is real in its text and synthetic in its vectors: rows are built by the indexer's own ``_row`` from real
standard-library chunks (``chunk_file``), repeated under other paths (``v<copy>/<path>``, the path in the [META]
header changed with it) until the size is reached, each with a seeded random unit vector of the model's dimension.
They are written through ``ChunkStore.replace_files`` in the indexer's batch size, into an ``Index`` opened over a
tiny git repository in /tmp (``LOCALIDX_HOME`` under /tmp). The table grows from 10k to 100k; at each size ``ensure_indexes()`` is run and
timed (the full-text index; at 100k also the IVF_HNSW_SQ ANN index, which starts at ``ANN_MIN_ROWS``), then ~50
varied queries are timed per mode after warm-up queries: hybrid (the default linear fusion), bm25 only, vector only,
and the query embedding alone, through LanceDB (``LOCALIDX_HOT=0``); then the in-memory copy of the table version
(``localidx/store/hot.py``) is loaded (time and size printed) and the three modes are timed again from it; then a hybrid query step by step (snapshot, BM25 arm, query embedding, vector arm).
Also printed: disk of the table dir (as written, after ``compact()``, and after a cleanup of every old version), ``ensure_indexes()`` repeated with nothing new (the first repeat may still merge index segments; the second
is what every later indexing run pays), one ``set_vectors`` commit of 256 rows (the indexer's embedding commit), and
the vector cache's ``cache_get`` at that many keys.

Caveat: the files behind these rows do not exist, so each result's ``stale`` check is one failing ``os.stat``, a
little cheaper than the catalog lookup a real index makes.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/query.py [--sizes 10000,100000] [--work /tmp/localidx-bench/query]

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import (  # noqa: E402
    STDLIB, WORK, cpu_self, du_mb, loadavg, peak_rss_mb, percentile, stdlib_files, tiny_repo)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WARMUP = [
    "open a file and read lines",
    "parse command line arguments",
    "thread pool executor submit",
    "json decode error position",
    "http response status code",
]
QUERIES = [
    "how are HTTP headers parsed from the socket",
    "where is the event loop's call_soon scheduled callback run",
    "decode a quoted-printable email body",
    "create a temporary directory that is removed on exit",
    "compute the relative path between two directories",
    "retry when the connection is reset",
    "format a traceback for an exception",
    "SSL context certificate verification",
    "gzip compress a stream",
    "parse a date string in RFC 2822 format",
    "logging handler that rotates files by size",
    "read a zip archive member",
    "which function escapes HTML special characters",
    "thread-safe queue with a timeout on get",
    "subprocess pipe stdout read until EOF",
    "compile a regular expression with flags",
    "pickle protocol version check",
    "walk a directory tree recursively",
    "convert a string to a decimal with rounding",
    "lock acquire release context manager",
    "base64 encode bytes",
    "urlparse split netloc and path",
    "getaddrinfo resolve hostname",
    "deepcopy of a dictionary with memo",
    "csv writer quoting",
    "struct pack unpack binary format",
    "weak reference callback when object is collected",
    "signal handler for SIGINT",
    "abstract base class registration",
    "dataclass field default factory",
    "TarFile extractall filter",
    "shutil copytree ignore patterns",
    "os.environ get with default",
    "heapq push pop smallest",
    "bisect insort sorted list",
    "random choice weighted",
    "textwrap dedent indent",
    "inspect signature parameters",
    "functools lru_cache wrapper",
    "itertools groupby key",
    "socket bind listen accept",
    "select poll file descriptors",
    "mimetypes guess type from filename",
    "hashlib sha256 hexdigest",
    "unicodedata normalize NFC",
    "argparse add_subparsers",
    "configparser read ini sections",
    "xml element tree iterparse",
    "sqlite3 connect execute fetchall",
    "asyncio gather cancel on first exception",
]


def _file_rows(job):
    """Worker: the indexer's rows for one stdlib file (vector left empty)."""
    import pygit2

    from localidx.chunk import chunk_file
    from localidx.config import Settings
    from localidx.index.indexer import _row

    path, model_id = job
    data = Path(path).read_bytes()
    result = chunk_file(Path(path).relative_to(STDLIB).as_posix(), data, Settings())
    blob = str(pygit2.hash(data))
    return [_row(c, blob, model_id) for c in result.chunks]


def real_rows(want: int, model_id: str) -> list[list[dict]]:
    """Rows of real stdlib files, grouped by file, until ``want`` rows (on every core, before lancedb is imported)."""
    from localidx.index.workers import map_files

    files = stdlib_files()
    out, total = [], 0
    jobs = [(str(p), model_id) for p in files]
    for rows in map_files(_file_rows, jobs, len(os.sched_getaffinity(0))):
        if rows:
            out.append(rows)
            total += len(rows)
        if total >= want:
            break
    return out


def _variant(rows: list[dict], copy: int) -> list[dict]:
    if copy == 0:
        return [dict(r) for r in rows]
    out = []
    for r in rows:
        r = dict(r)
        old, new = r["path"], f"v{copy}/{r['path']}"
        r["id"] = hashlib.sha256(f"{r['id']}\0{copy}".encode()).hexdigest()[:32]
        r["path"] = new
        r["search_text"] = r["search_text"].replace(old, new)
        r["bm25_text"] = r["bm25_text"].replace(old, new)
        out.append(r)
    return out


def grow(index, files: list[list[dict]], start: int, target: int, batch_rows: int, rng) -> tuple[int, float, float]:
    """Write rows ``start`` .. ``target`` (whole files; copies of the real files under new paths), the indexer's
    way: one ``replace_files`` commit per ``batch_rows``. Returns (rows now, seconds, CPU seconds)."""
    import numpy as np

    per_round = sum(len(f) for f in files)
    written = start
    batch_paths: list[str] = []
    batch: list[dict] = []
    cpu0, t0 = cpu_self(), time.perf_counter()
    # Positions are counted in whole files: find the file where ``start`` falls (start is a file boundary).
    copy, offset = divmod(start, per_round)
    i, acc = 0, 0
    while acc < offset:
        acc += len(files[i])
        i += 1
    while written < target:
        if i == len(files):
            copy, i = copy + 1, 0
        rows = _variant(files[i], copy)
        i += 1
        vectors = rng.standard_normal((len(rows), index.store.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for r, v in zip(rows, vectors):
            r["vector"] = v.tolist()
        batch_paths.append(rows[0]["path"])
        batch.extend(rows)
        written += len(rows)
        if len(batch) >= batch_rows or written >= target:
            index.store.replace_files(batch_paths, batch)
            batch_paths, batch = [], []
    return written, time.perf_counter() - t0, cpu_self() - cpu0


def time_queries(func, queries: list[str]) -> tuple[list[float], float]:
    for q in WARMUP:
        func(q)
    times = []
    cpu0 = cpu_self()
    for q in queries:
        t0 = time.perf_counter()
        func(q)
        times.append((time.perf_counter() - t0) * 1000)
    return times, cpu_self() - cpu0


def main() -> None:
    # This benchmark measures the default model; done here, not at import (benchmarks/daemon.py imports QUERIES and
    # its --model must reach the daemon it starts).
    os.environ.pop("LOCALIDX_EMBED_MODEL", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--real", type=int, default=20000, help="distinct real chunks before copies are made")
    parser.add_argument("--work", type=Path, default=WORK / "query")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON object")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    from localidx.embed.onnx import default_model_dir

    _, model_id = default_model_dir()
    t0 = time.perf_counter()
    files = real_rows(min(args.real, sizes[-1]), model_id)
    n_real = sum(len(f) for f in files)
    mean_chars = sum(len(r["text"]) for f in files for r in f) / n_real
    print(f"corpus            {n_real} real chunks from {len(files)} stdlib files (mean text {mean_chars:.0f} chars), "
          f"rows built in {time.perf_counter() - t0:.1f} s; copies under v<N>/ paths beyond that")
    print(f"cores             {len(os.sched_getaffinity(0))}   load average at start {loadavg()}")

    import numpy as np

    from localidx.config import load_settings
    from localidx.store.index import open_index
    from localidx.retrieve import search
    from localidx.store.lance import ANN_MIN_ROWS

    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    root = tiny_repo(work / "repo")
    settings = load_settings(root, {"home": str(work / "home")})
    index = open_index(root, True, settings)
    t0 = time.perf_counter()
    index.embedder._load()
    print(f"model load        {time.perf_counter() - t0:.2f} s   ({index.embedder.model_id})")
    rng = np.random.default_rng(0)
    report: dict = {"real_chunks": n_real, "sizes": {}}
    rows = 0
    for size in sizes:
        before = rows
        rows, ingest_s, ingest_cpu = grow(index, files, rows, size, settings.write_batch_rows, rng)
        table = index.store.table()
        count = table.count_rows()
        table_dir = Path(index.store.db_dir) / f"{index.store.table_name}.lance"
        cpu0, t0 = cpu_self(), time.perf_counter()
        index.store.ensure_indexes()
        ensure_s, ensure_cpu = time.perf_counter() - t0, cpu_self() - cpu0
        indices = [f"{i.index_type}({', '.join(i.columns)})" for i in index.store.table().list_indices()]
        r: dict = {"rows": count, "ingest_s": ingest_s, "ingest_cpu_s": ingest_cpu, "ensure_s": ensure_s,
                   "ensure_cpu_s": ensure_cpu, "indices": indices, "disk_written_mb": du_mb(table_dir)}
        print(f"\n## {count:,} chunks")
        print(f"ingest            {ingest_s:.1f} s (cpu {ingest_cpu:.1f} s) for {count - before:,} new rows via "
              f"replace_files, {settings.write_batch_rows} rows per commit")
        ann = " + ANN (IVF_HNSW_SQ)" if count >= ANN_MIN_ROWS else ""
        print(f"ensure_indexes    {ensure_s:.1f} s (cpu {ensure_cpu:.1f} s): full-text{ann}; indices now "
              f"{', '.join(indices)}")

        timings = {}
        os.environ["LOCALIDX_HOT"] = "0"  # first through LanceDB, then from the in-memory copy (store/hot.py)
        load = {}

        def from_memory() -> None:
            from localidx.store import hot
            from localidx.store.index import pinned

            os.environ.pop("LOCALIDX_HOT", None)
            t0 = time.perf_counter()
            copy = hot.wait(pinned(index))
            load.update(s=time.perf_counter() - t0, mb=copy.nbytes() / 1e6 if copy else 0.0)
            print(f"in-memory copy    loaded in {load['s']:.1f} s, {load['mb']:.1f} MB of arrays")

        for label, func in (
            ("hybrid", lambda q: search(index, q, k=10)),
            ("bm25", lambda q: search(index, q, k=10, mode="bm25")),
            ("vector", lambda q: search(index, q, k=10, mode="vector")),
            ("query embedding", lambda q: index.embedder.embed_query(q)),
            ("memory", None),
            ("hybrid (memory)", lambda q: search(index, q, k=10)),
            ("bm25 (memory)", lambda q: search(index, q, k=10, mode="bm25")),
            ("vector (memory)", lambda q: search(index, q, k=10, mode="vector")),
        ):
            if func is None:
                from_memory()
                continue
            times, cpu = time_queries(func, QUERIES)
            timings[label] = {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95),
                              "max_ms": max(times), "cpu_ms_per_query": 1000 * cpu / len(times)}
            t = timings[label]
            print(f"{label:<22} p50 {t['p50_ms']:6.1f} ms   p95 {t['p95_ms']:6.1f} ms   max {t['max_ms']:6.1f} ms   "
                  f"cpu {t['cpu_ms_per_query']:5.1f} ms/query   ({len(times)} queries after {len(WARMUP)} warm-up)")
        r["latency"] = timings
        r["memory_load_s"], r["memory_mb"] = load.get("s"), load.get("mb")
        os.environ["LOCALIDX_HOT"] = "0"  # the stages below are LanceDB's

        # Where a hybrid query's time goes: the same steps search() takes, one by one.
        search_module = sys.modules["localidx.retrieve.search"]  # the package re-exports search(), hiding the module
        from localidx.retrieve import arms

        stage_ms: dict[str, list[float]] = {"snapshot": [], "bm25 arm": [], "query embedding": [], "vector arm": []}
        for q in WARMUP + QUERIES:
            marks = [time.perf_counter()]
            snap = index.store.snapshot()
            marks.append(time.perf_counter())
            arms.bm25_arm(snap, q, None, search_module.CANDIDATES, required=False)
            marks.append(time.perf_counter())
            vector = index.embedder.embed_query(q)
            marks.append(time.perf_counter())
            arms.vector_arm(snap, vector, None, search_module.CANDIDATES)
            marks.append(time.perf_counter())
            if q in QUERIES:
                for (name, values), a, b in zip(stage_ms.items(), marks, marks[1:]):
                    values.append((b - a) * 1000)
        r["hybrid_stages_p50_ms"] = {name: percentile(v, 50) for name, v in stage_ms.items()}
        print("hybrid stages          p50 " + "   ".join(f"{name} {ms:.1f} ms" for name, ms in
                                                    r["hybrid_stages_p50_ms"].items()))

        # Nothing new: the first repeat may still merge index segments (optimize); the second is the steady cost.
        again = []
        for _ in range(2):
            t0 = time.perf_counter()
            index.store.ensure_indexes()
            again.append(time.perf_counter() - t0)
        r["ensure_again_s"], r["ensure_steady_s"] = again
        print(f"ensure_indexes    again with nothing new: {again[0]:.2f} s, then {again[1]:.2f} s (steady)")
        ids = table.search().select(["id"]).limit(256).to_arrow().column("id").to_pylist()
        vecs = rng.standard_normal((len(ids), index.store.dim)).astype(np.float32)
        t0 = time.perf_counter()
        index.store.set_vectors(ids, vecs)
        r["set_vectors_256_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        pending = index.store.pending_vectors()
        r["pending_vectors_s"] = time.perf_counter() - t0
        print(f"writes at size    set_vectors(256 rows) {r['set_vectors_256_s']:.2f} s   pending_vectors() "
              f"{r['pending_vectors_s']:.2f} s ({len(pending)} pending)")

        # The vector cache at this many distinct texts: the indexer asks it for every written batch (2000 keys) and
        # every embedding commit (256 keys).
        have = index.store.cache_count()
        keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(count)]
        t0 = time.perf_counter()
        for start in range(have, count, 20_000):
            part = keys[start : start + 20_000]
            index.store.cache_put(part, rng.standard_normal((len(part), index.store.dim)).astype(np.float32))
        r["cache_put_s"] = time.perf_counter() - t0
        probe = [keys[i] for i in rng.choice(count, 2000, replace=False)]
        t0 = time.perf_counter()
        got = index.store.cache_get(probe)
        r["cache_get_2000_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        index.store.cache_get(probe[:256])
        r["cache_get_256_s"] = time.perf_counter() - t0
        print(f"vector cache      {count:,} keys: cache_get(2000) {r['cache_get_2000_s']:.2f} s ({len(got)} found), "
              f"cache_get(256) {r['cache_get_256_s']:.2f} s   (filled in {r['cache_put_s']:.1f} s)")

        disk_written = r["disk_written_mb"]
        index.store.compact()
        r["disk_compact_mb"] = du_mb(table_dir)
        from datetime import timedelta

        with warnings.catch_warnings():  # "removes every version": this benchmark is the only reader and writer
            warnings.simplefilter("ignore")
            index.store.table().optimize(cleanup_older_than=timedelta(0))
        r["disk_clean_mb"] = du_mb(table_dir)
        print(f"disk              {disk_written:.0f} MB as written, {r['disk_compact_mb']:.0f} MB after compact() "
              f"(keeps versions < 5 min old), {r['disk_clean_mb']:.0f} MB with every old version removed = "
              f"{r['disk_clean_mb'] * 100_000 / count:.0f} MB per 100k chunks")
        report["sizes"][str(size)] = r
    print(f"\npeak RSS          {peak_rss_mb():.0f} MB   load average at end {loadavg()}")
    index.close()
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
