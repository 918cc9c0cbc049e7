"""The default transformer (all-MiniLM-L6-v2, int8 ONNX) run by onnxruntime directly: CPU, or CUDA where present.

Place in the flow: the default ``Embedder`` under embed (other fastembed models keep ``onnx.FastEmbedder``).

Same model directory, tokenizer and pooling as fastembed (mean over the attention mask, then L2 norm), so the
vectors equal fastembed's within float tolerance and the model id is the same: an existing vector cache stays valid.
What differs: the session comes from ``runtime.make_session`` (CUDA first where onnxruntime offers it, CPU as the
fallback), texts are tokenised once and batched by token count (little padding), and importing it does not import
fastembed (0.7-0.9 s). ``cap`` is the model's window in word pieces: 256 (trained) by default; another cap changes
the vectors, so it is part of the model id (``...-cap128``).

Memory. The session runs ``model.lean.onnx`` (``lean.py``: the word-embedding table stays int8, same vectors). ONNX
Runtime's CPU arena keeps, for the session's life, the most a run ever needed: a few batches of long chunks left it
holding about 780 MB more than the loaded session, so a daemon that indexed once stayed that large. The last run of
every ``embed`` call asks the arena to give its free memory back (``memory.enable_memory_arena_shrinkage``): one
call keeps the arena's speed across its batches, and the memory is returned when it ends (measured: +7 MB instead
of +787 MB after 192 chunks of ~250 word pieces; the figures are in docs/benchmarks.md, Daemon at 100k).
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from localidx.embed.runtime import CUDA

log = logging.getLogger(__name__)

TRAINED_CAP = 256
CPU_BATCH = 16  # texts per run on the CPU: 8-32 measured alike, bigger pads more and grows the arena
GPU_BATCH = 128  # on a GPU a run's fixed cost dominates: fill it (unmeasured here: no GPU on the build machine)


class TransformerEmbedder:
    def __init__(self, threads: int | None = None, cap: int = TRAINED_CAP, batch: int | None = None,
                 device: str | None = None, **session_options):
        from localidx.embed.onnx import LEAN_MODEL, default_model_dir

        self._dir, base_id = default_model_dir()
        self._model_file = self._dir / LEAN_MODEL  # same vectors as model.onnx, 35 MB less in memory (lean.py)
        self.model_id = base_id if cap == TRAINED_CAP else f"{base_id}-cap{cap}"
        self.dim = 384
        self.cap = cap
        self.threads = threads
        self.batch = batch
        self.device = device
        self.session_options = session_options
        self._session = None
        self._tok = None
        self._shrink = None
        self.provider = None

    def _load(self):
        if self._session is None:
            from tokenizers import Tokenizer

            from localidx.embed.runtime import make_session

            tok = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
            tok.enable_truncation(max_length=self.cap)
            tok.no_padding()  # padded per batch, below
            self._tok = tok
            self._session = make_session(str(self._model_file), threads=self.threads, device=self.device,
                                         **self.session_options)
            self.provider = self._session.get_providers()[0]
            self._shrink = _shrink_options()
            if self.batch is None:
                self.batch = GPU_BATCH if self.provider == CUDA else CPU_BATCH
        return self._session

    def _run(self, ids: list[list[int]], last: bool = False) -> np.ndarray:
        width = max(len(i) for i in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        hidden = self._session.run(None, {"input_ids": input_ids, "attention_mask": mask,
                                          "token_type_ids": np.zeros_like(input_ids)},
                                  self._shrink if last else None)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self._tok.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.batch):
            part = order[start : start + self.batch]
            out[part] = self._run([ids[i] for i in part], last=start + self.batch >= len(order))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def _shrink_options():
    """Run options that give the session's memory arena back at the end of the run (see the module docstring)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options
