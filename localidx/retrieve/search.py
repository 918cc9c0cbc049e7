"""Search: one query -> ranked chunk matches, from a BM25 arm and a vector arm fused in Python.

Place in the flow: retrieve (after store; before rerank / expand / merge / serve). Read-only.

Invariants:
- One search reads one pinned table version (``ChunkStore.snapshot()``): both arms see the same rows. An unfiltered
  search reads the arms from that version's in-memory copy (``localidx.store.hot``: the same rows and scores, in
  milliseconds) when one is loaded, else from LanceDB; decided once per search, for every arm of it.
- Both arms are keyed by the chunk ``id`` and fused over the union of their lists (``localidx.retrieve.fusion``), so
  a chunk found by only one arm still ranks; a row still waiting for its vector is found by BM25 alone.
- Filters (language, kind, path glob) are prefilters on both arms, built with ``sql_str`` — never pasted raw.
- The BM25 query is plain words: user text is reduced to word tokens (nothing the FTS parser could read as syntax)
  plus the split words of its identifiers, the same way ``bm25_text`` was built (``verifyToken`` -> verify token).
- An FTS failure never escapes as a traceback: hybrid search falls back to the vector arm, BM25-only search raises
  ``UsageError`` with one line.
- ``stale`` compares the row's ``file_hash`` (git blob id) with the file on disk now: the catalog's stat is the fast
  path, the file is hashed only when its stat differs; a missing file is stale.
- Each arm fetches the same ``CANDIDATES`` rows whatever ``k`` is, so a chunk's rank does not depend on ``-k``.

How a query is read (``plan_query``): a question is searched as it is. A pasted bug report, traceback or log
(``evidence.is_long``) is read for its evidence first (``localidx.retrieve.evidence``): BM25 reads the report without
its boilerplate (environment dumps, an issue template's comments and headings), plus a smaller arm of the names it
writes as code, its error lines and its frames' functions, and one of its title alone (the title names the area); the vector arm embeds the title, the error lines and the start of the prose (the model reads 256 word
pieces, and a report's head is often an environment dump); stack frames that name indexed files add their chunks,
the innermost frame most, the chunk around the frame's line or function most of all.

Then a report's chunk of a test, a doc, an example, a built copy of the code or a config file
(``transforms.path_role``) counts ``REPORT_ROLE_FACTOR`` of its score unless the report's title asks for that kind of
file (a report wants the code to fix, and its words recur in all of those, most in the tests that reproduce it); a
chunk is also supported by the two best other chunks of its file (each counted up to its own score), so a file that
answers in several places ranks above a single lucky chunk; then a file's n-th best chunk counts
``FILE_DEPTH_DECAY`` ** (n - 1), so that one large file does not fill the first matches.

A question is ranked by ``localidx.retrieve.ranking``'s rules (roles, a phrase written in a chunk, the definitions
of the names it writes as code, file coherence, the files its words name, one match a file first); the paths'
words come from ``_path_index`` (one per pinned table version), the mentioned names' definitions from the name
lookup. A name query's definitions then come first, found by their symbols and by the declarations in their text.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields

from localidx.embed.names import STATIC_MODEL, TRANSFORMER_MODEL
from localidx.errors import IndexNotReady, UsageError
import localidx.retrieve.fusion as _fusion
import localidx.retrieve.ranking as ranking
from localidx.retrieve.docheads import credit_definitions
from localidx.retrieve.filters import Staleness, filter_clause, rank_files
from localidx.retrieve.guard import found as counts_as_found, limit_query, require_words
from localidx.retrieve.arms import COLUMNS, bm25_arm, decide, definition_arm, materialise, vector_arm
from localidx.retrieve.ranking import (PathIndex, definitions_first, mentioned_names, named_files, path_evidence,
                                       question_words, rank_question, role_factor)
from localidx.retrieve.transforms import NameQuery, name_query, path_role
from localidx.text.safe import valid_text

log = logging.getLogger(__name__)

MODES = ("hybrid", "vector", "bm25")
FUSIONS = ("linear", "rrf")

# Chosen by `HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/eval/run_eval.py` (80 questions: click.jsonl 50 +
# watchdog.jsonl 30; all-MiniLM-L6-v2 int8; full [META] enrich at META_VERSION 1; file-level, micro-averaged).
# Recall@1 / Recall@5 / MRR:
#   bm25 .750/.963/.837   vector .713/.975/.827   rrf .812/1.0/.897
#   linear w=0.1 .750/.975/.843   w=0.3 .775/.988/.864   w=0.4 .812/1.0/.893   w=0.5 .825/1.0/.901
#          w=0.6 .800/1.0/.891    w=0.7 .800/1.0/.887    w=0.9 .788/.988/.868
# linear 0.5 has the best Recall@1 and MRR overall, as in every earlier run while enrich.py was being replaced (the
# placeholder [META] included). rrf is one query behind at Recall@1 (best on watchdog alone); BM25 alone loses 6
# queries at Recall@1 and vector alone 9.
DEFAULT_FUSION = "linear"
DEFAULT_VECTOR_WEIGHT = 0.5
REPORT_VECTOR_WEIGHT = 0.3  # a pasted report: its evidence is mostly words BM25 matches exactly (bug-report eval)
# Per model, where a report's vectors are not worth their weight: on the 120 written bug reports static vectors took
# hybrid below BM25 alone (R@1 .517 against .583), so with the static model a report is answered by BM25 and the
# report rules, and the vector arm is not run for it.
REPORT_VECTOR_WEIGHTS = {STATIC_MODEL: 0.0}

MAX_K = 100
CANDIDATES = 200  # per arm, whatever k: enough that fusion can promote a chunk ranked low by one arm

# Chosen with the bug-report eval (benchmarks/eval/bugreports/run.py; docs/retrieval.md "Real questions" has the table).
EVIDENCE_SHARE = 0.2  # of the BM25 weight, given to a report's code names, error lines and frame functions
FRAME_WEIGHT = 0.3  # a frame's chunks: added to the fused score (the innermost frame's file in full)
FRAME_DECAY = 0.6  # each further file named by the frames counts this much of the one before
FRAME_MISS = 0.3  # a chunk of a frame's file that holds neither the frame's line nor its function
FILE_SUPPORT = 0.5  # weight of the two best other chunks of a chunk's file (each capped at the chunk's own score)
# Chosen on the tuning half of the real-issue eval (benchmarks/eval/realissues/run.py).
REPORT_ROLE_FACTOR = 0.1  # a report's tests, docs, examples, built and config files: its words recur in the tests
TITLE_SHARE = 0.3  # of the BM25 weight, given to a report's title read alone (the title names the area)
FILE_DEPTH_DECAY = 0.7  # a report's n-th best chunk of one file counts this to the power n-1 (more files in the top)
MAX_DEFINITIONS = 20  # a name query's definitions put first; a name defined more often ranks the rest as found



@dataclass
class Match:
    """One chunk found by a search. Scores: ``score`` is the fused score; the arm scores are normalised to [0, 1]
    within their arm's list, or None when that arm did not return the chunk."""

    id: str
    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    title: str
    score: float
    vector_score: float | None
    bm25_score: float | None
    stale: bool
    text: str
    signature: str = ""
    parent: str = ""
    tags: dict = field(default_factory=dict)
    symbols: list[str] = field(default_factory=list)  # the symbols of a merged chunk of tiny siblings
    span_hash: str = ""
    content_hash: str = ""
    parent_id: str = ""
    chunk_index: int = 0
    token_count: int = 0
    definition: bool = False  # defines the name the query consists of (``Response``, ``class Response``)
    # How well the chunk answers, comparable across queries (``score`` is scaled so the best match is 1.0):
    # ``similarity`` is the raw cosine similarity of the query and the chunk (None when the vector arm did not
    # return it); ``relevant`` is True for a keyword (BM25) or stack-frame hit, a name's definition, or a similarity
    # of at least the model's floor (``SIMILARITY_FLOORS``). A search whose matches are all irrelevant found nothing.
    similarity: float | None = None
    relevant: bool = True

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field (a copy: ``dataclasses.asdict`` deep-copied every value, 3 ms of a warm
        query's 20)."""
        out = {name: getattr(self, name) for name in _MATCH_FIELDS}
        out["tags"] = copy.deepcopy(self.tags) if self.tags else {}
        out["symbols"] = list(self.symbols)
        return out


_MATCH_FIELDS = tuple(f.name for f in fields(Match))


def search(index, query: str, k: int = 10, mode: str = "hybrid", language: str | None = None,
           path_glob: str | None = None, kind: str | None = None, fusion: str | None = None,
           vector_weight: float | None = None, table=None, fetch: int | None = None) -> list[Match]:
    """The ``k`` best chunks for ``query`` (k clamped to 1..100), best first.

    ``mode``: ``hybrid`` (both arms fused), ``vector`` or ``bm25``. ``fusion``: ``linear`` (``vector_weight`` *
    vector + (1 - weight) * BM25) or ``rrf``; None picks ``DEFAULT_FUSION`` / ``DEFAULT_VECTOR_WEIGHT``.
    ``language`` and ``kind`` match exactly; ``path_glob`` is a glob over the repository-relative path (without a
    ``/`` it matches a file or directory name anywhere). Raises ``UsageError`` for bad arguments (an empty query, or
    one with no letters or digits to search for), ``IndexNotReady`` when nothing is indexed and ``IndexSwitched``
    when a rebuild dropped the generation ``index`` was opened at. ``table``: a
    snapshot already pinned by the caller (the context pipeline reads one version for all its queries); None pins
    one here. ``fetch``: candidates per arm (default ``CANDIDATES``); fusion normalises each arm over what it
    fetched, so this changes scores too.
    """
    from localidx.store.index import pinned

    table = table if table is not None else pinned(index)
    if table is None:
        raise IndexNotReady("this work tree is not indexed yet: run `localidx index` first")
    found = search_sources([("", index, table)], query, k=k, mode=mode, language=language, path_glob=path_glob,
                           kind=kind, fusion=fusion, vector_weight=vector_weight, fetch=fetch)
    return [match for _label, match in found]


def search_sources(sources, query: str, k: int = 10, mode: str = "hybrid", language: str | None = None,
                   path_glob: str | None = None, kind: str | None = None, fusion: str | None = None,
                   vector_weight: float | None = None, fetch: int | None = None) -> list[tuple[str, Match]]:
    """``search`` over several indexes at once (``--all-repos``): ``sources`` are ``(label, index, pinned table)``;
    the answer is the ``k`` best ``(label, Match)`` over all of them.

    Scores are comparable across the sources because everything is computed once over the union of every source's
    candidates (each fetched ``fetch`` per arm per source): each arm is normalised over the union before the arms
    are fused, and the final scores are scaled so that the best match of all is 1.0. A repository's best hit is not
    the best there is merely for being its repository's best, so a one-function repository cannot outrank the right
    answer elsewhere. With one source this is exactly ``search``.
    """
    sources = list(sources)  # read by two threads (see the arms below)
    with decide(table for _label, _index, table in sources) as copies:
        return _search_sources(sources, copies, query, k=k, mode=mode, language=language, path_glob=path_glob,
                               kind=kind, fusion=fusion, vector_weight=vector_weight, fetch=fetch)


def _search_sources(sources, copies: dict, query: str, k: int, mode: str, language: str | None, path_glob: str | None,
                    kind: str | None, fusion: str | None, vector_weight: float | None,
                    fetch: int | None) -> list[tuple[str, Match]]:
    if not isinstance(query, str) or not query.strip():
        raise UsageError("empty query")
    # Text that is not valid Unicode (bytes of a pasted name, a lone surrogate from JSON) would stop the tokenizer;
    # the length limit is every path's (search_response reports the cut, a direct call applies it silently).
    query = limit_query(query)[0]
    require_words(query)
    language, path_glob = (valid_text(v) if v else v for v in (language, path_glob))
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r} (choose from {', '.join(MODES)})")
    fusion = fusion or DEFAULT_FUSION
    if fusion not in FUSIONS:
        raise UsageError(f"unknown fusion {fusion!r} (choose from {', '.join(FUSIONS)})")
    plan = plan_query(query)
    if vector_weight is None:
        weight = report_vector_weight(sources) if plan.report else DEFAULT_VECTOR_WEIGHT
    else:
        weight = float(vector_weight)
    if not 0.0 <= weight <= 1.0:
        raise UsageError(f"vector weight must be between 0 and 1, got {weight}")
    k = max(1, min(max(MAX_K, FILES_FROM), int(k)))  # a files view ranks from more matches than a user may ask for
    # Each arm reads enough for the k a user may ask for, but not more for a files view's deeper k: fusion
    # normalises each arm over what it fetched, so a files view's first matches are the plain search's; its files
    # are ranked from the union.
    shown = min(k, MAX_K)
    fetch = max(shown, int(fetch)) if fetch else max(CANDIDATES, shown)
    where = filter_clause(language=language, kind=kind, path_glob=path_glob)

    from localidx.store.index import reading  # LanceDB failing on its own files: IndexDamaged, with the remedy

    # Keys are (label, chunk id): the same chunk id in two repositories is two results.
    rows: dict[tuple, dict] = {}
    indexes: dict[str, object] = {}
    arms = _report_arms(plan)
    bm25_raws: list[dict[tuple, float]] = [{} for _arm in arms]
    vector_raw: dict[tuple, float] = {}
    # The vector arms (query embedding, then the ANN search of each source) run on another thread while this one
    # runs the BM25 arms: ONNX Runtime and LanceDB release the GIL. Their rows are merged below in the order the
    # arms always had (a source's BM25 rows first), so the ranking is the same as one arm after the other.
    # Each source is read from its in-memory copy or from LanceDB, decided once for the whole search (``decide``).
    vector_wanted = mode == "vector" or mode == "hybrid" and (weight > 0.0 or fusion == "rrf")
    vector_rows = None
    if vector_wanted and not where and all(found is not None and found.with_vectors for found in copies.values()):
        vector_rows = _Done(_vector_arms(sources, plan.vector_text, where, fetch))  # a millisecond: no thread
    elif vector_wanted:
        vector_rows = _arm_pool().submit(contextvars.copy_context().run, _vector_arms, sources, plan.vector_text,
                                         where, fetch)
    try:
        for label, index, table in sources:
            indexes[label] = index
            if mode in ("hybrid", "bm25"):
                for n, (text, _share) in enumerate(arms):
                    required = mode == "bm25" and n == 0
                    for row in reading(index, lambda: bm25_arm(table, text, where, fetch, required=required)):
                        key = (label, row["id"])
                        if key not in bm25_raws[n]:
                            bm25_raws[n][key] = float(row["_score"])
                            rows.setdefault(key, row)
    except BaseException:
        if vector_rows is not None:
            vector_rows.exception()  # let it finish reading the pinned table; BM25's error is the one reported
        raise
    found = vector_rows.result() if vector_rows is not None else []
    for label, arm_rows in found:
        for row in arm_rows:
            key = (label, row["id"])
            if key not in vector_raw:
                # Cosine distance is in [0, 2]; similarity keeps "higher is better" like the BM25 score.
                vector_raw[key] = 1.0 - float(row["_distance"])
                rows.setdefault(key, row)

    bm25: dict[tuple, float] = {}
    if mode in ("hybrid", "bm25"):
        for raw, (_text, share) in zip(bm25_raws, arms):
            for key, value in _fusion.normalize(raw).items():
                bm25[key] = bm25.get(key, 0.0) + share * value
    vector = _fusion.normalize(vector_raw)
    if mode == "bm25":
        scores = dict(bm25)
    elif mode == "vector":
        scores = dict(vector)
    elif fusion == "rrf":
        # Ranks over the union, by raw score (a stable sort keeps each arm's own order among equal scores).
        scores = _fusion.rrf(sorted(vector_raw, key=lambda key: -vector_raw[key]),
                             sorted(bm25_raws[0], key=lambda key: -bm25_raws[0][key]))
    else:
        scores = _fusion.linear(vector, bm25, weight)
    if plan.frames and mode != "vector":
        for label, index, table in sources:
            frames = reading(index, lambda: _frame_arm(index, table, plan.frames, where))
            for chunk_id, (value, row) in frames.items():
                key = (label, chunk_id)
                rows.setdefault(key, row)
                scores[key] = scores.get(key, 0.0) + FRAME_WEIGHT * value
    evidence: dict[tuple, float] = {}
    if not plan.report and mode != "vector":
        words = question_words(query)
        for label, index, table in sources:
            named = path_evidence(words, reading(index, lambda: _path_index(index, table))) if words else {}
            evidence.update(((label, path), share) for path, share in named.items())
    for key in scores:
        if plan.report:
            role = path_role(rows[key]["path"], rows[key]["language"] or "")
            if role and role not in plan.wanted_roles:
                scores[key] *= REPORT_ROLE_FACTOR
        else:
            scores[key] *= role_factor(rows[key], plan.wanted_roles)
    if not plan.report:  # a long doc comment's chunks rank as the definition they document
        for label, index, table in sources:
            reading(index, lambda: credit_definitions(table, label, scores, rows, COLUMNS))
    names = None if plan.report else name_query(query)
    if plan.report:
        scores = _with_file_depth(_with_file_support(scores, rows), rows)
    elif mode != "vector":
        mentioned: list[list[tuple]] = []
        written = [] if names is not None else mentioned_names(query)
        named = {(label, path) for label, index, table in sources for path in named_files(
            query, written, index.paths.root.name, reading(index, lambda: _path_index(index, table)))}
        for parts in written:
            defined = []
            for label, index, table in sources:
                arm = lambda: definition_arm(table, NameQuery((parts,)), where, text_if_parsed=False)  # noqa: E731
                for rank, row in reading(index, arm):
                    key = (label, row["id"])
                    if key not in rows:
                        rows[key] = row
                        scores[key] = 0.0  # the definition of a name the question uses is a candidate
                    defined.append((rank, key))
            mentioned.append(defined)
        phrases: dict[tuple, float] = {}
        if ranking.PHRASE_WEIGHT and len(query.split()) >= 3:
            head = sorted(scores, key=lambda key: -scores[key])[:ranking.PHRASE_DEPTH]
            for label, index, table in sources:
                reading(index, lambda: materialise(table, [rows[key] for key in head if key[0] == label],
                                                          rows, label))
            phrases = {key: share for key in head if "text" in rows[key]
                       and (share := ranking.phrase_share(query, rows[key]["text"]))}
        scores = rank_question(scores, rows, evidence, plan.wanted_roles, mentioned, phrases, frozenset(named))
    definitions: set[tuple] = set()
    if names is not None:
        defined: list[tuple] = []
        for label, index, table in sources:
            for rank, row in reading(index, lambda: definition_arm(table, names, where)):
                key = (label, row["id"])
                rows.setdefault(key, row)
                defined.append((rank, key))
        scores, definitions = definitions_first(scores, defined, MAX_DEFINITIONS)
    top = max(scores.values(), default=0.0)
    if top > 0.0:  # frames, file support and the role factor move scores: the best match is 1.0 again
        scores = {key: value / top for key, value in scores.items()}

    best = sorted(scores, key=lambda key: (-scores[key], key[0], rows[key]["path"], rows[key]["start_line"], key))[:k]
    tables = {label: (index, table) for label, index, table in sources}
    for label in dict.fromkeys(key[0] for key in best):
        index, table = tables[label]
        reading(index, lambda: materialise(table, [rows[key] for key in best if key[0] == label], rows, label))
    best = [key for key in best if "file_hash" in rows[key]]  # a row gone from the pinned version cannot be: kept safe
    staleness = {label: Staleness(index) for label, index in indexes.items()}
    # A hybrid search whose words the index holds is a real question: what its vector arm ranks among the words'
    # matches answers it too (a file about "conversion failures" need not use those words). The floor is for the
    # query none of whose words is indexed (nonsense, a typo), where the vector arm alone would answer anything.
    words_found = mode == "hybrid" and bool(bm25)
    found = []
    for key in best:
        match = match_from_row(rows[key], scores[key], vector.get(key), bm25.get(key), staleness[key[0]],
                               definition=key in definitions)
        _rate(match, vector_raw.get(key),
              key in bm25 or key in definitions or (key not in vector_raw and mode != "vector"),
              float("-inf") if words_found else similarity_floor(indexes[key[0]]))
        found.append((key[0], match))
    return found


# The cosine similarity a chunk only the vector arm returned needs to count as a match, per model. Measured on this
# repository's own index with 25 real questions and 10 gibberish queries (xyzzyplugh, qwzxv blorf, ...): the static
# model gives gibberish a best similarity up to 0.74 (its subword vectors land near hashes and identifiers), as
# high as real questions (0.47-0.84), so with it a match needs a keyword hit or a similarity above every gibberish
# one. The transformer's floor is a first estimate, not yet measured the same way. A model not listed (the test
# model among them) has no floor.
SIMILARITY_FLOORS = {STATIC_MODEL: 0.78, TRANSFORMER_MODEL: 0.35}


def report_vector_weight(sources) -> float:
    """The vector weight for a pasted report: ``REPORT_VECTOR_WEIGHT`` unless every source's model has its own."""
    weights = {REPORT_VECTOR_WEIGHTS.get(getattr(getattr(index, "settings", None), "embed_model", ""),
                                         REPORT_VECTOR_WEIGHT) for _label, index, _table in sources}
    return weights.pop() if len(weights) == 1 else REPORT_VECTOR_WEIGHT


def similarity_floor(index) -> float:
    """The floor for ``index``'s model (its ``embed_model`` setting); none for a model not measured."""
    settings = getattr(index, "settings", None)
    return SIMILARITY_FLOORS.get(getattr(settings, "embed_model", ""), float("-inf"))


def _rate(match: Match, similarity: float | None, keyword_hit: bool, floor: float) -> None:
    """Set ``match``'s ``similarity`` and ``relevant`` (see ``Match``): a keyword hit, a frame's chunk or a name's
    definition is relevant, a chunk only the vector arm returned at ``floor`` or above."""
    match.similarity = None if similarity is None else round(similarity, 4)
    match.relevant = keyword_hit or (similarity is not None and similarity >= floor)


def search_response(index, query, files: bool = False, **options) -> dict:
    """What ``search/query`` answers and ``localidx search --json`` prints, in-process or through the daemon alike:
    ``{"matches": [Match.to_dict(), ...], "warnings": [...]}``; a query over ``MAX_QUERY_CHARS`` is cut, and said so
    in ``warnings``. ``options`` are ``search``'s. ``files``: also ``"files"``, the ``k`` best files ranked from the
    best ``FILES_FROM`` matches (``rank_files``), for "which file do I open"."""
    if not isinstance(query, str):
        raise UsageError("the query must be text")
    query, warnings = limit_query(query)
    k, depth = response_depth(options, files)
    return shape_response([m.to_dict() for m in search(index, query, k=depth, **options)], k, files, warnings)


def response_depth(options: dict, files: bool) -> tuple[int, int]:
    """``k`` as asked (taken out of ``options``, clamped), and how many matches to search for: ``FILES_FROM`` when
    a files view is wanted."""
    k = max(1, min(MAX_K, int(options.pop("k", 10))))
    return k, max(k, FILES_FROM) if files else k


def shape_response(found: list[dict], k: int, files: bool, warnings: list[str]) -> dict:
    """The response of ``found`` (best first): the ``k`` best of the relevant matches (``Match.relevant``), an
    irrelevant one dropped without moving the others."""
    found = [m for m in found if counts_as_found(m)]  # the one rule, shared with context and MCP
    response = {"matches": found[:k], "warnings": warnings}
    if files:
        response["files"] = rank_files(found, k)
    return response


@dataclass(frozen=True)
class QueryPlan:
    """How a search reads its query (see the module docstring)."""

    words: str  # what the main BM25 arm searches
    evidence: str  # a report's code names, error lines and frame functions ("" for a question)
    vector_text: str  # what the vector arm embeds
    frames: tuple  # a report's stack frames (``evidence.Frame``), innermost first
    report: bool  # read as a pasted report rather than a question
    wanted_roles: frozenset  # path roles the query asks for (not ranked lower)
    title: str = ""  # a report's title (its first line), searched apart from the body


def plan_query(query: str) -> QueryPlan:
    """The query as search reads it: as it is for a question, through its evidence for a report."""
    from localidx.retrieve.evidence import is_long, read_report

    wanted = wanted_roles(query)
    if not is_long(query):
        return QueryPlan(words=query, evidence="", vector_text=query, frames=(), report=False, wanted_roles=wanted)
    evidence = read_report(query)
    title = _title(query)
    functions = [f.function for f in evidence.frames if f.function]
    names = [name for name, _count in evidence.identifiers.most_common(40)]
    evidence_text = " ".join([*names, *functions, *evidence.errors[:5]])
    prose = " ".join(evidence.text.split())
    vector_text = "\n".join([title, *evidence.errors[:3], prose[:1500]])
    return QueryPlan(words=evidence.text, evidence=evidence_text, vector_text=vector_text,
                     frames=tuple(evidence.frames), report=True, wanted_roles=wanted, title=title)


def _report_arms(plan: QueryPlan) -> list[tuple[str, float]]:
    """The BM25 arms of a query as (text, share of the BM25 weight): the words; for a report also its evidence
    (``EVIDENCE_SHARE``) and its title alone (``TITLE_SHARE``), both taken from the words' share."""
    extra = []
    if plan.evidence:
        extra.append((plan.evidence, EVIDENCE_SHARE))
    if plan.report and TITLE_SHARE and plan.title:
        extra.append((plan.title, TITLE_SHARE))
    return [(plan.words, 1.0 - sum(share for _text, share in extra)), *extra]


def wanted_roles(query: str) -> frozenset:
    """The path roles (``transforms.path_role``) a query asks for, so that they are not ranked lower: ``test`` for
    a question about tests, ``doc``/``example``/``generated`` for one about docs. A report mentions tests and docs
    in passing ("my test fails"): only its title says what it is about. The context pipeline's rerank reads the
    same answer."""
    from localidx.retrieve.evidence import is_long
    from localidx.retrieve.transforms import analyze

    analysis = analyze(_title(query) if is_long(query) else query)
    wanted = {"test"} if analysis.about_tests else set()
    if analysis.about_docs:
        wanted |= {"doc", "example", "generated"}
    if analysis.about_config:
        wanted.add("config")
    return frozenset(wanted)


def _title(report: str) -> str:
    return next((line.strip() for line in report.splitlines() if line.strip()), "")


def _with_file_support(scores: dict[tuple, float], rows: dict[tuple, dict]) -> dict[tuple, float]:
    """Each chunk's score plus ``FILE_SUPPORT`` times the two best other scores of its file, each capped at the
    chunk's own: the best chunk of a file answering in several places carries them, the file's order is kept.
    Keys are (source label, chunk id): a file is a path in one source."""
    by_file: dict[tuple, list[float]] = {}
    for key, value in scores.items():
        by_file.setdefault((key[0], rows[key]["path"]), []).append(value)
    for values in by_file.values():
        values.sort(reverse=True)
    out = {}
    for key, value in scores.items():
        others = by_file[(key[0], rows[key]["path"])]
        support, taken, skipped_self = 0.0, 0, False
        for other in others:
            if not skipped_self and other == value:
                skipped_self = True
                continue
            support += min(other, value)
            taken += 1
            if taken == 2:
                break
        out[key] = value + FILE_SUPPORT * support
    return out


def _with_file_depth(scores: dict[tuple, float], rows: dict[tuple, dict]) -> dict[tuple, float]:
    """A report's chunks, the n-th best of its file counted ``FILE_DEPTH_DECAY`` ** (n - 1): one large file that
    matches everywhere leaves room for the other files in the first matches, and its best chunk keeps its place."""
    if FILE_DEPTH_DECAY >= 1.0:
        return scores
    seen: dict[tuple, int] = {}
    out = {}
    for key in sorted(scores, key=lambda key: -scores[key]):
        file = (key[0], rows[key]["path"])
        n = seen.get(file, 0)
        seen[file] = n + 1
        out[key] = scores[key] * FILE_DEPTH_DECAY ** n
    return out


# -- the arms -------------------------------------------------------------------------------------------------


class _Done:
    """A finished arm, read like the pool's future."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def exception(self):
        return None


_PATH_INDEXES: dict[tuple, PathIndex] = {}  # (index root, table name, table version) -> its files' path words


def _path_index(index, table) -> PathIndex:
    """The path words of the files ``index`` holds, built once per table version."""
    from localidx.store import hot

    # a pinned snapshot's identity is known without asking LanceDB (``table.version`` is a call into it)
    key = (str(index.paths.root), getattr(index.store, "table_name", ""), hot.table_key(table) or table.version)
    found = _PATH_INDEXES.get(key)
    if found is None:
        found = PathIndex(index.catalog.paths())
        if len(_PATH_INDEXES) >= 8:
            _PATH_INDEXES.pop(next(iter(_PATH_INDEXES)))
        _PATH_INDEXES[key] = found
    return found


def _frame_arm(index, table, frames, where: str | None) -> dict[str, tuple[float, dict]]:
    """Chunks of the indexed files a report's stack frames name: id -> (evidence in (0, 1], row). The innermost
    frame's file counts 1, each further file ``FRAME_DECAY`` of the one before; in a file, a chunk holding a frame's
    line or defining its function counts in full, the others ``FRAME_MISS``; several frames add up."""
    from localidx.retrieve.evidence import resolve_frames
    from localidx.store.lance import sql_in

    resolved = resolve_frames(list(frames), index.catalog.paths())
    if not resolved:
        return {}
    files = list(dict.fromkeys(path for path, _frame, _tail in resolved))
    clause = sql_in("path", files) + (f" AND ({where})" if where else "")
    by_path: dict[str, list[dict]] = {}
    for row in table.search().where(clause).select(COLUMNS).limit(None).to_list():
        by_path.setdefault(row["path"], []).append(row)
    found: dict[str, tuple[float, dict]] = {}
    for path, frame, _tail in resolved:
        weight = FRAME_DECAY ** files.index(path)
        for row in by_path.get(path, []):
            # A merged chunk of tiny symbols defines each of its symbols (its symbol is their names joined).
            names = {(s or "").replace("::", ".").split(".")[-1] for s in (row.get("symbols") or [row["symbol"]])}
            hit = (frame.line and row["start_line"] <= frame.line <= row["end_line"]) or (
                frame.function and frame.function in names)
            value = weight * (1.0 if hit else FRAME_MISS)
            found[row["id"]] = (found[row["id"]][0] + value if row["id"] in found else value, row)
    return found


_ARM_THREADS = 4  # as many as the daemon's request threads: each search has one vector job at a time
_arm_lock = threading.Lock()
_arm_executor: ThreadPoolExecutor | None = None


def _arm_pool() -> ThreadPoolExecutor:
    global _arm_executor
    with _arm_lock:
        if _arm_executor is None:
            _arm_executor = ThreadPoolExecutor(max_workers=_ARM_THREADS, thread_name_prefix="localidx-vector-arm")
        return _arm_executor


def _vector_arms(sources, text: str, where: str | None, fetch: int) -> list[tuple[str, list[dict]]]:
    """Every source's vector-arm rows, ``[(label, rows)]`` in source order; the query is embedded once per embedder
    the sources share."""
    from localidx.store.index import reading

    query_vectors: dict[int, object] = {}
    out = []
    for label, index, table in sources:
        embedder = index.embedder
        if id(embedder) not in query_vectors:
            query_vectors[id(embedder)] = embedder.embed_query(text)
        vector = query_vectors[id(embedder)]
        out.append((label, reading(index, lambda: vector_arm(table, vector, where, fetch))))
    return out



# -- results --------------------------------------------------------------------------------------------------


def match_from_row(row: dict, score: float, vector_score: float | None, bm25_score: float | None,
           staleness: Staleness, definition: bool = False) -> Match:
    from localidx.store.lance import decode_tags

    return Match(
        id=row["id"], path=row["path"], start_line=row["start_line"], end_line=row["end_line"],
        symbol=row["symbol"] or "", kind=row["kind"] or "", language=row["language"] or "", title=row["title"] or "",
        score=float(score), vector_score=vector_score, bm25_score=bm25_score,
        stale=staleness.is_stale(row["path"], row["file_hash"] or ""), text=row["text"] or "",
        signature=row["signature"] or "", parent=row["parent"] or "", tags=decode_tags(row["tags"] or ""),
        symbols=list(row.get("symbols") or []), span_hash=row.get("span_hash") or "",
        content_hash=row.get("content_hash") or "", parent_id=row.get("parent_id") or "",
        chunk_index=int(row.get("chunk_index") or 0), token_count=int(row.get("token_count") or 0),
        definition=definition,
    )


# -- the files view -------------------------------------------------------------------------------------------------

FILES_FROM = 400  # chunks a files view is ranked from (100 let one large file hide the rest: bug-report eval)
