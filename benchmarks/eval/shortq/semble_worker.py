"""The peer side of the short-question runs, executed by the Python of a benchmark-only environment that has
``semble==0.7.0`` (never localidx's own environment: semble is not a dependency of localidx).

Two commands:

``model --table T.npy --tokenizer tokenizer.json --out DIR``
    A model2vec model made from localidx's static-minilm table (one row per token id of the vendored tokenizer) so
    that the peer runs with the same vectors as localidx and without a model hub: ``StaticModel(vectors,
    tokenizer, normalize=True).save_pretrained(DIR)``.

``search --tree DIR --alphas auto,0.0,0.0:plain``
    Reads JSON lines ``{"query": ...}`` on stdin, indexes DIR once with ``SembleIndex.from_path`` (the model named by
    ``SEMBLE_MODEL_NAME``) and writes one JSON line per query and setting: ``{"i", "alpha", "ranked": [[path,
    start, end], ...], "ms"}`` with the 10 best chunks as ``index.search(query, top_k=10, alpha=..., rerank=...)``
    gives them, paths relative to DIR. ``auto`` is the peer's default (alpha chosen per query); ``0.0`` is BM25
    with its ranking rules and no vectors; ``:plain`` turns the ranking rules off (``rerank=False``), so
    ``0.0:plain`` is its BM25 alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def make_model(table: str, tokenizer: str, out: str) -> None:
    import numpy as np
    import tokenizers
    from model2vec import StaticModel

    vectors = np.load(table).astype(np.float32)
    tok = tokenizers.Tokenizer.from_file(tokenizer)
    if vectors.shape[0] != tok.get_vocab_size():
        raise SystemExit(f"{table}: {vectors.shape[0]} rows, but the tokenizer has {tok.get_vocab_size()} tokens")
    StaticModel(vectors=vectors, tokenizer=tok, normalize=True).save_pretrained(out)


def search(tree: str, alphas: list[str]) -> None:
    from semble import SembleIndex

    queries = [json.loads(line)["query"] for line in sys.stdin if line.strip()]
    started = time.perf_counter()
    index = SembleIndex.from_path(tree)
    print(json.dumps({"indexed_ms": (time.perf_counter() - started) * 1000, "chunks": len(index.chunks)}),
          flush=True)
    for i, query in enumerate(queries):
        for label in alphas:
            value, _, plain = label.partition(":")
            alpha = None if value == "auto" else float(value)
            started = time.perf_counter()
            results = index.search(query, top_k=10, alpha=alpha, rerank=False if plain else None)
            ms = (time.perf_counter() - started) * 1000
            ranked = [[r.chunk.file_path, r.chunk.start_line, r.chunk.end_line] for r in results]
            print(json.dumps({"i": i, "alpha": label, "ranked": ranked, "ms": round(ms, 3)}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    model = sub.add_parser("model")
    model.add_argument("--table", required=True)
    model.add_argument("--tokenizer", required=True)
    model.add_argument("--out", required=True)
    run = sub.add_parser("search")
    run.add_argument("--tree", required=True)
    run.add_argument("--alphas", default="auto,0.0")
    args = parser.parse_args()
    if args.command == "model":
        make_model(args.table, args.tokenizer, args.out)
    else:
        search(args.tree, [a.strip() for a in args.alphas.split(",") if a.strip()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
