"""Make ``localidx/embed/minilm/token_counts.npz``: how often each word piece occurs in what the embedder reads.

The corpus is the Python standard library as localidx indexes it: every ``.py`` file outside the test suites
(``_corpus.stdlib_files``), chunked by ``chunk_file`` with the default settings, each chunk's
``embedding_input(search_text)`` with identifiers split at camelCase (``static.split_camel``), tokenised by the
vendored tokenizer without special tokens. The counts give the static embedder's SIF weights (``weight=sif``): a
piece that is everywhere in code (``self``, ``(``, ``_``) weighs little, a rare one a lot.

    .venv/bin/python benchmarks/token_counts.py [--out localidx/embed/minilm/token_counts.npz]

The file is shipped (about 60 KB); rerun this only on purpose: new counts change the static model's id, so every
static vector is re-embedded once.
"""

from __future__ import annotations

import argparse
import sys
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import STDLIB, stdlib_files  # noqa: E402

import numpy as np  # noqa: E402


def _count(path: Path) -> np.ndarray:
    from localidx.chunk import chunk_file
    from localidx.config import Settings
    from localidx.embed import embedding_input
    from localidx.embed.static import load_tokenizer, split_camel

    tok = load_tokenizer()
    counts = np.zeros(tok.get_vocab_size(), dtype=np.int64)
    result = chunk_file(path.relative_to(STDLIB).as_posix(), path.read_bytes(), Settings())
    texts = [split_camel(embedding_input(c.search_text)) for c in result.chunks]
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        counts += np.bincount(enc.ids, minlength=counts.size)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "localidx/embed/minilm/token_counts.npz")
    args = parser.parse_args()
    files = stdlib_files()
    with Pool(2) as pool:
        total = sum(pool.imap_unordered(_count, files, chunksize=8))
    np.savez_compressed(args.out, counts=total.astype(np.uint32))
    print(f"{len(files)} files, {int(total.sum()):,} pieces, {int((total > 0).sum()):,} distinct of {total.size:,}"
          f" -> {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
