"""The hot copy: one pinned chunk table version's BM25 statistics and vectors in memory, for warm queries.

Place in the flow: store (read by ``localidx.retrieve.search``'s arms; LanceDB stays the durable store and the source
of truth). A search through LanceDB pays for the full-text index, the vector search and their metadata reads on every
query (about 80 ms of a 90 ms warm query at 7.5k chunks); a process that answers many queries (the daemon, a warm
in-process loop) answers the two arms from here instead, in a few milliseconds.

What it holds, per table version: each row's id, path, language, lines and row id; its vector, L2-normalised
(float32, cosine similarity is one matrix-vector product), unless the table has an ANN index (from
``ANN_MIN_ROWS`` rows), whose search in LanceDB is faster than a scan here; and an inverted index of its
``bm25_text`` (term -> row numbers and counts), built with LanceDB's own analysis of that column so that scores match
its full-text search: split on characters that are not letters or digits, tokens of 40 bytes or more dropped,
lower-cased, stemmed with Snowball's English stemmer (``snowballstemmer``, the algorithm version LanceDB uses), stop
words removed after stemming, accents folded; BM25 with k1 = 1.2, b = 0.75 and idf = ln(1 + (N - n + 0.5) / (n + 0.5))
over the whole version.

Lifetime: a copy belongs to one table version (``key``: the table's directory, version and manifest file), so a
write or a generation switch is never answered from an older copy: the next query pins the new version and finds no
copy for it. A copy is built on a background thread, never inside a query: until it is ready, queries go through
LanceDB as before. ``eager`` processes (the daemon) start building on a version's first query; any other process on
its second (a one-shot CLI search never pays for a build it cannot use). The last ``KEPT`` versions' copies are kept
(readers may still be pinned on the previous one); ``drop_all`` frees them (a daemon going idle). ``LOCALIDX_HOT=0``
in the environment turns the copy off (every search reads LanceDB): for comparisons, and the test suite's default.

Built from the previous copy where it can: a row whose id and embedding key (the hash of the text it was embedded
from, which the explain stage's rewrite of a row changes) the previous copy held with a vector has the same text and
vector, so only the other rows' text and vectors are read and analysed: a write costs a read of the table's small
columns and the changed rows.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import unicodedata
from dataclasses import dataclass

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
MAX_TOKEN_BYTES = 40  # LanceDB's max_token_length: a token this long or longer is not indexed
MEMO_TOKENS = 200_000  # distinct raw tokens whose term is remembered (a repository has tens of thousands)
KEPT = 2  # versions whose copies are kept: the current one and the one a reader may still be pinned on

# Every column a search's result reads of a row (``localidx.retrieve.search.COLUMNS``, in its order). The copy holds
# them all, so that a warm search reads nothing of LanceDB: one take of ten rows by row id cost 5 ms at 1.6k chunks,
# more than the rest of the search.
COLUMNS = ("id", "path", "start_line", "end_line", "symbol", "kind", "language", "title", "text", "signature",
           "parent", "tags", "file_hash", "span_hash", "content_hash", "parent_id", "chunk_index", "token_count",
           "symbols")
_HELD = ("id", "path", "language", "start_line", "end_line")  # held for the arms, each in a shape of its own
_EXTRA = tuple(name for name in COLUMNS if name not in _HELD and name != "text")  # read with the row ids
_HEX = re.compile(r"[0-9a-f]{64}")  # a SHA-256 digest in hex
_ID = re.compile(r"[0-9a-f]{32}")

# The stop words LanceDB's English analysis removes, checked after stemming (``abov`` stays, ``owns`` goes): found by
# querying a LanceDB full-text index with each candidate word.
STOP_WORDS = frozenset("""
a about after again against ain all am an and are aren as at be been being below between both but by can couldn d
did didn do doesn doing don down each few for from further had hadn has hasn have haven having he her here hers
herself him himself his how i if in into is isn it its itself just ll m ma me mightn more most mustn my myself needn
no nor not now o of off on or other our ours out over own re s same shan she should shouldn so some such t than
that the their theirs them then there these they this those through to too under until up ve was wasn we were weren
what when where which while who whom will with won wouldn y you your yours yourself
""".split())

_TOKEN = re.compile(r"[^\W_]+")
_eager = False
_lock = threading.Lock()
_copies: dict[tuple, "HotCopy"] = {}  # key -> copy, the most recent last
_building: set[tuple] = set()
_loaded_at = 0.0  # time.monotonic() when the last copy was ready
_asked: dict[tuple, int] = {}  # key -> queries that found no copy (a non-eager process builds on the second)


class Analyzer:
    """LanceDB's English analysis of a text column (see the module docstring), with the raw token -> term memo that
    makes analysing a table a dictionary lookup per token."""

    def __init__(self):
        import snowballstemmer

        self._stem = snowballstemmer.stemmer("english").stemWord
        self._terms: dict[str, str | None] = {}

    def term(self, token: str) -> str | None:
        """The indexed term of one token (``_TOKEN``), or None when it is not indexed."""
        found = self._terms.get(token, "")
        if found != "":
            return found
        term = None
        if len(token.encode("utf-8", "surrogatepass")) < MAX_TOKEN_BYTES:
            stem = self._stem(token.lower())
            if stem not in STOP_WORDS:
                term = _fold(stem)
        if len(self._terms) < MEMO_TOKENS:
            self._terms[token] = term
        return term

    def counts(self, text: str) -> dict[str, int]:
        """Each indexed term of ``text`` with its count."""
        from collections import Counter

        out: dict[str, int] = {}
        term = self.term
        for token, count in Counter(_TOKEN.findall(text)).items():
            found = term(token)
            if found is not None:
                out[found] = out.get(found, 0) + count
        return out

    def terms(self, text: str) -> list[str]:
        """Every indexed term of ``text``, in order, repeats kept."""
        term = self.term
        return [t for t in map(term, _TOKEN.findall(text)) if t is not None]


def _fold(term: str) -> str:
    if term.isascii():
        return term
    decomposed = unicodedata.normalize("NFKD", term)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


_analyzer: Analyzer | None = None


def analyzer() -> Analyzer:
    global _analyzer
    if _analyzer is None:
        _analyzer = Analyzer()
    return _analyzer


@dataclass
class HotCopy:
    """One table version in memory (see the module docstring). Rows are numbered 0..n-1 in the order read."""

    key: tuple
    ids: object  # chunk id per row (``_Hex`` of 16 bytes, or ``_Text``: a tenth of the memory of a list of str)
    row_ids: object  # uint64 LanceDB row ids of the pinned version
    path_codes: object  # int32 index into ``paths``
    paths: list
    language_codes: object
    languages: list
    start_lines: object
    end_lines: object
    vectors: object  # float32 (n, dim), L2-normalised; a row without a vector is all zeros
    has_vector: object  # bool per row
    with_vectors: bool  # False when the table has an ANN index: its vector search reads LanceDB (see ``build``)
    contents: object  # int64 hash of each row's id and embedding key: what a later version's copy may reuse
    vocabulary: dict  # term -> term number
    starts: object  # int64 (terms + 1): postings of term t are [starts[t], starts[t + 1])
    post_rows: object  # int32 row numbers, ascending within a term
    post_counts: object  # uint16 the term's count in the row
    lengths: object  # float32 terms per row (BM25's document length)
    idf: object  # float32 per term
    columns: dict  # the rest of ``COLUMNS``: name -> its values (``hold``)
    by_row_id: object  # row numbers in the order of their row ids (``numbers``)

    @property
    def size(self) -> int:
        return len(self.row_ids)

    def nbytes(self) -> int:
        """The arrays' bytes (the Python lists and dicts beside them are not counted)."""
        return sum(a.nbytes for a in (self.row_ids, self.path_codes, self.language_codes, self.start_lines,
                                      self.end_lines, self.vectors, self.has_vector, self.contents, self.starts,
                                      self.post_rows, self.post_counts, self.lengths, self.idf, self.by_row_id)) + \
            self.ids.nbytes() + sum(column.nbytes() for column in self.columns.values())

    def _rows(self, numbers, scores, score_name: str, columns: tuple = ()) -> list[dict]:
        ids = self.ids.values(numbers.tolist())
        paths, languages = self.paths, self.languages
        extra = self._values(numbers, columns)
        out = []
        for j, (chunk_id, path, language, start, end, row_id, score) in enumerate(zip(
                ids, self.path_codes[numbers].tolist(), self.language_codes[numbers].tolist(),
                self.start_lines[numbers].tolist(), self.end_lines[numbers].tolist(), self.row_ids[numbers].tolist(),
                scores.tolist())):
            row = {"id": chunk_id, "path": paths[path], "language": languages[language], "start_line": start,
                   "end_line": end, "_rowid": row_id, score_name: score}
            for name, values in extra.items():
                row[name] = values[j]
            out.append(row)
        return out

    def holds(self, name: str) -> bool:
        """Whether this copy holds column ``name`` (of ``COLUMNS``, or ``_rowid``): every one but ``text`` in a copy
        without vectors (see ``build``)."""
        return name in self.columns or name in _HELD or name == "_rowid"

    def _values(self, numbers, columns) -> dict[str, list]:
        at = numbers.tolist()
        return {name: self.columns[name].values(at) for name in columns}

    def numbers(self, row_ids: list[int]) -> list[int | None]:
        """The row number of each of ``row_ids`` in this copy, None for one it does not hold."""
        import numpy as np

        wanted = np.asarray(row_ids, dtype=np.uint64)
        sorted_ids = self.row_ids[self.by_row_id]
        at = np.minimum(np.searchsorted(sorted_ids, wanted), max(self.size - 1, 0))
        out = []
        for row_id, place in zip(row_ids, at.tolist()):
            out.append(int(self.by_row_id[place]) if self.size and int(sorted_ids[place]) == row_id else None)
        return out

    def rows(self, row_ids: list[int], columns=COLUMNS) -> list[dict]:
        """The rows of ``row_ids`` this copy holds (in that order) with ``columns`` (of ``COLUMNS``, and ``_rowid``),
        as LanceDB's ``take_row_ids(...).select(columns).to_list()`` gives them."""
        import numpy as np

        numbers = np.asarray([n for n in self.numbers(row_ids) if n is not None], dtype=np.int64)
        held = {"id": lambda: self.ids.values(numbers.tolist()),
                "path": lambda: [self.paths[c] for c in self.path_codes[numbers].tolist()],
                "language": lambda: [self.languages[c] for c in self.language_codes[numbers].tolist()],
                "start_line": lambda: self.start_lines[numbers].tolist(),
                "end_line": lambda: self.end_lines[numbers].tolist(),
                "_rowid": lambda: self.row_ids[numbers].tolist()}
        values = self._values(numbers, [name for name in columns if name not in held])
        values.update({name: held[name]() for name in columns if name in held})
        return [{name: values[name][j] for name in columns} for j in range(len(numbers))]

    def bm25(self, text: str, fetch: int, columns: tuple = ()) -> list[dict]:
        """The best ``fetch`` rows for the words of ``text`` (any of them), ``_score`` as LanceDB's full-text
        search scores them, best first; rows of equal score in row order; with ``columns`` (of ``COLUMNS``)."""
        import numpy as np

        repeats: dict[int, int] = {}  # a term the query holds twice counts twice, as in LanceDB
        for term in analyzer().terms(text):
            if term in self.vocabulary:
                number = self.vocabulary[term]
                repeats[number] = repeats.get(number, 0) + 1
        numbers = [t for t in sorted(repeats) if self.starts[t + 1] > self.starts[t]]
        if not numbers:
            return []
        spans = [slice(self.starts[t], self.starts[t + 1]) for t in numbers]
        rows = np.concatenate([self.post_rows[span] for span in spans])
        counts = np.concatenate([self.post_counts[span] for span in spans]).astype(np.float32)
        weights = np.repeat(np.asarray([self.idf[t] * repeats[t] for t in numbers], dtype=np.float32),
                            [span.stop - span.start for span in spans])
        average = self._average
        norm = K1 * (1.0 - B + B * self.lengths[rows] / average)
        scores = np.bincount(rows, weights=weights * counts * (K1 + 1.0) / (counts + norm),
                             minlength=self.size).astype(np.float32)
        hit = np.flatnonzero(scores)
        return self._rows(*_best(hit, scores[hit], fetch), "_score", columns)

    @property
    def _average(self) -> float:
        return float(self.lengths.mean()) or 1.0 if self.size else 1.0

    def vector(self, query, fetch: int) -> list[dict] | None:
        """The ``fetch`` rows nearest to ``query`` by cosine distance (``_distance`` = 1 - similarity), nearest
        first; rows without a vector are skipped, as LanceDB's vector search skips them. None when this copy holds
        no vectors (the caller asks LanceDB's ANN index)."""
        import numpy as np

        if not self.with_vectors:
            return None

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or q.shape[0] != self.vectors.shape[1]:
            return []
        # einsum, not ``@``: BLAS's threads for a matrix-vector product cost more than they give on a busy machine
        # (20 ms against 0.4 ms at 7.5k rows, two cores under load)
        similarity = np.einsum("ij,j->i", self.vectors, q / norm)
        hit = np.flatnonzero(self.has_vector)
        best, values = _best(hit, similarity[hit], fetch)
        return self._rows(best, 1.0 - values.astype(np.float64), "_distance")


def _best(numbers, scores, fetch: int):
    """The ``fetch`` highest of ``scores`` (and their ``numbers``), highest first, ties in row order."""
    import numpy as np

    if len(numbers) > fetch:
        keep = np.argpartition(-scores, fetch - 1)[:fetch]
        # every row that ties the last kept score competes for the last places in row order
        edge = scores[keep].min()
        keep = np.union1d(keep, np.flatnonzero(scores == edge))
        numbers, scores = numbers[keep], scores[keep]
    order = np.lexsort((numbers, -scores))[:fetch]
    return numbers[order], scores[order]


# -- building -------------------------------------------------------------------------------------------------

READ_BATCH = 8192  # rows whose text and vector are read at once


def build(table, key: tuple, previous: HotCopy | None = None) -> HotCopy:
    """The copy of the pinned ``table`` (see the module docstring): rows whose chunk id ``previous`` holds keep its
    postings and vector (ids are content-addressed), the others are read and analysed."""
    import numpy as np
    import pyarrow as pa

    from localidx.store.lance import FTS_COLUMN

    meta = table.search().select(["id", "path", "language", "start_line", "end_line", "embed_key", *_EXTRA]) \
        .with_row_id(True).limit(None).to_arrow()
    ids = meta.column("id").to_pylist()
    # a row's content: its id and the key of the text it was embedded from (the explain stage rewrites a row's
    # text under the same id, and its embedding key with it)
    contents = np.fromiter((hash((chunk_id, embedded)) for chunk_id, embedded
                            in zip(ids, meta.column("embed_key").to_pylist())), dtype=np.int64, count=len(ids))
    row_ids = np.asarray(meta.column("_rowid").to_numpy(), dtype=np.uint64)
    n = len(ids)
    # With an ANN index (``ANN_MIN_ROWS`` and more) LanceDB's vector search is faster than a scan of every vector
    # here (154k chunks: 46 ms against 120 ms a query on a loaded machine) and the vectors were most of the copy's
    # memory: such a copy holds the BM25 postings only, and no text either (the text of 100k chunks is 60 to 80 MB;
    # a query takes the few rows it shows from LanceDB, 5 ms beside its vector search's 20).
    with_vectors = not any(tuple(i.columns) == ("vector",) for i in table.list_indices())
    if previous is not None and previous.with_vectors != with_vectors:
        previous = None
    old_number = {} if previous is None else {
        content: i for i, content in enumerate(previous.contents.tolist())
        if previous.has_vector[i] or not with_vectors}
    old_of_new = np.fromiter((old_number.get(content, -1) for content in contents.tolist()), dtype=np.int64,
                             count=n)
    del old_number
    kept = np.flatnonzero(old_of_new >= 0)
    new = np.flatnonzero(old_of_new < 0)
    dim = previous.vectors.shape[1] if previous is not None else 0
    vocabulary: dict[str, int] = dict(previous.vocabulary) if previous is not None else {}
    lengths = np.zeros(n, dtype=np.float32)
    parts_terms, parts_rows, parts_counts = [], [], []
    vectors = None
    has_vector = np.zeros(n, dtype=bool)
    texts: list = [None] * n
    reread: list[int] = []  # kept rows whose text changed
    if previous is not None and len(kept):
        new_of_old = np.full(previous.size, -1, dtype=np.int64)
        new_of_old[old_of_new[kept]] = kept
        old_terms = np.repeat(np.arange(len(previous.starts) - 1, dtype=np.int32), np.diff(previous.starts))
        remapped = new_of_old[previous.post_rows]
        mask = remapped >= 0
        parts_terms.append(old_terms[mask])
        parts_rows.append(remapped[mask].astype(np.int32))
        parts_counts.append(previous.post_counts[mask])
        lengths[kept] = previous.lengths[old_of_new[kept]]
        vectors = np.zeros((n, dim), dtype=np.float32)
        vectors[kept] = previous.vectors[old_of_new[kept]]
        has_vector[kept] = previous.has_vector[old_of_new[kept]]
        # ``content_hash`` is the hash of the text: a kept row's text is the previous copy's if that hash is too
        old_texts = previous.columns["text"].values(old_of_new[kept].tolist()) if with_vectors else ()
        old_hashes = previous.columns["content_hash"].values(old_of_new[kept].tolist())
        for i, text, old_hash, new_hash in zip(kept.tolist(), old_texts, old_hashes,
                                               meta.column("content_hash").take(kept).to_pylist()):
            if old_hash == new_hash:
                texts[i] = text
            else:
                reread.append(i)
    the = analyzer()
    new_terms: list[int] = []
    new_counts: list[int] = []
    new_sizes = np.zeros(len(new), dtype=np.int64)
    for begin in range(0, len(new), READ_BATCH):
        batch = new[begin:begin + READ_BATCH]
        data = table.take_row_ids([int(row_ids[i]) for i in batch]) \
            .select([FTS_COLUMN, "text", "vector"] if with_vectors else [FTS_COLUMN]).with_row_id().to_arrow()
        position = {int(r): j for j, r in enumerate(data.column("_rowid").to_pylist())}
        words = data.column(FTS_COLUMN).to_pylist()
        shown = data.column("text").to_pylist() if with_vectors else [None] * len(words)
        column = data.column("vector").combine_chunks() if with_vectors else \
            pa.nulls(len(words), pa.list_(pa.float32(), 1))
        if vectors is None:
            dim = column.type.list_size if with_vectors else 0
            vectors = np.zeros((n, dim), dtype=np.float32)
        valid = np.asarray(column.is_valid())
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, dim) \
            if len(column) and dim else np.zeros((0, dim), np.float32)
        # a null vector has no values in the flattened child (LanceDB writes a null, not zeros)
        slot = np.cumsum(valid) - 1 if len(flat) != len(column) else np.arange(len(column))
        for offset, i in enumerate(batch.tolist()):
            j = position[int(row_ids[i])]
            texts[i] = shown[j]
            counts = the.counts(words[j] or "")
            for term, count in counts.items():
                new_terms.append(vocabulary.setdefault(term, len(vocabulary)))
                new_counts.append(count)
            new_sizes[begin + offset] = len(counts)
            lengths[i] = sum(counts.values())
            if valid[j]:
                vector = flat[slot[j]]
                norm = float(np.linalg.norm(vector))
                if norm > 0.0:
                    vectors[i] = vector / norm
                    has_vector[i] = True
    if len(new):
        parts_terms.append(np.asarray(new_terms, dtype=np.int32))
        parts_rows.append(np.repeat(new.astype(np.int32), new_sizes))
        parts_counts.append(np.minimum(np.asarray(new_counts, dtype=np.int64), 65535).astype(np.uint16))
    if vectors is None:
        vectors = np.zeros((n, dim), dtype=np.float32)
    all_terms = np.concatenate(parts_terms) if parts_terms else np.zeros(0, np.int32)
    all_rows = np.concatenate(parts_rows) if parts_rows else np.zeros(0, np.int32)
    all_counts = np.concatenate(parts_counts) if parts_counts else np.zeros(0, np.uint16)
    order = np.lexsort((all_rows, all_terms))
    all_terms, all_rows, all_counts = all_terms[order], all_rows[order], all_counts[order]
    df = np.bincount(all_terms, minlength=len(vocabulary))
    starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(df, out=starts[1:])
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
    for begin in range(0, len(reread), READ_BATCH):
        batch = reread[begin:begin + READ_BATCH]
        data = table.take_row_ids([int(row_ids[i]) for i in batch]).select(["text"]).with_row_id().to_arrow()
        shown = dict(zip(data.column("_rowid").to_pylist(), data.column("text").to_pylist()))
        for i in batch:
            texts[i] = shown.get(int(row_ids[i]))
    columns = {"text": hold(texts)} if with_vectors else {}
    columns.update((name, hold(meta.column(name).to_pylist())) for name in _EXTRA)
    path_list, path_codes = _codes(meta.column("path").to_pylist())
    language_list, language_codes = _codes(meta.column("language").to_pylist())
    # chunk ids are 32 hex digits (``localidx.chunk.finalize``): held as their 16 bytes
    held_ids = _Hex(ids, 16) if all(len(i) == 32 and _ID.fullmatch(i) for i in ids) else _Text(ids)
    return HotCopy(key=key, ids=held_ids, row_ids=row_ids, path_codes=path_codes,
                   paths=path_list,
                   language_codes=language_codes, languages=language_list,
                   start_lines=np.asarray(meta.column("start_line").to_numpy(zero_copy_only=False), dtype=np.int32),
                   end_lines=np.asarray(meta.column("end_line").to_numpy(zero_copy_only=False), dtype=np.int32),
                   vectors=vectors, has_vector=has_vector, with_vectors=with_vectors, contents=contents,
                   vocabulary=vocabulary, starts=starts,
                   post_rows=all_rows, post_counts=all_counts, lengths=lengths, idf=idf, columns=columns,
                   by_row_id=np.argsort(row_ids, kind="stable"))


# -- the columns of results ------------------------------------------------------------------------------------
# A result's row is read value by value (tens of rows a query): these hold a column as bytes and offsets, where a
# value is a slice and a decode (half a microsecond), in about the memory of the text itself.


def hold(values: list):
    """``values`` (one column, a value per row, as LanceDB's ``to_list`` gives them) in the most compact of the
    holders below that gives each back unchanged."""
    present = [v for v in values if v is not None]
    if present and all(type(v) is int for v in present) and len(present) == len(values):
        return _Ints(values)
    if present and all(type(v) is str for v in present):
        if len(present) == len(values) and all(len(v) == 64 and _HEX.fullmatch(v) for v in values):
            return _Hex(values)
        if len(set(values)) * 4 < len(values):
            return _Coded(values)
        return _Text(values)
    if not present or all(type(v) is str for v in present):
        return _Coded(values)
    return _Sparse(values)


class _Ints:
    def __init__(self, values: list):
        import numpy as np

        self.array = np.asarray(values, dtype=np.int64 if values and max(map(abs, values)) >= 2**31 else np.int32)

    def values(self, at: list[int]) -> list:
        return self.array[at].tolist()

    def nbytes(self) -> int:
        return self.array.nbytes


class _Text:
    """Strings as one UTF-8 buffer and the offsets of each value in it; None kept."""

    def __init__(self, values: list):
        import numpy as np

        encoded = [b"" if v is None else v.encode("utf-8", "surrogatepass") for v in values]
        self.blob = b"".join(encoded)
        self.offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=self.offsets[1:])
        self.missing = frozenset(i for i, v in enumerate(values) if v is None)

    def values(self, at: list[int]) -> list:
        blob, offsets, missing = self.blob, self.offsets, self.missing
        out = []
        for i in at:
            out.append(None if i in missing else blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogatepass"))
        return out

    def nbytes(self) -> int:
        return len(self.blob) + self.offsets.nbytes


class _Hex:
    """Lower-case hex digests of ``width`` bytes (a SHA-256's 32, a chunk id's 16) as their bytes (half the
    memory)."""

    def __init__(self, values: list, width: int = 32):
        self.width = width
        self.blob = b"".join(bytes.fromhex(v) for v in values)

    def values(self, at: list[int]) -> list:
        blob, width = self.blob, self.width
        return [blob[width * i:width * (i + 1)].hex() for i in at]

    def nbytes(self) -> int:
        return len(self.blob)


class _Coded:
    """A column whose values repeat (a kind, a file's hash, its tags): each distinct value once and a code per row."""

    def __init__(self, values: list):
        import numpy as np

        table: dict = {}
        self.codes = np.fromiter((table.setdefault(v, len(table)) for v in values), dtype=np.int32, count=len(values))
        self.distinct = list(table)

    def values(self, at: list[int]) -> list:
        distinct = self.distinct
        return [distinct[c] for c in self.codes[at].tolist()]

    def nbytes(self) -> int:
        return self.codes.nbytes + sum(len(v) for v in self.distinct if isinstance(v, str))


class _Sparse:
    """Any other column (the symbols of merged chunks: a list for a few rows): its most common value, and the
    others, by row, as JSON in a ``_Text``."""

    def __init__(self, values: list):
        import json

        import numpy as np

        encoded = [json.dumps(v, ensure_ascii=False) for v in values]
        counted: dict[str, int] = {}
        for e in encoded:
            counted[e] = counted.get(e, 0) + 1
        common = max(counted, key=counted.get) if counted else "null"
        self.common = json.loads(common)
        others = [i for i, e in enumerate(encoded) if e != common]
        self.rows = np.asarray(others, dtype=np.int64)
        self.others = _Text([encoded[i] for i in others])

    def values(self, at: list[int]) -> list:
        import copy
        import json

        import numpy as np

        places = np.searchsorted(self.rows, np.asarray(list(at), dtype=np.int64)).tolist() if len(self.rows) else []
        out = []
        for n, i in enumerate(at):
            place = places[n] if places else 0
            held = place < len(self.rows) and int(self.rows[place]) == i
            out.append(json.loads(self.others.values([place])[0]) if held else copy.deepcopy(self.common))
        return out

    def nbytes(self) -> int:
        return self.rows.nbytes + self.others.nbytes()


def _codes(values: list) -> tuple[list, object]:
    import numpy as np

    table: dict = {}
    codes = np.fromiter((table.setdefault(v, len(table)) for v in values), dtype=np.int32, count=len(values))
    return list(table), codes


# -- the registry -------------------------------------------------------------------------------------------------


def table_key(table) -> tuple | None:
    """The identity of a pinned table version (``ChunkStore.snapshot`` sets it); None for a table without one."""
    return getattr(table, "_localidx_version_key", None)


def set_eager(eager: bool = True) -> None:
    """Build a version's copy on its first query (the daemon), not its second."""
    global _eager
    _eager = eager


def ready(table) -> bool:
    """Whether ``table``'s version has a copy ready (nothing is started)."""
    key = table_key(table)
    return key is not None and key in _copies and os.environ.get("LOCALIDX_HOT") != "0"


def copy_for(table) -> HotCopy | None:
    """The ready copy of ``table``'s version, or None (then a build may start in the background: see the module
    docstring) and the caller reads LanceDB."""
    key = table_key(table)
    if key is None or os.environ.get("LOCALIDX_HOT") == "0":
        return None
    with _lock:
        found = _copies.get(key)
        if found is not None:
            return found
        asked = _asked.get(key, 0) + 1
        _asked[key] = asked
        while len(_asked) > 16:
            _asked.pop(next(iter(_asked)))
        if _building or (asked < 2 and not _eager):
            return None  # one build at a time: a busy writer's versions follow each other faster than that
        _building.add(key)
        previous = next(reversed(_copies.values()), None)
    threading.Thread(target=_build_into, args=(table, key, previous), name="localidx-hot-copy", daemon=True).start()
    return None


def _build_into(table, key: tuple, previous: HotCopy | None) -> None:

    started = time.perf_counter()
    try:
        copy = build(table, key, previous if previous is not None and previous.key[0] == key[0] else None)
    except Exception as exc:  # noqa: BLE001 - without a copy, queries keep reading LanceDB
        log.warning("could not load the index into memory (%s); searches read it from disk",
                    f"{type(exc).__name__}: {exc}".splitlines()[0])
        with _lock:
            _building.discard(key)
        return
    global _loaded_at
    with _lock:
        _building.discard(key)
        _copies[key] = copy
        _loaded_at = time.monotonic()
        while len(_copies) > KEPT:
            _copies.pop(next(iter(_copies)))
    log.info("loaded %d chunks into memory in %.2f s (%.1f MB of arrays)", copy.size, time.perf_counter() - started,
             copy.nbytes() / 1e6)


def wait(table, timeout: float = 60.0) -> HotCopy | None:
    """``table``'s copy, building it now if none is ready or being built (tests and benchmarks)."""
    key = table_key(table)
    if key is None:
        return None
    with _lock:
        found = _copies.get(key)
        start = found is None and key not in _building
        if start:
            _building.add(key)
            previous = next(reversed(_copies.values()), None)
    if start:
        _build_into(table, key, previous)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _lock:
            if key in _copies:
                return _copies[key]
            if key not in _building:
                return None
        time.sleep(0.01)
    return None


def drop_all() -> None:
    """Forget every copy (a daemon going idle); the next queries read LanceDB until a copy is built again."""
    with _lock:
        _copies.clear()
        _asked.clear()


def loading() -> bool:
    """Whether a copy is being loaded (a daemon does not release its caches meanwhile)."""
    return bool(_building)


def loaded_at() -> float:
    """``time.monotonic()`` when the last copy was ready (0.0: never)."""
    return _loaded_at


def describe() -> dict:
    """The newest copy's table version, chunks and array megabytes (the daemon's ``daemon/hello``); {} when none."""
    with _lock:
        copy = next(reversed(_copies.values()), None)
    if copy is None:
        return {}
    return {"version": copy.key[1], "chunks": copy.size, "mb": round(copy.nbytes() / 1e6, 1)}
