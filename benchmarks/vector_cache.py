"""The vector cache at scale: lookups and writes against a cache of N vectors, and the same against a LanceDB cache table
(the store localidx used before) at a smaller N, for the ratio.

Place in the flow: the indexer asks the cache for every written batch's embedding keys and puts every embedded batch
(``localidx.store.vectors``); this measures those two calls as the cache grows with use.

    python benchmarks/vector_cache.py                  # 1,000,000 vectors of 384 dims; LanceDB at 100,000
    python benchmarks/vector_cache.py --n 200000 --lance-n 0 --dim 256

Prints the fill time, the median of ``--repeat`` 500-key lookups (half hits, half misses) and of 1,000-vector
writes, and the files on disk with their sizes. Everything is written to a temp dir, removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localidx.store.vectors import VectorCache  # noqa: E402


def keys_for(start: int, count: int, tag: str = "") -> list[str]:
    return [hashlib.sha256(f"{tag}{i}".encode()).hexdigest() for i in range(start, start + count)]


def files_on_disk(root: Path) -> str:
    found = [p for p in root.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in found)
    shown = sorted(found, key=lambda p: -p.stat().st_size)[:4]
    names = ", ".join(f"{p.relative_to(root)} {p.stat().st_size / 1e6:.1f} MB" for p in shown)
    return f"{len(found)} files, {total / 1e6:.1f} MB ({names}{', ...' if len(found) > 4 else ''})"


def probes(rng, n: int, repeat: int) -> list[list[str]]:
    """``repeat`` lists of 500 keys: 250 present, 250 never written."""
    out = []
    for r in range(repeat):
        hits = [hashlib.sha256(str(int(i)).encode()).hexdigest() for i in rng.choice(n, 250, replace=False)]
        out.append(hits + keys_for(r * 250, 250, tag="miss-"))
    return out


def median_ms(action, inputs) -> float:
    times = []
    for item in inputs:
        t0 = time.perf_counter()
        action(item)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def bench_sqlite(root: Path, n: int, dim: int, repeat: int, rng) -> float:
    cache = VectorCache(root / "vectors.sqlite", dim)
    t0 = time.perf_counter()
    step = 20_000
    for start in range(0, n, step):
        count = min(step, n - start)
        cache.put(keys_for(start, count), rng.standard_normal((count, dim), dtype=np.float32))
    fill = time.perf_counter() - t0
    found = len(cache.get(probes(rng, n, 1)[0]))
    cache.close()
    cache = VectorCache(root / "vectors.sqlite", dim)  # a fresh process's view: nothing in SQLite's page cache
    lookup = median_ms(cache.get, probes(rng, n, repeat))
    writes = [(keys_for(i * 1000, 1000, tag="new-"), rng.standard_normal((1000, dim), dtype=np.float32))
              for i in range(repeat)]
    write = median_ms(lambda kv: cache.put(*kv), writes)
    cache.close()
    print(f"sqlite   n={n:>9,} dim={dim}  fill {fill:6.1f} s ({n / fill:,.0f}/s)  lookup(500, {found} hits) "
          f"{lookup:7.1f} ms  write(1000) {write:7.1f} ms")
    print(f"         on disk: {files_on_disk(root)}")
    return lookup


def bench_lance(root: Path, n: int, dim: int, repeat: int, rng) -> float:
    """The LanceDB cache table as localidx kept it: ``key IN (...)`` filters, ``merge_insert`` per write."""
    import lancedb
    import pyarrow as pa

    from localidx.store.lance import cache_schema, sql_in

    schema = cache_schema(dim)
    db = lancedb.connect(str(root / "lancedb"))
    t0 = time.perf_counter()
    table = None
    for start in range(0, n, 50_000):
        count = min(50_000, n - start)
        vecs = rng.standard_normal((count, dim), dtype=np.float32)
        data = pa.table({"key": keys_for(start, count),
                         "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), dim)}, schema=schema)
        table = db.create_table("vectors", data=data, schema=schema) if table is None else table
        if start:
            table.add(data)
    fill = time.perf_counter() - t0  # a bulk add: far faster than the merge per batch the indexer made

    def lookup(keys):
        table.search().where(sql_in("key", keys)).limit(len(keys)).to_arrow()

    def write(kv):
        keys, vecs = kv
        data = pa.Table.from_pylist([{"key": k, "vector": v.tolist()} for k, v in zip(keys, vecs)], schema=schema)
        table.merge_insert("key").when_not_matched_insert_all().execute(data)

    ms = median_ms(lookup, probes(rng, n, repeat))
    writes = [(keys_for(i * 1000, 1000, tag="new-"), rng.standard_normal((1000, dim), dtype=np.float32))
              for i in range(max(3, repeat // 4))]
    wms = median_ms(write, writes)
    print(f"lancedb  n={n:>9,} dim={dim}  fill {fill:6.1f} s (bulk add)  lookup(500) {ms:7.1f} ms  "
          f"write(1000) {wms:7.1f} ms")
    print(f"         on disk: {files_on_disk(root / 'lancedb')}")
    return ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="vectors in the SQLite cache")
    parser.add_argument("--lance-n", type=int, default=100_000, help="vectors in the LanceDB table (0: skip)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dir", default=None, help="where to build the caches (default: a temp dir)")
    args = parser.parse_args()
    if args.n < 250 or (args.lance_n and args.lance_n < 250) or args.dim < 1 or args.repeat < 1:
        print("error: --n and --lance-n need at least 250 vectors, --dim and --repeat at least 1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(7)
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vector-cache-", dir=args.dir) as tmp:
        root = Path(tmp)
        (root / "sqlite").mkdir()
        small = None
        if args.lance_n:
            (root / "lance").mkdir()
            small = bench_sqlite(root / "sqlite", args.lance_n, args.dim, args.repeat, rng)
            lance = bench_lance(root / "lance", args.lance_n, args.dim, args.repeat, rng)
            print(f"ratio at n={args.lance_n:,}: lancedb lookup / sqlite lookup = {lance / small:.2f}x")
            for p in (root / "sqlite").iterdir():
                p.unlink()
        if args.n != args.lance_n or small is None:
            bench_sqlite(root / "sqlite", args.n, args.dim, args.repeat, rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
