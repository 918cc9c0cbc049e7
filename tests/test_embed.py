"""Embedders: provider choice (CUDA first, CPU fallback) without a GPU, the raw-ORT transformer against fastembed,
and the static embedder (a small-vocabulary table for most tests, the real table built once for one)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from localidx.embed import TRANSFORMER_MODEL, get_embedder
from localidx.embed import runtime
from localidx.embed.runtime import CPU, CUDA, EmbedError, choose_providers, make_session
from localidx.embed.static import StaticEmbedder, StaticSpec, build_table, load_tokenizer, model_id

JSON_READER = "def read_json_file(path):\n    with open(path) as fh:\n        return json.load(fh)\n"
JSON_LOADER = "def load_json(filename):\n    data = open(filename).read()\n    return json.loads(data)\n"
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

        def run(self, _names, feed, _options=None):
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
    ours = get_embedder(TRANSFORMER_MODEL)
    theirs = FastEmbedder(TRANSFORMER_MODEL)
    a, b = ours.embed(texts), theirs.embed(texts)
    assert ours.model_id == theirs.model_id and ours.provider == CPU
    assert np.min(np.sum(a * b, axis=1)) > 0.9999
    capped = get_embedder(TRANSFORMER_MODEL + "[cap=128]")
    assert capped.model_id == ours.model_id + "-cap128"
    assert float(capped.embed_query(texts[3]) @ a[3]) < 0.9999  # a shorter window is another model
    with pytest.raises(EmbedError, match="unknown parameter"):
        get_embedder(TRANSFORMER_MODEL + "[dim=3]")


@pytest.mark.real_model
def test_lean_model_gives_the_shipped_models_vectors(monkeypatch, tmp_path):
    """The transformer runs model.lean.onnx (word-embedding table gathered as int8): the vectors are those of the
    shipped model.onnx, for a query and for a batch of chunks of different lengths."""
    from localidx.embed.onnx import LEAN_MODEL
    from localidx.embed.transformer import TransformerEmbedder

    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    lean = TransformerEmbedder(threads=1)
    assert lean._model_file.name == LEAN_MODEL and not lean._model_file.is_symlink()
    shipped = TransformerEmbedder(threads=1)
    shipped._model_file = shipped._dir / "model.onnx"
    texts = [JSON_READER, IMAGE_RESIZER, QUERY, " ".join(f"value_{i} = {i}" for i in range(300))]
    assert np.allclose(lean.embed(texts), shipped.embed(texts), rtol=0, atol=1e-6)
    assert np.allclose(lean.embed_query(QUERY), shipped.embed_query(QUERY), rtol=0, atol=1e-6)


def test_lean_file_is_added_to_a_model_directory_assembled_before_it(monkeypatch, tmp_path):
    from localidx.embed.onnx import LEAN_MODEL, default_model_dir

    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    directory, model_id = default_model_dir()
    (directory / LEAN_MODEL).unlink()
    tokenizer = (directory / "tokenizer.json").stat().st_ino
    assert default_model_dir() == (directory, model_id)
    assert (directory / LEAN_MODEL).stat().st_size > 20_000_000
    assert (directory / "tokenizer.json").stat().st_ino == tokenizer  # added in place, nothing assembled again


def test_lean_rewrite_refuses_a_graph_it_does_not_know(tmp_path):
    from localidx.embed.lean import lean_model
    from localidx.embed.onnx import default_model_dir

    shipped = (default_model_dir()[0] / "model.onnx").read_bytes()
    with pytest.raises(ValueError, match="unexpected graph"):
        lean_model(shipped, table="no_such_table")
    with pytest.raises(ValueError):
        lean_model(b"\x3a\x05abc")  # a graph field cut short


@pytest.mark.real_model
def test_transformer_gives_its_arena_back_after_each_call(monkeypatch, tmp_path):
    """A call with long chunks grows ONNX Runtime's arena by hundreds of MB; the call's last run gives it back, so
    a daemon that indexed once does not stay that large."""
    from localidx.daemon import memory
    from localidx.embed.transformer import TransformerEmbedder

    if not memory.usage():
        pytest.skip("needs /proc")
    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    embedder = TransformerEmbedder()
    embedder.embed_query(QUERY)
    memory.trim()
    before = memory.usage()["rss_mb"]
    long_chunk = " ".join(f"value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 120))
    embedder.embed([long_chunk] * 32)
    memory.trim()
    assert memory.usage()["rss_mb"] - before < 100  # the arena kept grew it by ~300 MB here


# -- static ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def small_static():
    """A real table (the shipped model, PCA, weights) over a small vocabulary: the test texts' tokens and the 2,000
    most common word pieces. Seconds to build; never written to a cache."""
    tok = load_tokenizer()
    ids = {i for t in (JSON_READER, JSON_LOADER, IMAGE_RESIZER, QUERY)
           for i in tok.encode(t, add_special_tokens=False).ids}
    first = tok.token_to_id("the")
    ids.update(range(first, first + 2000))
    spec = StaticSpec()
    return StaticEmbedder(spec.name, table=build_table(spec, only=np.array(sorted(ids))))


def test_static_vectors_are_unit_rows_and_similar_code_is_closer(small_static):
    vectors = small_static.embed([JSON_READER, JSON_LOADER, IMAGE_RESIZER, "", "@@@ ###"])
    assert vectors.shape == (5, small_static.dim) == (5, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reader, loader, resizer = vectors[:3]
    assert reader @ loader > reader @ resizer + 0.1
    query = small_static.embed_query(QUERY)
    assert query @ reader > query @ resizer
    assert np.allclose(query, small_static.embed([QUERY])[0])
    assert small_static.embed([]).shape == (0, 256)


def test_static_names_and_model_ids(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    spec = StaticSpec.parse("static-minilm[dim=128,weight=sif,split=0]")
    assert (spec.dim, spec.weight, spec.split) == (128, "sif", False)
    assert StaticSpec.parse(spec.name) == spec and StaticSpec.parse("static-minilm") == StaticSpec()
    ids = {model_id(StaticSpec.parse(n)) for n in ("static-minilm", "static-minilm[dim=128]",
                                                   "static-minilm[weight=sif]", "static-minilm[max=256]")}
    assert len(ids) == 4 and all(i.startswith("static-minilm-") for i in ids)
    embedder = get_embedder("static-minilm[dim=128]")
    assert isinstance(embedder, StaticEmbedder) and embedder.dim == 128
    assert not (tmp_path / "cache").exists()  # choosing the model builds nothing: the first embed does
    for bad in ("static-minilm[dim=999]", "static-minilm[weight=tfidf]", "static-minilm[colour=red]"):
        with pytest.raises(EmbedError):
            StaticSpec.parse(bad)


def test_camel_case_is_split_before_tokenising(small_static):
    from localidx.embed.static import split_camel

    assert split_camel("verifyToken HTTPServer parse_json") == "verify Token HTTP Server parse_json"
    assert np.allclose(small_static.embed_query("verifyToken"), small_static.embed_query("verify token"))


@pytest.mark.real_model
def test_real_static_table_builds_once_offline_and_finds_by_meaning(make_repo, tmp_path, monkeypatch, caplog):
    """The whole vocabulary through the shipped model into an empty cache (tens of seconds), then an index."""
    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.retrieve.search import search
    from localidx.store.index import open_index

    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="localidx.embed.static"):
        embedder = get_embedder("static-minilm")
        vectors = embedder.embed([JSON_READER, JSON_LOADER, IMAGE_RESIZER])
    assert "building the static embedding table" in caplog.text
    table = next((tmp_path / "cache" / "models").glob("static-minilm-*/table.npy"))
    assert table.parent.name == embedder.model_id and table.stat().st_size < 20e6
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1
    caplog.clear()
    again = get_embedder("static-minilm")
    assert np.allclose(again.embed([JSON_READER])[0], vectors[0], atol=1e-6) and not caplog.text

    root = make_repo({
        "mailer.py": ("import smtplib\n\n\ndef send_email(recipient, subject, body):\n"
                      "    \"\"\"Deliver a message to the recipient's mailbox over SMTP.\"\"\"\n"
                      "    with smtplib.SMTP('localhost') as server:\n"
                      "        server.sendmail('noreply@example.com', [recipient], body)\n"),
        "images.py": ("from PIL import Image\n\n\ndef make_thumbnail(path, size=(128, 128)):\n"
                      "    \"\"\"Shrink a picture to a small preview.\"\"\"\n"
                      "    image = Image.open(path)\n    image.thumbnail(size)\n    return image\n"),
    })
    settings = load_settings(root, {"home": str(tmp_path / "home"), "embed_model": "static-minilm"})
    stats = run_index(root, True, settings)
    assert stats.chunks_pending == 0 and stats.model == embedder.model_id
    index = open_index(root, True, settings, read_only=True)
    try:
        assert search(index, "send a mail message", mode="vector")[0].path == "mailer.py"
        assert search(index, "shrink a picture", mode="vector")[0].path == "images.py"
    finally:
        index.close()


def test_a_static_model_writes_every_row_with_its_vector_where_a_slow_one_leaves_them_pending(small_static, make_repo,
                                                                                            tmp_path):
    """A run stopped as soon as it may stop: with the static model every chunk was embedded before its batch was
    written (no vector merge afterwards, the cold index's memory peak), with a slow model the new rows wait for
    their vectors and BM25 answers meanwhile."""
    from localidx.config import load_settings
    from localidx.embed.fake import FakeEmbedder
    from localidx.index.indexer import sync_work_tree
    from localidx.store.index import open_index

    body = "".join(f"    step_{j} = value * {j} + offset  # step {j} of the calculation\n" for j in range(24))
    root = make_repo({f"pkg/mod{n}.py": "".join(f"def handler_{n}_{k}(value, offset={n}):\n{body}    return step_3\n\n\n"
                                                 for k in range(4)) for n in range(24)})
    pending = {}
    for name, embedder in (("static", small_static), ("slow", FakeEmbedder())):
        settings = load_settings(root, {"home": str(tmp_path / name)})
        index = open_index(root, True, settings, embedder=embedder)
        try:
            stats = sync_work_tree(index, root, settings, should_stop=lambda: True)
            missing = index.store.pending_vectors()
        finally:
            index.close()
        assert stats.chunks_written > 64  # more new texts than an edit's batch embeds inline
        pending[name] = (stats.chunks_pending, len(missing))
    assert pending["static"] == (0, 0)
    assert pending["slow"][0] > 0 and pending["slow"][1] > 0


def test_the_default_model_is_the_static_table_and_the_transformer_stays_by_name():
    from localidx.config import Settings
    from localidx.embed.names import DEFAULT_MODEL, STATIC_MODEL

    assert Settings().embed_model == DEFAULT_MODEL == STATIC_MODEL
    assert type(get_embedder(TRANSFORMER_MODEL)).__name__ == "TransformerEmbedder"  # loads lazily: no model read
