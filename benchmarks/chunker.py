"""Benchmark: the full chunker (parse + chunk + [META] + token counts + redaction) over a real corpus.

Default corpus: the Python standard library of the running interpreter (about 1,800 files, 31 MB), without
site-packages. Prints throughput on every core, peak memory, memory growth per 1000 chunks kept in memory, and the
quality figures peers are judged on (fragments under 50 characters, the largest chunk).

    .venv/bin/python benchmarks/chunker.py [CORPUS_DIR] [--workers N] [--limit-files N] [--phases]

``--phases`` (with ``--workers 1``) also prints where the CPU time went: process-time counters around the steps
(tree-sitter parsing, the rest of ``parse``, the code chunker, [META], cl100k encoding). Those add a little time of
their own, so quote the throughput from a run without them.

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localidx.chunk import chunk_file  # noqa: E402
from localidx.config import Settings  # noqa: E402
from localidx.index.workers import map_files  # noqa: E402


def corpus_files(root: Path, limit: int | None) -> list[Path]:
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and p.is_file())
    return files[:limit] if limit else files


def _job(args):
    path, root, settings = args
    data = Path(path).read_bytes()
    result = chunk_file(Path(path).relative_to(root).as_posix(), data, settings)
    small = sum(1 for c in result.chunks if len(c.text.strip()) < 50 and c.kind not in ("heading", "error"))
    biggest = max((len(c.text) for c in result.chunks), default=0)
    max_tok = max((c.token_count for c in result.chunks), default=0)
    return len(data), result.symbols, len(result.chunks), small, biggest, max_tok, len(result.errors)


_PHASES: dict[str, float] = {}


def _count_phases() -> None:
    """Wrap the steps of chunking in process-time counters (one process: workers would keep their own)."""
    import localidx.chunk.code as code
    import localidx.chunk.enrich as enrich
    import localidx.chunk.parse as parse
    import localidx.safety.redact as redact
    import localidx.text.tokens as tokens

    def wrap(owner, name, label):
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                _PHASES[label] = _PHASES.get(label, 0.0) + time.process_time() - started

        setattr(owner, name, timed)

    wrap(parse, "_parse_tree", "tree-sitter parse")
    wrap(parse, "parse", "parse in all (tree-sitter parse, query matches, symbols)")
    wrap(code, "chunk_code", "code chunker in all (with its token counts)")
    wrap(enrich, "tags_and_header", "tags and [META] in all (with its token counts)")
    wrap(redact, "redact", "redaction")
    encoding = tokens._encoding()

    class Counted:
        def encode_ordinary(self, text):
            started = time.process_time()
            try:
                return encoding.encode_ordinary(text)
            finally:
                _PHASES["cl100k encoding (every caller)"] = _PHASES.get("cl100k encoding (every caller)", 0.0) + (
                    time.process_time() - started)

    tokens._encoding = Counted


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--limit-files", type=int, default=None)
    parser.add_argument("--phases", action="store_true", help="also print where the CPU time went (one worker)")
    args = parser.parse_args()
    if args.phases:
        args.workers = 1
        _count_phases()
    root = Path(args.corpus).resolve()
    settings = Settings()
    files = corpus_files(root, args.limit_files)
    jobs = [(str(p), root, settings) for p in files]

    # Warm the grammar and the encoding in the parent, so forked workers start ready (as the indexer's do).
    chunk_file("warm.py", b"def f():\n    return 1\n", settings)

    started = time.perf_counter()
    cpu0 = os.times()
    totals = [0, 0, 0, 0, 0, 0, 0]
    for row in map_files(_job, jobs, args.workers):
        for i in (0, 1, 2, 3, 6):
            totals[i] += row[i]
        totals[4] = max(totals[4], row[4])
        totals[5] = max(totals[5], row[5])
    wall = time.perf_counter() - started
    cpu1 = os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system) + (cpu1.children_user - cpu0.children_user) + (
        cpu1.children_system - cpu0.children_system)
    size, symbols, chunks, small, biggest, max_tok, errors = totals
    mb = size / 1e6
    children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
    print(f"corpus            {root}")
    print(f"files             {len(files)}  ({mb:.1f} MB, {symbols} symbols, {chunks} chunks, {errors} sentinel errors)")
    print(f"workers           {args.workers}")
    print(f"wall              {wall:.2f} s   cpu {cpu:.2f} s")
    print(f"throughput        {mb / wall:.2f} MB/s  ({mb / wall / args.workers:.2f} MB/s per core, "
          f"{mb / cpu:.2f} MB per CPU-second)")
    print(f"symbols/s         {symbols / wall:,.0f}")
    print(f"chunks/s          {chunks / wall:,.0f}")
    print(f"peak RSS          parent {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB, "
          f"largest worker {children_peak:.0f} MB")
    print(f"fragments <50 ch  {small} of {chunks} ({100 * small / max(chunks, 1):.2f}%)")
    print(f"largest chunk     {biggest:,} chars, {max_tok} tokens (max_tokens {settings.max_tokens})")
    for label, seconds in sorted(_PHASES.items(), key=lambda item: -item[1]):
        print(f"  phase {seconds:7.2f} CPU-s {100 * seconds / cpu:5.1f}%  {label}")

    # Memory growth per 1000 chunks: one process keeps every chunk record it makes, as a caller buffering them would.
    sample = files[: min(len(files), 400)]
    gc.collect()
    before = rss_mb()
    kept = []
    kept_symbols = 0
    for path in sample:
        result = chunk_file(path.relative_to(root).as_posix(), path.read_bytes(), settings)
        kept.extend(result.chunks)
        kept_symbols += result.symbols
    gc.collect()
    grown = rss_mb() - before
    print(f"memory growth     {grown:.1f} MB for {len(kept)} chunks kept = {1000 * grown / max(len(kept), 1):.2f} MB "
          f"per 1000 chunks, {1000 * grown / max(kept_symbols, 1):.2f} MB per 1000 symbols ({kept_symbols})")


if __name__ == "__main__":
    main()
