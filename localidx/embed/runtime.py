"""ONNX Runtime sessions for the embedders: which execution provider runs the transformer, and with which settings.

Place in the flow: under embed; ``transformer.py`` runs chunks through a session made here, and ``static.py`` runs
the vocabulary through one once, when it builds its table.

Provider choice: where the installed onnxruntime offers the CUDA execution provider (the ``onnxruntime-gpu`` wheel)
and ``LOCALIDX_EMBED_DEVICE`` is not ``cpu``, the session asks for CUDA first and CPU second; if making that session
fails (no driver, a CUDA or cuDNN library missing) it logs one warning and makes a CPU-only session. The CPU path
needs nothing beyond the plain ``onnxruntime`` wheel. ``LOCALIDX_EMBED_DEVICE=cuda`` makes a missing or failing CUDA
provider an error instead of a fallback.

The CPU settings are the ones ``benchmarks/coldindex.py`` measured best on 2 cores (see
``benchmarks/embedding_results.md``): every optimisation level, the CPU arena on, sequential execution.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

from localidx.errors import LocalidxError

log = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
DEVICE_ENV = "LOCALIDX_EMBED_DEVICE"  # auto (default), cpu, cuda


class EmbedError(LocalidxError):
    """The embedding model cannot be loaded or run."""


def wanted_device() -> str:
    value = (os.environ.get(DEVICE_ENV) or "auto").strip().lower()
    if value not in ("auto", "cpu", "cuda"):
        raise EmbedError(f"{DEVICE_ENV} must be auto, cpu or cuda, not {value!r}")
    return value


def choose_providers(available: Sequence[str], device: str = "auto") -> list[str]:
    """The providers to ask a session for, best first, given what onnxruntime offers and the wanted device."""
    if device == "cpu":
        return [CPU]
    if CUDA in available:
        return [CUDA, CPU]
    if device == "cuda":
        raise EmbedError(f"{DEVICE_ENV}=cuda, but this onnxruntime has no CUDA execution provider "
                         f"(it offers {', '.join(available) or 'none'}; pip install onnxruntime-gpu)")
    return [CPU]


def session_options(threads: int | None = None, graph_level: str = "all", arena: bool = True,
                    sequential: bool = True, spinning: bool = True):
    """SessionOptions for the CPU settings that matter: intra-op threads (None: onnxruntime's default, every core),
    graph optimisation level (``disable``, ``basic``, ``extended``, ``all``), CPU memory arena, execution mode, and
    whether idle pool threads spin (fast hand-offs on an idle machine, burnt CPU on a busy one)."""
    import onnxruntime as ort

    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[graph_level]
    if threads:
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
    so.enable_cpu_mem_arena = bool(arena)
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL if sequential else ort.ExecutionMode.ORT_PARALLEL
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3  # errors only: a CUDA fallback is reported by our own warning
    return so


def make_session(model_path: str, threads: int | None = None, device: str | None = None, **options):
    """An InferenceSession on the best provider available, falling back to the CPU when CUDA cannot start.

    Returns the session; ``session.get_providers()[0]`` says which provider runs it."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise EmbedError("onnxruntime is not installed: pip install onnxruntime") from None
    device = device or wanted_device()
    providers = choose_providers(ort.get_available_providers(), device)
    so = session_options(threads, **options)
    try:
        session = ort.InferenceSession(model_path, sess_options=so, providers=providers)
    except Exception as exc:  # noqa: BLE001 - any CUDA start-up failure means: run on the CPU
        if providers == [CPU] or device == "cuda":
            raise EmbedError(f"cannot load {model_path}: {' '.join(str(exc).split())[:200]}") from None
        log.warning("CUDA execution provider failed to start (%s); embedding on the CPU",
                    " ".join(str(exc).split())[:200])
        session = ort.InferenceSession(model_path, sess_options=session_options(threads, **options),
                                       providers=[CPU])
        return session
    if providers[0] == CUDA and session.get_providers()[0] != CUDA:
        if device == "cuda":
            raise EmbedError(f"{DEVICE_ENV}=cuda, but onnxruntime could not start CUDA "
                             f"(running on {session.get_providers()[0]})")
        log.warning("CUDA execution provider is installed but did not start; embedding on the CPU")
    elif providers[0] == CUDA:
        log.info("embedding on the GPU (CUDA execution provider)")
    return session
