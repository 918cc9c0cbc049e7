"""The arms of a search: reads of one pinned table version, from its in-memory copy (``localidx.store.hot``) when
one is ready, else from LanceDB, with the same rows and scores either way.

Place in the flow: retrieve, read by ``localidx.retrieve.search`` (which fuses and ranks what these return).
Read-only. Invariants:

- Within one search a table is read from its copy or from LanceDB, as ``decide`` said at the search's start: one
  search, one reading of each version. A filtered arm (``where``) reads LanceDB, whose prefilters apply the filter;
  rows taken by row id (``taken``: the shown rows, the name lookup's) come from the copy whatever the filter, but
  for a column the copy does not hold (the text, in a copy of a table with an ANN index), read from LanceDB.
- An arm returns ``CANDIDATE_COLUMNS``, the row id and its score; ``materialise`` replaces the rows that are shown by
  full rows (``COLUMNS``), taken by row id from the same version.
- The name lookup (``definition_arm``) finds a name's definitions by their symbols (``SymbolMap``) and by the
  declarations in the text of the rows BM25 finds for the name.
"""

from __future__ import annotations

import contextvars
import logging
import re
import threading

from localidx.errors import UsageError
from localidx.retrieve.ranking import declaration_rank, definition_rank, joined_words
from localidx.retrieve.transforms import NameQuery, fold_name, name_parts
from localidx.store.hot import COLUMNS as _ROW_COLUMNS

log = logging.getLogger(__name__)

COLUMNS = list(_ROW_COLUMNS)
# What the arms read of each candidate: enough to fuse, weigh roles, support files and order ties. The full rows of
# the k that win are taken by row id afterwards (``materialise``): reading every column of 200 candidates per arm
# cost more than the searches themselves.
CANDIDATE_COLUMNS = ["id", "path", "language", "start_line", "end_line"]
_QUERY_WORD = re.compile(r"\w+")


def bm25_query_text(query: str) -> str:
    """The words BM25 searches for: the query's word tokens plus the split words of its identifiers and the words
    it writes apart that code writes as one (``ranking.joined_words``), deduplicated.

    Only word characters survive, so quotes, colons, parentheses or operators in user text are never FTS syntax.
    """
    from localidx.chunk.enrich import split_identifier

    words: dict[str, None] = {}
    for token in _QUERY_WORD.findall(query):
        words.setdefault(token.lower(), None)
        for part in split_identifier(token):
            words.setdefault(part, None)
    words.update(dict.fromkeys(joined_words(query)))  # "shut down" finds `shutdown` too
    return " ".join(words)


def bm25_arm(table, query: str, where: str | None, fetch: int, required: bool, columns: tuple = (),
             quiet: bool = False) -> list[dict]:
    """BM25's best ``fetch`` rows for ``query`` (``CANDIDATE_COLUMNS``, ``columns``, ``_score``, the row id). A
    failure of the full-text index is a usage error when ``required``; else the other arm answers, with a warning
    unless ``quiet`` (the name lookup's extra read)."""
    from lancedb.query import MatchQuery

    from localidx.store.lance import FTS_COLUMN

    text = bm25_query_text(query)
    if not text:
        return []
    in_memory = None if where else hot_copy(table)
    if in_memory is not None:
        found = in_memory.bm25(text, fetch, tuple(c for c in columns if in_memory.holds(c)))
        return _in_order(_from_lancedb(table, found, tuple(c for c in columns if not in_memory.holds(c))))
    try:
        # A MatchQuery is tokenised like the column, never parsed: no phrase, field or boolean syntax applies.
        builder = table.search(MatchQuery(text, FTS_COLUMN), query_type="fts")
        if where:
            builder = builder.where(where, prefilter=True)
        return _in_order(builder.select([*CANDIDATE_COLUMNS, *columns, "_score"]).with_row_id(True).limit(fetch)
                         .to_list())
    except Exception as exc:  # noqa: BLE001 - any FTS failure is reported in one line or answered by the other arm
        from localidx.store.index import storage_error

        if storage_error(exc) is not None:
            raise  # the index's files are damaged: not a query problem
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if required:
            raise UsageError(f"full-text search failed ({reason}); run `localidx index` to rebuild it") from None
        if not quiet:
            log.warning("full-text search failed, answering from vectors only: %s", reason)
        return []


def _in_order(rows: list[dict]) -> list[dict]:
    """BM25's rows best first, rows of one score (to six places: the copy sums in float32 in another order than
    LanceDB) in path and line order, so that which of two equally good chunks a search shows does not depend on
    which of the two answered it."""
    return sorted(rows, key=lambda row: (-round(row["_score"], 6), row["path"], row["start_line"]))


def vector_arm(table, vector, where: str | None, fetch: int) -> list[dict]:
    """The vector search's nearest ``fetch`` rows to ``vector`` (``CANDIDATE_COLUMNS``, ``_distance``, the row
    id)."""
    # Rows still waiting for their vector are skipped by LanceDB's vector search itself. Filtering them out with
    # "vector IS NOT NULL" made every query read the whole vector column once the ANN index existed (176 ms instead
    # of 26 ms for this arm at 100k chunks: benchmarks/query.py), so only the user's filters are applied.
    in_memory = None if where else hot_copy(table)
    found = in_memory.vector(vector, fetch) if in_memory is not None else None
    if found is not None:
        return found
    query = table.search(vector, vector_column_name="vector").distance_type("cosine")
    if where:
        query = query.where(where, prefilter=True)
    return query.select([*CANDIDATE_COLUMNS, "_distance"]).with_row_id(True).limit(fetch).to_list()


_DECIDED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("localidx_search_copies", default=None)


class decide:
    """``with decide(tables):`` each table's copy, or None, decided once for the search inside (a copy that becomes
    ready halfway through is for the next search); ``copies`` maps ``id(table)`` to it."""

    def __init__(self, tables):
        self.tables = list(tables)

    def __enter__(self) -> dict:
        self.token = _DECIDED.set({})
        copies = _DECIDED.get()
        copies.update({id(table): hot_copy(table) for table in self.tables})
        return copies

    def __exit__(self, *exc) -> None:
        _DECIDED.reset(self.token)


def hot_copy(table):
    """The in-memory copy of the pinned ``table`` (``localidx.store.hot``) when one is ready, else None: the arm
    reads LanceDB. Within a search, what ``decide`` decided for the table at its start."""
    decided = _DECIDED.get()
    if decided is not None and id(table) in decided:
        return decided[id(table)]
    from localidx.store import hot

    return hot.copy_for(table)


def taken(table, row_ids: list[int], columns, with_row_id: bool = False) -> list[dict]:
    """The rows of ``row_ids`` of the pinned ``table`` with ``columns`` (and ``_rowid``), from its copy when it has
    one (a column it does not hold from LanceDB), else from LanceDB."""
    in_memory = hot_copy(table)
    if in_memory is None:
        builder = table.take_row_ids(row_ids).select(list(columns))
        return (builder.with_row_id() if with_row_id else builder).to_list()
    rows = in_memory.rows(row_ids, tuple(c for c in columns if in_memory.holds(c)) + ("_rowid",))
    rows = _from_lancedb(table, rows, tuple(c for c in columns if not in_memory.holds(c)))
    if not with_row_id:
        for row in rows:
            del row["_rowid"]
    return rows


def _from_lancedb(table, rows: list[dict], columns: tuple) -> list[dict]:
    """``rows`` (with ``_rowid``) with ``columns`` added, taken by row id from LanceDB's same pinned version."""
    if not columns or not rows:
        return rows
    found = table.take_row_ids([row["_rowid"] for row in rows]).select(list(columns)).with_row_id().to_list()
    by_row = {row["_rowid"]: row for row in found}
    out = []
    for row in rows:
        extra = by_row.get(row["_rowid"])
        if extra is not None:
            out.append({**row, **{name: extra[name] for name in columns}})
    return out


def materialise(table, candidates: list[dict], rows: dict, label) -> None:
    """Replace the candidate rows (``CANDIDATE_COLUMNS`` and ``_rowid``) by full rows (``COLUMNS``) of the same pinned
    table version, taken by row id."""
    wanted = [row["_rowid"] for row in candidates if "file_hash" not in row]
    if wanted:
        for row in taken(table, wanted, COLUMNS):
            rows[(label, row["id"])] = row


def definition_arm(table, names: NameQuery, where: str | None,
                   text_if_parsed: bool = True) -> list[tuple[tuple, dict]]:
    """The chunks that define a name of ``names``, each with its rank key (``ranking.definition_rank``: lower
    ranks first), the parsed definitions and those whose text declares the name (``ranking.declaration_rank``;
    with ``text_if_parsed`` false, only for a name no parsed symbol defines: a question's mentioned names, where the
    text's keyword search was a third of a question's time). One definition a file and name: of a name defined in
    several chunks of a file (a symbol split in parts, a function's methods or clauses, a type and its
    constructors), the first that matches best."""
    from localidx.retrieve.transforms import data
    from localidx.store.lance import sql_str

    skip = ", ".join(sql_str(kind) for kind in sorted(data().non_definition_kinds))
    found: dict[tuple, tuple[tuple, dict]] = {}
    for parts in names.names:
        last = fold_name(parts[-1])
        if not last:
            continue
        clause = (f"replace(replace(lower(symbol), '_', ''), '-', '') LIKE {sql_str('%' + last + '%')}"
                  f" AND kind NOT IN ({skip})")
        parsed = set()
        for row in rows_naming(table, last, clause, where):
            rank = definition_rank(parts, names.wants, row)
            if rank is None:
                continue
            parsed.add(row["id"])
            file_key = (row["path"], parts)
            if file_key not in found or rank < found[file_key][0]:
                found[file_key] = (rank, row)
        for row in declaration_rows(table, parts[-1], where) if text_if_parsed or not parsed else ():
            rank = declaration_rank(parts, names.wants, row) if row["id"] not in parsed else None
            file_key = (row["path"], parts)
            if rank is not None and (file_key not in found or rank < found[file_key][0]):
                found[file_key] = (rank, row)
    return list(found.values())


def rows_naming(table, last: str, clause: str, where: str | None) -> list[dict]:
    """What ``clause`` (and ``where``) select of the pinned ``table`` for the name arm, with ``CANDIDATE_COLUMNS``,
    ``symbol``, ``kind`` and the row id: of the rows that can define the folded name ``last``, that is, whose
    symbol's last component folds to it (the only rows ``ranking.definition_rank`` accepts). Without ``where``, the
    rows are found through ``SymbolMap`` and taken by row id, and the clause's two conditions are checked on them
    here; scanning the symbol column with the clause took 75 ms a name query at 15k chunks."""
    columns = [*CANDIDATE_COLUMNS, "symbol", "kind", "text"]  # text: a prototype ranks after its definition
    if where:
        return table.search().where(f"({where}) AND {clause}").select(columns).with_row_id(True) \
            .limit(10_000).to_list()
    ids = SymbolMap.of(table).row_ids(last)
    if not ids:
        return []
    from localidx.retrieve.transforms import data

    skip = data().non_definition_kinds
    rows = taken(table, ids, columns, with_row_id=True)
    return [row for row in rows if row["kind"] not in skip and row["symbol"] is not None and
            last in row["symbol"].lower().replace("_", "").replace("-", "")]


class SymbolMap:
    """The row ids of one pinned table version by the folded last component of each symbol of a row (``symbol``
    holds several, ", "-joined, for merged siblings), kept as two sorted arrays of hashes and row ids (a few MB at
    100k chunks); a hash that two names share only costs a row that is read and left out. Built on a version's
    first name query and kept for the last few versions (a daemon's readers share them)."""

    KEPT = 4
    _maps: dict = {}
    _lock = threading.Lock()

    def __init__(self, table):
        import numpy as np

        in_memory = hot_copy(table)
        if in_memory is not None:
            symbols = in_memory.columns["symbol"].values(range(in_memory.size))
            row_ids = in_memory.row_ids.tolist()
        else:
            data = table.search().select(["symbol"]).with_row_id(True).limit(None).to_arrow()
            symbols, row_ids = data.column("symbol").to_pylist(), data.column("_rowid").to_pylist()
        hashes: list[int] = []
        ids: list[int] = []
        for symbol, row_id in zip(symbols, row_ids):
            for name in dict.fromkeys((symbol or "").split(", ")):
                parts = name_parts(name)
                if parts:
                    hashes.append(hash(fold_name(parts[-1])))
                    ids.append(row_id)
        order = np.argsort(np.asarray(hashes, dtype=np.int64), kind="stable")
        self.hashes = np.asarray(hashes, dtype=np.int64)[order]
        self.ids = np.asarray(ids, dtype=np.uint64)[order]

    def row_ids(self, folded: str) -> list[int]:
        import numpy as np

        key = np.int64(hash(folded))
        start, end = np.searchsorted(self.hashes, key, "left"), np.searchsorted(self.hashes, key, "right")
        return sorted({int(row_id) for row_id in self.ids[start:end]})

    @classmethod
    def of(cls, table) -> "SymbolMap":
        from localidx.store.hot import table_key

        # a pinned snapshot's identity is known without asking LanceDB (``table.version`` is a call into it)
        key = table_key(table) or (table._dataset_path, table.version)  # noqa: SLF001 - no public name for it
        with cls._lock:
            found = cls._maps.pop(key, None) or cls(table)
            cls._maps[key] = found  # the most recent last
            while len(cls._maps) > cls.KEPT:
                cls._maps.pop(next(iter(cls._maps)))
            return found


DECLARATION_ROWS = 200  # chunks a name's keyword search reads for a declaration in their text


def declaration_rows(table, name: str, where: str | None) -> list[dict]:
    """The chunks BM25 finds for ``name``, with their text (``ranking.declaration_rank`` reads it)."""
    return bm25_arm(table, name, where, DECLARATION_ROWS, required=False, columns=("symbol", "kind", "text"),
                    quiet=True)
