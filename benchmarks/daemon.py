"""Benchmark: the daemon at 10k, 100k and 300k chunks: memory (idle, after the idle release), the first query after a
release, hybrid search through the socket against the same search in-process, the socket's own cost, context packs,
200 clients at once, and how each figure grows with the index.

The repositories are real code: the Python standard library (tests included), then the benchmark's own
``site-packages`` (numpy, pyarrow, lancedb, ...), file by file in a fixed order until about ``--sizes`` chunks
(estimated at 550 bytes a chunk; the figures print the real count), past 175k chunks again under ``v1/``, one
commit each. ``--vectors real`` indexes them with ``localidx index`` and the model ``--model`` (identical texts are
embedded once: the vector cache is content-addressed); ``--vectors synthetic`` writes chunks with ``--no-embed`` and
gives every row a seeded random unit vector (only where embedding 100k chunks with the model would take hours: ANN
search over random vectors is slower than over real ones, so the vector arm's figures are then pessimistic). Each
size lives under ``--work/<size>/`` and ``--reuse`` keeps it between runs (``--build-only`` builds and stops).

Per size, with ``localidx daemon start`` (watcher on, ``daemon_release_s`` = ``--release-s``, debug log on for the
request times): the daemon's memory once started, after warm-up, after the queries, 4 s later (idle); ``search/query`` k=10 hybrid
through one ``Client`` and ``localidx.retrieve.search`` in this process, in alternating blocks of ten queries (the
two compete for the same two cores otherwise), the daemon's own time per request (its debug log) and so the socket's
share; the BM25 and vector arms alone in-process; ``context/build`` balanced; 200 raw clients connected and asking
at once (all answered? the daemon's thread count); then idle until the release, the memory after it, and the first
query after it. Finally the end-to-end figures at the smallest size: save -> searchable through the watcher, and
``localidx search --json`` from the shell with and without the daemon.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/daemon.py [--sizes 10000,100000,300000] [--work /tmp/lxdaemon]
        [--model static-minilm] [--vectors real|synthetic] [--reuse] [--build-only] [--release-s 20]

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, git, loadavg, percentile  # noqa: E402

BYTES_PER_CHUNK = 550  # the stdlib without its tests: 12.6 MB -> 23,117 chunks
UNIQUE_PASS = "v1"  # past the unique sources, files come again under this prefix
WARMUP = ["open a file and read lines", "parse command line arguments", "http request headers",
          "json encoder default", "thread pool executor submit"]
PROBES = 20
CLI_RUNS = 5
CLI_QUERY = "call_soon_threadsafe event loop"
CLIENTS = 200


def ms(values: list[float]) -> str:
    return (f"p50 {percentile(values, 50) * 1e3:7.1f} ms   p95 {percentile(values, 95) * 1e3:7.1f} ms   "
            f"max {max(values) * 1e3:7.1f} ms   (n={len(values)})")


def cli(repo: Path, *args: str, check: bool = True, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise RuntimeError(f"localidx {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, proc


def vm(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS", "VmHWM", "Threads", "RssAnon", "RssFile")):
                key, value = line.split(":", 1)
                out[key] = value.strip()
    return out


def mb(text: str) -> float:
    return int(text.split()[0]) / 1024


def wait_idle(client, timeout: float = 3600.0) -> dict:
    """Poll index/status until the daemon's writer is idle with nothing queued; returns the last status."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.request("index/status", {"check_work_tree": False}, timeout=600)
        writer = status.get("daemon", {}).get("writer", {})
        if writer.get("state") == "idle" and writer.get("queued", 0) == 0 and status.get("state") != "INDEXING":
            return status
        if time.monotonic() > deadline:
            return status
        time.sleep(0.5)


# -- the corpus -----------------------------------------------------------------------------------------------


def sources() -> list[tuple[Path, str]]:
    """(file, repository path) of every unique source, in a fixed order: the stdlib, then site-packages."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    stdlib = sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts)
    packages = sorted(p for p in site.rglob("*.py") if "__pycache__" not in p.parts)
    return [(p, f"stdlib/{p.relative_to(STDLIB)}") for p in stdlib] + \
        [(p, f"site/{p.relative_to(site)}") for p in packages]


def build(repo: Path, want: int) -> int:
    """A git repository of real code with about ``want`` chunks (see the module docstring); the dry run's count."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    files = sources()
    copied = 0
    rounds = 0
    while copied < want * BYTES_PER_CHUNK:
        prefix = f"{UNIQUE_PASS}/" * rounds
        for src, rel in files:
            if copied >= want * BYTES_PER_CHUNK:
                break
            dst = repo / f"{prefix}{rel}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(src, dst)
            except OSError:
                continue
            copied += dst.stat().st_size
        rounds += 1
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "real code")
    _, proc = cli(repo, "index", "--dry-run", "--json", "-q")
    return json.loads(proc.stdout)["chunks"]


def fill_vectors(repo: Path) -> int:
    """Give every row a seeded random unit vector (in large merges), put it in the vector cache too (so a later
    rebuild, e.g. after a schema change, finds it there instead of embedding for hours), then build the indexes."""
    import numpy as np

    from localidx.config import load_settings
    from localidx.store.index import open_index

    settings = load_settings(repo)
    index = open_index(repo, True, settings)
    try:
        table = index.store.table()
        rows = table.search().where("vector IS NULL").select(["id", "embed_key"]).limit(None).to_list()
        rng = np.random.default_rng(7)
        for start in range(0, len(rows), 20000):
            part = rows[start:start + 20000]
            vectors = rng.standard_normal((len(part), index.embedder.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            index.store.set_vectors([r["id"] for r in part], vectors)
            index.store.cache_put([r["embed_key"] for r in part], vectors)
        index.store.compact()
        index.store.ensure_indexes()
        return table.count_rows()
    finally:
        index.close()


def prepare(work: Path, size: int, vectors: str, reuse: bool) -> Path:
    """The repository (kept between runs with ``--reuse``: its files do not depend on the model) and its index for
    this model and kind of vectors (the table name holds the model, so several models share one state dir)."""
    repo = work / "repo"
    model = os.environ.get("LOCALIDX_EMBED_MODEL", "default")
    marker = work / f"built-{re.sub(r'[^A-Za-z0-9]+', '-', model)}-{vectors}.json"
    repo_marker = work / "repo.json"
    if reuse and marker.exists():
        print(f"  reusing {work}: {marker.read_text().strip()}")
        return repo
    if not (reuse and repo_marker.exists()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True, mode=0o700)
        t0 = time.perf_counter()
        chunks = build(repo, size)
        print(f"  repository: {chunks} chunks in the dry run, {time.perf_counter() - t0:.0f} s")
        repo_marker.write_text(json.dumps({"chunks": chunks}) + "\n")
    chunks = json.loads(repo_marker.read_text())["chunks"]
    if vectors == "real":
        wall, proc = cli(repo, "index", "-q", "--json")
        record = json.loads(proc.stdout)
        print(f"  localidx index: {wall:.0f} s ({record.get('chunks_written')} written, "
              f"{record.get('chunks_embedded')} embedded, {record.get('chunks_reused')} from the vector cache)")
    else:
        wall, _ = cli(repo, "index", "-q", "--no-embed")
        print(f"  localidx index --no-embed: {wall:.0f} s")
        t0 = time.perf_counter()
        rows = fill_vectors(repo)
        print(f"  synthetic vectors + indexes: {rows} rows, {time.perf_counter() - t0:.0f} s")
        wall = time.perf_counter() - t0 + wall
    marker.write_text(json.dumps({"chunks": chunks, "model": model, "vectors": vectors, "index_s": round(wall)}) + "\n")
    return repo


# -- measuring ------------------------------------------------------------------------------------------------


def memory(client) -> dict:
    return client.request("daemon/hello", {"protocol_version": 2}, timeout=60)["daemon"]["memory"]


def mem_line(m: dict) -> str:
    return (f"RSS {m.get('rss_mb', 0):6.0f} MB (anon {m.get('anon_mb', 0):.0f} + file {m.get('file_mb', 0):.0f})   "
            f"threads {m.get('threads')}")


def server_times(log: Path, mark: int, method: str) -> list[float]:
    with open(log, "rb") as fh:
        fh.seek(mark)
        text = fh.read().decode("utf-8", "replace")
    return [float(v) / 1e3 for v in re.findall(re.escape(method) + r" handled in ([\d.]+) ms", text)]


def many_clients(sock_path: Path, n: int) -> tuple[int, float]:
    """``n`` raw connections opened at once, each asking one hybrid search; (answered, seconds for all)."""
    from localidx import protocol

    t0 = time.perf_counter()
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(300)
        s.connect(str(sock_path))
        socks.append(s)
    for i, s in enumerate(socks):
        s.sendall(protocol.encode(protocol.request(i, "search/query", {"query": WARMUP[i % len(WARMUP)], "k": 5})))
    answered = 0
    for s in socks:
        with s, s.makefile("rb") as reader:
            if b'"result"' in reader.readline():
                answered += 1
    return answered, time.perf_counter() - t0


def measure(repo: Path, size: int, args) -> dict:
    from localidx.config import load_settings
    from localidx.daemon import lifecycle
    from localidx.interface.client import connect
    from localidx.retrieve import search
    from localidx.store.index import open_index
    from query import QUERIES

    # In this process's environment too: a client whose settings differ from the daemon's restarts it with its own.
    os.environ.update({"LOCALIDX_DAEMON_RELEASE_S": str(args.release_s), "LOCALIDX_DEBUG": "1"})
    settings = load_settings(repo)
    paths = lifecycle.daemon_paths(repo, True, settings)
    row: dict = {"size": size}
    wall, _ = cli(repo, "daemon", "start")
    try:
        client = connect(repo, True, settings, timeout=120)
        status = wait_idle(client)
        row["chunks"] = status.get("chunks")
        row["with_vectors"] = status.get("chunks_with_vectors")
        row["start"] = memory(client)
        print(f"  daemon start {wall:.1f} s; {row['chunks']} chunks ({row['with_vectors']} with vectors); "
              f"{mem_line(row['start'])}")

        index = open_index(repo, True, settings, read_only=True)
        for q in WARMUP:
            client.request("search/query", {"query": q, "k": 10}, timeout=300)
            search(index, q, k=10)
        row["warm"] = memory(client)
        mark = paths.log.stat().st_size
        sock_t, local_t = [], []
        for block in range(0, len(QUERIES), 10):
            for q in QUERIES[block:block + 10]:
                t0 = time.perf_counter()
                client.request("search/query", {"query": q, "k": 10}, timeout=300)
                sock_t.append(time.perf_counter() - t0)
            time.sleep(0.3)
            for q in QUERIES[block:block + 10]:
                t0 = time.perf_counter()
                search(index, q, k=10)
                local_t.append(time.perf_counter() - t0)
            time.sleep(0.3)
        server_t = server_times(paths.log, mark, "search/query")
        arms = {}
        for mode in ("bm25", "vector"):
            arms[mode] = []
            for q in QUERIES[:30]:
                t0 = time.perf_counter()
                search(index, q, k=10, mode=mode)
                arms[mode].append(time.perf_counter() - t0)
        index.close()
        row.update(socket=sock_t, inproc=local_t, server=server_t, bm25=arms["bm25"], vector=arms["vector"])
        row["overhead_ms"] = statistics.median(a - b for a, b in zip(sock_t, server_t)) * 1e3 \
            if len(server_t) == len(sock_t) else float("nan")
        print(f"  search/query k=10 hybrid, socket   {ms(sock_t)}")
        print(f"                        in-process   {ms(local_t)}")
        print(f"                in the daemon (log)  {ms(server_t)}   socket's own share: "
              f"median {row['overhead_ms']:.1f} ms (paired)")
        print(f"  arms in-process: bm25 {ms(arms['bm25'])}")
        print(f"                   vector {ms(arms['vector'])}")

        ctx = []
        for q in QUERIES[:30]:
            t0 = time.perf_counter()
            client.request("context/build", {"query": q, "profile": "balanced"}, timeout=300)
            ctx.append(time.perf_counter() - t0)
        row["context"] = ctx
        print(f"  context/build balanced, socket   {ms(ctx)}")

        answered, took = many_clients(paths.socket, CLIENTS)
        row["clients"] = (answered, took)
        row["queries_done"] = memory(client)
        print(f"  {CLIENTS} clients at once: {answered} answered in {took:.1f} s; {mem_line(row['queries_done'])}")
        time.sleep(4.0)  # quiet: the daemon's idle trim gives the heap's free pages back (daemon/server.py)
        row["idle"] = memory(client)
        print(f"  idle 4 s after the queries: {mem_line(row['idle'])}")

        # Idle: the release, then the first query after it.
        t0 = time.perf_counter()
        while not memory(client).get("released") and time.perf_counter() - t0 < args.release_s + 120:
            time.sleep(1.0)
        time.sleep(1.0)
        row["released"] = memory(client)
        t0 = time.perf_counter()
        client.request("search/query", {"query": "walk a directory tree recursively", "k": 10}, timeout=300)
        row["first_after_release"] = time.perf_counter() - t0
        after = []
        for q in QUERIES[:10]:
            t0 = time.perf_counter()
            client.request("search/query", {"query": q, "k": 10}, timeout=300)
            after.append(time.perf_counter() - t0)
        row["reloaded"] = memory(client)
        print(f"  released after {args.release_s:g} s idle: {mem_line(row['released'])}")
        print(f"  first query after the release {row['first_after_release'] * 1e3:.0f} ms, the next ten "
              f"p50 {percentile(after, 50) * 1e3:.0f} ms; {mem_line(row['reloaded'])}")
        client.close()
    finally:
        cli(repo, "daemon", "stop", check=False)
    return row


def end_to_end(repo: Path) -> None:
    """Save -> searchable through the watcher, and CLI round trips with and without the daemon."""
    from localidx.config import load_settings
    from localidx.interface.client import connect

    settings = load_settings(repo)
    cli(repo, "daemon", "start")
    try:
        client = connect(repo, True, settings, timeout=120)
        wait_idle(client)
        candidates = sorted((p for p in repo.rglob("*.py") if ".git" not in p.parts), key=lambda p: p.stat().st_size)
        step = max(1, len(candidates) // (PROBES + 1))
        latencies = []
        for n in range(PROBES):
            path = candidates[(n + 1) * step]
            ident = f"zz_probe_{n}_{secrets.token_hex(4)}"
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(path.read_text(errors="replace") + f"\n\ndef {ident}():\n    return {n}\n")
            t_save = time.perf_counter()
            os.replace(tmp, path)
            while time.perf_counter() - t_save < 30:
                found = client.request("search/query", {"query": ident, "mode": "bm25", "k": 1}, timeout=30)
                if found["matches"] and ident in found["matches"][0]["text"]:
                    latencies.append(time.perf_counter() - t_save)
                    break
                time.sleep(0.005)
            time.sleep(0.3)
            wait_idle(client, 60)
        print(f"  save -> searchable (watcher, debounce {settings.watch_debounce_s} s, bm25 via socket)   {ms(latencies)}")
        cli_running = [cli(repo, "search", CLI_QUERY, "--json")[0] for _ in range(CLI_RUNS)]
        client.close()
    finally:
        cli(repo, "daemon", "stop", check=False)
    cli_stopped = [cli(repo, "search", CLI_QUERY, "--json")[0] for _ in range(CLI_RUNS)]
    git(repo, "checkout", "-q", "--", ".")  # the probes are gone again: the next daemon's reconcile follows
    print(f"  `localidx search --json` from the shell: daemon running {ms(cli_running)}")
    print(f"                                          daemon stopped {ms(cli_stopped)}")


def summary(rows: list[dict]) -> None:
    print("\n| chunks | idle RSS, warm (4 s after the queries) | after release | first query after release | hybrid p50 in-process / socket "
          "(socket's share) | bm25 / vector arm p50 | context/build balanced p50 | 200 clients |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p = lambda key: percentile(r[key], 50) * 1e3  # noqa: E731
        print(f"| {r['chunks']:,} | {r['idle']['rss_mb']:.0f} MB ({r['idle']['anon_mb']:.0f} anon) "
              f"| {r['released']['rss_mb']:.0f} MB ({r['released']['anon_mb']:.0f} anon) "
              f"| {r['first_after_release'] * 1e3:.0f} ms | {p('inproc'):.1f} / {p('socket'):.1f} ms "
              f"({r['overhead_ms']:.1f}) | {p('bm25'):.1f} / {p('vector'):.1f} ms | {p('context'):.1f} ms "
              f"| {r['clients'][0]}/{CLIENTS} in {r['clients'][1]:.1f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/lxdaemon"))
    parser.add_argument("--sizes", default="10000,100000,300000")
    parser.add_argument("--model", default=None, help="embed_model for the index and the daemon (default: settings)")
    parser.add_argument("--vectors", choices=("real", "synthetic"), default="real")
    parser.add_argument("--reuse", action="store_true", help="keep repositories and indexes built by a former run")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--release-s", type=float, default=20.0, help="daemon_release_s for the measured daemon")
    parser.add_argument("--no-end-to-end", action="store_true")
    args = parser.parse_args()

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    (work / "run").mkdir(exist_ok=True, mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(work / "run")
    os.environ["LOCALIDX_REGISTRY"] = str(work / "registry.json")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.pop("LOCALIDX_SOCK", None)
    if args.model:
        os.environ["LOCALIDX_EMBED_MODEL"] = args.model
    print(f"cores {len(os.sched_getaffinity(0))}   load average at start {loadavg()}   model "
          f"{os.environ.get('LOCALIDX_EMBED_MODEL', '(default)')}   vectors {args.vectors}")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        home = work / str(size)
        os.environ["LOCALIDX_HOME"] = str(home / "home")
        print(f"\n== {size:,} chunks ({home})")
        repo = prepare(home, size, args.vectors, args.reuse)
        if args.build_only:
            continue
        rows.append(measure(repo, size, args))
        if not args.no_end_to_end and len(rows) == 1:
            end_to_end(repo)
    if rows:
        summary(rows)
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
