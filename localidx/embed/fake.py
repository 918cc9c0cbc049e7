"""A deterministic stand-in for the embedding model, for tests where the real one is too slow.

Each word (identifiers split into words, lower-cased) is hashed to a few dimensions of a 64-d vector, so texts that
share words are near each other: vector search behaves plausibly without a model. Same text, same vector, anywhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import Sequence

import numpy as np

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


class FakeEmbedder:
    model_id = "fake-bow-64"
    dim = 64

    def _load(self) -> None:
        # Tests of the daemon's idle release give it a model's weight: this many MB held once it has embedded.
        size = float(os.environ.get("LOCALIDX_FAKE_MODEL_MB", "0") or 0)
        if size and getattr(self, "_weights", None) is None:
            self._weights = np.ones(int(size * 2**20) // 8)

    def _one(self, text: str) -> np.ndarray:
        self._load()
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORDS.findall(text):
            digest = hashlib.blake2b(word.lower().encode(), digest_size=8).digest()
            for k in range(2):
                vec[digest[k] % self.dim] += 1.0 if digest[k + 4] % 2 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # Tests that must stop a run while it embeds slow it down to about a model's pace.
        delay = float(os.environ.get("LOCALIDX_FAKE_EMBED_DELAY", "0") or 0)
        if delay:
            time.sleep(delay * len(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)
