"""Embed: the model names ``embed_model`` may hold, in a module of their own.

Place in the flow: the bottom of ``localidx.embed``. The package's ``get_embedder`` imports each implementation
(``onnx``, ``static``, ``transformer``) and those read these names, so the names live below all of them and every
import inside the package points one way: ``localidx.embed`` -> an implementation -> ``names``.
"""

from __future__ import annotations

TRANSFORMER_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the transformer (embed/transformer.py), by name
FAKE_MODEL = "fake"
STATIC_MODEL = "static-minilm"  # static token vectors distilled from the transformer (embed/static.py)
DEFAULT_MODEL = STATIC_MODEL  # hybrid-ready in seconds; the transformer costs about 80 CPU-s per 1,000 chunks
