"""Benchmark: embedding throughput of the default model (all-MiniLM-L6-v2 int8, localidx's TransformerEmbedder: the
model run by onnxruntime directly) on this machine's cores, over real code chunks at the corpus' own length.
``benchmarks/coldindex.py`` compares it with the static embedder and other options, quality included.

Input: about 600 code chunks sampled (seeded) from chunking the Python standard library with ``chunk_file``; each
text is ``embedding_input(chunk.search_text)``, exactly what the indexer sends to the model. Every configuration
runs in a fresh process (so peak RSS is its own): model load, one warm-up batch, then ``TransformerEmbedder.embed`` over
all texts (batches of ``--batches`` texts, sorted by token count). Printed per configuration: chunks/s (wall), chunks per CPU-second
(the contention-free figure) and peak RSS. The 128 cap truncates each text at the end of its 126th word piece
(the tokenizer's offsets; plus [CLS] and [SEP] = 128) before embedding, so the model sees exactly what a window of 128
would show it. Then: where the time goes (tokenizer vs ONNX run vs pooling), and 1 process x 2 threads against
2 processes x 1 thread.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embedding.py [--chunks 600] [--batches 8,16,32] [--caps 256,128]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embedding.py --eval-cap 128     # retrieval cost of a cap (run_eval)

``--eval-cap N`` runs ``benchmarks/eval/run_eval.py`` (indexes copies of the eval packages, prints Recall/MRR) with
the model ``all-MiniLM-L6-v2[cap=N]``, whose window is N word pieces (its own model id, so nothing is read from
vectors of another cap); ``--eval-cap 256`` is the default model. Its work dir defaults to
``/tmp/localidx-bench/eval``.

Not a timed test: machines are noisy; run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import WORK, cpu_self, in_child, loadavg, peak_rss_mb, stdlib_chunks  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _tokenizer():
    """The model's own tokenizer (the assembled model dir), counting every piece: no truncation, no padding."""
    from tokenizers import Tokenizer

    from localidx.embed.onnx import default_model_dir

    model_dir, _ = default_model_dir()
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def cap_text(text: str, pieces: int, tok) -> str:
    """``text`` cut after the word piece that makes ``pieces`` with [CLS] and [SEP] (unchanged when shorter)."""
    enc = tok.encode(text)
    if len(enc.ids) <= pieces:
        return text
    return text[: enc.offsets[pieces - 2][1]]  # offsets[0] is [CLS]; content pieces are 1 .. pieces-2


def _run_config(texts: list[str], batch: int, threads: int | None, queue) -> None:
    """In a fresh process: load, warm up, embed everything; report timings and this process' peak RSS."""
    from localidx.embed.transformer import TransformerEmbedder

    t0 = time.perf_counter()
    embedder = TransformerEmbedder(threads=threads, batch=batch)
    embedder._load()
    load_s = time.perf_counter() - t0
    embedder.embed(texts[:batch])  # first ORT run allocates its arena: not part of steady throughput
    cpu0, t0 = cpu_self(), time.perf_counter()
    vectors = embedder.embed(texts)
    wall, cpu = time.perf_counter() - t0, cpu_self() - cpu0
    queue.put({"load_s": load_s, "wall_s": wall, "cpu_s": cpu, "rss_mb": peak_rss_mb(), "n": len(vectors)})


def _breakdown(texts: list[str], batch: int, threads: int | None, queue) -> None:
    """In a fresh process: the same token-count-sorted batches, each step timed on its own (wall and CPU)."""
    import numpy as np

    from localidx.embed.transformer import TransformerEmbedder

    embedder = TransformerEmbedder(threads=threads, batch=batch)
    session = embedder._load()
    totals = {"tokenize": [0.0, 0.0], "arrays": [0.0, 0.0], "onnx run": [0.0, 0.0], "pool+normalize": [0.0, 0.0]}
    padded = 0

    def timed(step, func):
        c0, t0 = cpu_self(), time.perf_counter()
        out = func()
        totals[step][0] += time.perf_counter() - t0
        totals[step][1] += cpu_self() - c0
        return out

    embedder.embed(texts[:batch])  # warm-up
    ids = timed("tokenize", lambda: [e.ids for e in embedder._tok.encode_batch(texts)])
    ordered = sorted(ids, key=len)
    for start in range(0, len(ordered), batch):
        part = ordered[start : start + batch]
        width = max(map(len, part))
        padded += width * len(part)

        def arrays():
            input_ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros_like(input_ids)
            for row, seq in enumerate(part):
                input_ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}

        feed = timed("arrays", arrays)
        hidden = timed("onnx run", lambda: session.run(None, feed)[0])

        def pool():
            weights = feed["attention_mask"][:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

        timed("pool+normalize", pool)
    queue.put({"steps": totals, "padded_pieces": padded})


def _half_worker(texts: list[str], batch: int, barrier, queue) -> None:
    from localidx.embed.transformer import TransformerEmbedder

    embedder = TransformerEmbedder(threads=1, batch=batch)
    embedder.embed(texts[:batch])
    barrier.wait()
    cpu0, t0 = cpu_self(), time.perf_counter()
    embedder.embed(texts)
    queue.put({"start": t0, "end": time.perf_counter(), "cpu_s": cpu_self() - cpu0, "rss_mb": peak_rss_mb()})


def _two_processes(texts: list[str], batch: int) -> dict:
    """2 processes x 1 ORT thread, each embedding half the (length-interleaved) texts, started together."""
    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(2)
    ordered = sorted(texts, key=len)
    halves = [ordered[0::2], ordered[1::2]]
    procs = [ctx.Process(target=_half_worker, args=(h, batch, barrier, queue)) for h in halves]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"wall_s": wall, "cpu_s": sum(r["cpu_s"] for r in results), "rss_mb": sum(r["rss_mb"] for r in results),
            "n": len(texts)}


def _line(label: str, r: dict) -> str:
    return (f"{label:<34} {r['n'] / r['wall_s']:6.1f} chunks/s   {r['n'] / r['cpu_s']:5.1f} chunks/CPU-s   "
            f"wall {r['wall_s']:5.1f} s  cpu {r['cpu_s']:6.1f} s   peak RSS {r['rss_mb']:5.0f} MB"
            + (f"   (load {r['load_s']:.1f} s)" if "load_s" in r else ""))


def run_eval_capped(cap: int, work: Path, packages: list[str]) -> int:
    """run_eval.py's main with the model's window at ``cap`` word pieces (256: the default model)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "eval"))
    import run_eval

    from localidx.embed import TRANSFORMER_MODEL

    model = TRANSFORMER_MODEL if cap == 256 else f"{TRANSFORMER_MODEL}[cap={cap}]"
    print(f"# run_eval with the model's window at {cap} word pieces (work dir {work})")
    return run_eval.main([*packages, "--work", str(work), "--model", model])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=600)
    parser.add_argument("--batches", default="8,16,32")
    parser.add_argument("--caps", default="256,128")
    parser.add_argument("--threads", type=int, default=0, help="ORT threads (0: its default, as the indexer)")
    parser.add_argument("--skip-breakdown", action="store_true")
    parser.add_argument("--skip-processes", action="store_true")
    parser.add_argument("--eval-cap", type=int, default=None, help="run the retrieval eval with this cap, then stop")
    parser.add_argument("--eval-work", type=Path, default=WORK / "eval")
    parser.add_argument("--eval-packages", nargs="*", default=[])
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON object")
    args = parser.parse_args()
    if args.eval_cap is not None:
        sys.exit(run_eval_capped(args.eval_cap, args.eval_work, args.eval_packages))

    threads = args.threads or None
    from localidx.embed import embedding_input

    t0 = time.perf_counter()
    chunks = stdlib_chunks(args.chunks, every=3)
    texts = [embedding_input(c.search_text) for c in chunks]
    tok = _tokenizer()
    pieces = [len(e.ids) for e in tok.encode_batch(texts)]
    chars = [len(t) for t in texts]
    caps = [int(c) for c in args.caps.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    capped = {cap: [cap_text(t, cap, tok) for t in texts] for cap in caps}
    report: dict = {"chunks": len(texts), "cores": len(os.sched_getaffinity(0)), "loadavg_start": loadavg()}
    print(f"corpus            {len(texts)} code chunks sampled from the stdlib ({len({c.path for c in chunks})} files),"
          f" prepared in {time.perf_counter() - t0:.1f} s")
    print(f"cores             {report['cores']}   load average at start {report['loadavg_start']}   "
          f"ORT threads {threads or 'default'}")
    print(f"length            mean {statistics.mean(chars):.0f} chars, {statistics.mean(pieces):.1f} word pieces "
          f"(median {statistics.median(pieces):.0f}, max {max(pieces)}; "
          f"{statistics.mean(chars) / statistics.mean(pieces):.2f} "
          f"chars/piece); over 256: {sum(p > 256 for p in pieces)}, over 128: {sum(p > 128 for p in pieces)}")
    for cap in caps:
        seen = [min(p, cap) for p in pieces]
        print(f"model input @{cap:<4}  mean {statistics.mean(seen):.1f} word pieces, "
              f"{statistics.mean(len(t) for t in capped[cap]):.0f} chars")
    report.update(mean_chars=statistics.mean(chars), mean_pieces=statistics.mean(pieces),
                  over_256=sum(p > 256 for p in pieces), over_128=sum(p > 128 for p in pieces))

    print("\nthroughput (one fresh process per line; length-sorted batches; load and one warm-up batch excluded)")
    report["configs"] = {}
    for cap in caps:
        for batch in batches:
            r = in_child(_run_config, capped[cap], batch, threads)
            label = f"cap {cap}, batch {batch}"
            report["configs"][label] = r
            print(_line(label, r), flush=True)

    if not args.skip_breakdown:
        batch = 16
        for cap in caps:
            r = in_child(_breakdown, capped[cap], batch, threads)
            total_wall = sum(v[0] for v in r["steps"].values())
            print(f"\nwhere the time goes (cap {cap}, batch {batch}; {r['padded_pieces']} pieces incl. padding)")
            for step, (wall, cpu) in r["steps"].items():
                print(f"  {step:<16} wall {wall:6.2f} s ({100 * wall / total_wall:4.1f}%)   cpu {cpu:6.2f} s")
            report[f"breakdown_cap{cap}"] = r

    if not args.skip_processes:
        batch = 16
        print(f"\nprocesses x threads (cap {caps[0]}, batch {batch})")
        r1 = report["configs"].get(f"cap {caps[0]}, batch {batch}") or in_child(_run_config, capped[caps[0]], batch,
                                                                                  threads)
        print(_line(f"1 process x {threads or 'default'} threads", r1))
        r2 = _two_processes(capped[caps[0]], batch)
        report["two_processes"] = r2
        print(_line("2 processes x 1 thread", r2) + "   (RSS summed)")
    report["loadavg_end"] = loadavg()
    print(f"\nload average at end {report['loadavg_end']}")
    if args.json:
        print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
