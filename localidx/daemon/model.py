"""The daemon's embedding model: loaded on first use, shared by the readers and the writer, released when idle.

``SharedModel`` wraps an ``Embedder`` (the protocol of ``localidx.embed``) and is one itself, so an ``Index`` and
the indexer take it as they take any embedder. What it adds:

- **One load.** The first call loads the model under a lock: queries that arrive together after a release wait for
  one load instead of each loading a copy (the default model costs 55-70 MB once loaded).
- **Release.** ``release()`` waits for the calls in flight, then drops the loaded embedder; the next call makes and
  loads a fresh one. ``load_mb`` is what loading it added to the process's own memory; the daemon's idle release
  drops a model that costs more than ``server.KEEP_MODEL_MB`` and keeps a smaller one (the default model: about
  55 MB), whose reload would be most of the first query's time afterwards.

``model_id`` and ``dim`` are known without loading (an ``Embedder`` has them from its constructor), so a released
model still names the table it reads.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Sequence

from localidx.daemon import memory

log = logging.getLogger(__name__)

WARM_UP = "localidx warm-up"


class SharedModel:
    """An ``Embedder`` that loads on first use, once, and can be released (see the module docstring)."""

    def __init__(self, make: Callable[[], object]):
        self._make = make
        self._inner = make()
        self.model_id: str = self._inner.model_id
        self._dim: int = self._inner.dim
        self._cond = threading.Condition()
        self._load_lock = threading.Lock()
        self._users = 0
        self._releasing = False
        self.loaded = False
        self.loads = 0  # how many times the model was loaded (1 at start, +1 after every release that was used)
        self.load_s = 0.0  # how long the last load took
        self.load_mb: float | None = None  # the process's own memory the last load added (None: not known here)

    @property
    def dim(self) -> int:
        inner = self._inner
        return inner.dim if inner is not None else self._dim

    def load(self) -> None:
        """Load the model now (the daemon's start-up does, so the first query finds it warm)."""
        inner = self._enter()
        try:
            self._ensure_loaded(inner)
        finally:
            self._exit()

    def embed(self, texts: Sequence[str]):
        inner = self._enter()
        try:
            self._ensure_loaded(inner)
            return inner.embed(texts)
        finally:
            self._exit()

    def embed_query(self, text: str):
        inner = self._enter()
        try:
            self._ensure_loaded(inner)
            return inner.embed_query(text)
        finally:
            self._exit()

    def release(self) -> bool:
        """Drop the loaded model once no call is in flight; True when one was loaded."""
        with self._cond:
            self._releasing = True
            try:
                while self._users:
                    self._cond.wait()
                was_loaded = self.loaded
                if self._inner is not None:
                    self._dim = self._inner.dim
                self._inner = None
                self.loaded = False
            finally:
                self._releasing = False
                self._cond.notify_all()
        return was_loaded

    def __getattr__(self, name: str):
        # Anything else an embedder offers (``threads``, ``provider``...), from the current one.
        if name.startswith("_"):
            raise AttributeError(name)
        inner = self.__dict__.get("_inner")
        if inner is None:
            inner = self._enter()
            self._exit()
        return getattr(inner, name)

    def _enter(self):
        with self._cond:
            while self._releasing:
                self._cond.wait()
            if self._inner is None:
                self._inner = self._make()
            self._users += 1
            return self._inner

    def _exit(self) -> None:
        with self._cond:
            self._users -= 1
            if not self._users:
                self._cond.notify_all()

    def _ensure_loaded(self, inner) -> None:
        if self.loaded:
            return
        with self._load_lock:
            if self.loaded:
                return
            started = time.perf_counter()
            before = memory.usage().get("anon_mb")
            inner.embed_query(WARM_UP)
            # Making the inference session optimises the graph; its scratch (about 65 MB for the transformer) is
            # freed but stays in the heap until the allocator is asked to give it back.
            memory.trim()
            after = memory.usage().get("anon_mb")
            self.load_mb = round(max(0.0, after - before), 1) if before is not None and after is not None else None
            self.load_s = time.perf_counter() - started
            self.loads += 1
            self.loaded = True
            log.info("model %s loaded in %.2f s", self.model_id, self.load_s)

