"""Embedders: provider choice (CUDA first, CPU fallback) without a GPU, the raw-ORT transformer against fastembed."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from localidx.embed import DEFAULT_MODEL, get_embedder
from localidx.embed import runtime
from localidx.embed.runtime import CPU, CUDA, EmbedError, choose_providers, make_session

JSON_READER = "def read_json_file(path):\n    with open(path) as fh:\n        return json.load(fh)\n"
IMAGE_RESIZER = ("class Thumbnail:\n    def resize_image(self, width, height):\n"
                 "        self.picture = self.picture.scaled(width, height)\n")
QUERY = "parse a json document from a file"


# -- provider choice ------------------------------------------------------------------------------------------


def test_providers_prefer_cuda_and_keep_cpu_as_fallback():
    assert choose_providers([CPU]) == [CPU]
    assert choose_providers(["AzureExecutionProvider", CUDA, CPU]) == [CUDA, CPU]
    assert choose_providers([CUDA, CPU], device="cpu") == [CPU]
    with pytest.raises(EmbedError, match="no CUDA execution provider"):
        choose_providers([CPU], device="cuda")


def test_device_setting_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    assert runtime.wanted_device() == "auto"
    monkeypatch.setenv(runtime.DEVICE_ENV, "CPU")
    assert runtime.wanted_device() == "cpu"
    monkeypatch.setenv(runtime.DEVICE_ENV, "tpu")
    with pytest.raises(EmbedError, match="auto, cpu or cuda"):
        runtime.wanted_device()


class _FakeSession:
    """Stands in for onnxruntime.InferenceSession: fails on CUDA when told to, reports what it runs on."""

    made: list = []
    cuda_fails = False
    cuda_starts = True

    def __init__(self, path, sess_options=None, providers=()):
        _FakeSession.made.append(list(providers))
        if CUDA in providers and self.cuda_fails:
            raise RuntimeError("libcudnn.so.9: cannot open shared object file")
        self._providers = [p for p in providers if p != CUDA or self.cuda_starts]

    def get_providers(self):
        return self._providers


@pytest.fixture
def fake_ort(monkeypatch):
    import onnxruntime

    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])
    monkeypatch.setattr(onnxruntime, "InferenceSession", _FakeSession)
    _FakeSession.made, _FakeSession.cuda_fails, _FakeSession.cuda_starts = [], False, True
    return _FakeSession


def test_session_runs_on_cuda_when_it_starts(fake_ort):
    session = make_session("model.onnx")
    assert fake_ort.made == [[CUDA, CPU]] and session.get_providers()[0] == CUDA


def test_session_falls_back_to_cpu_when_cuda_fails_to_start(fake_ort, caplog):
    fake_ort.cuda_fails = True
    with caplog.at_level(logging.WARNING, logger="localidx.embed.runtime"):
        session = make_session("model.onnx")
    assert fake_ort.made == [[CUDA, CPU], [CPU]] and session.get_providers() == [CPU]
    assert "embedding on the CPU" in caplog.text and "libcudnn" in caplog.text


def test_session_warns_when_onnxruntime_quietly_drops_cuda(fake_ort, caplog, monkeypatch):
    fake_ort.cuda_starts = False
    with caplog.at_level(logging.WARNING, logger="localidx.embed.runtime"):
        assert make_session("model.onnx").get_providers() == [CPU]
    assert "did not start" in caplog.text
    monkeypatch.setenv(runtime.DEVICE_ENV, "cuda")
    with pytest.raises(EmbedError, match="could not start CUDA"):
        make_session("model.onnx")


def test_cpu_setting_never_asks_for_cuda(fake_ort, monkeypatch):
    monkeypatch.setenv(runtime.DEVICE_ENV, "cpu")
    make_session("model.onnx")
    assert fake_ort.made == [[CPU]]


def test_transformer_fills_bigger_batches_on_a_gpu(monkeypatch, tmp_path):
    """The embedder follows the provider the session really got; the vectors are pooled and normalised."""
    from localidx.embed.transformer import CPU_BATCH, GPU_BATCH, TransformerEmbedder

    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    runs = []

    class Session:
        def __init__(self, provider):
            self.provider = provider

        def get_providers(self):
            return [self.provider, CPU]

        def run(self, _names, feed):
            runs.append(feed["input_ids"].shape)
            return [np.ones((*feed["input_ids"].shape, 384), dtype=np.float32)]

    for provider, batch in ((CUDA, GPU_BATCH), (CPU, CPU_BATCH)):
        monkeypatch.setattr(runtime, "make_session", lambda *a, p=provider, **k: Session(p))
        embedder = TransformerEmbedder()
        vectors = embedder.embed(["x = 1"] * 200)
        assert embedder.provider == provider and embedder.batch == batch
        assert vectors.shape == (200, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert runs[0][0] == GPU_BATCH and runs[-1][0] == 200 % CPU_BATCH


# -- the transformer on the real model ------------------------------------------------------------------------


@pytest.mark.real_model
def test_transformer_gives_fastembeds_vectors_on_the_cpu(monkeypatch, tmp_path):
    from localidx.embed.onnx import FastEmbedder

    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    texts = [JSON_READER, IMAGE_RESIZER, QUERY, " ".join(f"value_{i} = {i}" for i in range(300))]  # > 256 pieces
    ours = get_embedder(DEFAULT_MODEL)
    theirs = FastEmbedder(DEFAULT_MODEL)
    a, b = ours.embed(texts), theirs.embed(texts)
    assert ours.model_id == theirs.model_id and ours.provider == CPU
    assert np.min(np.sum(a * b, axis=1)) > 0.9999
    capped = get_embedder(DEFAULT_MODEL + "[cap=128]")
    assert capped.model_id == ours.model_id + "-cap128"
    assert float(capped.embed_query(texts[3]) @ a[3]) < 0.9999  # a shorter window is another model
    with pytest.raises(EmbedError, match="unknown parameter"):
        get_embedder(DEFAULT_MODEL + "[dim=3]")
