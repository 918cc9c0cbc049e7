"""Explain: the optional index-time stage that gives every code chunk a short LLM explanation (the design's
``explain_md``), added to what BM25 and the embedder read. The ``summarize`` setting turns it on (the setting keeps
its name: it is configuration users write); "summary" in the code means the chunk kind only.

Place in the flow: chunk -> enrich ([META]) -> **explain** -> embed -> store. ``indexer.sync_work_tree`` opens an
``Explainer`` only when ``summarize`` is on (and fails at once, one ``ConfigError`` line, when no ``llm_base_url``
is set), then:

1. Write time (``annotate``, on every batch before it is written): a code row (``CODE_KINDS``) whose explanation is
   cached gets an ``[META] Explain: ...`` line at the end of its header, so its search text, BM25 text and
   embedding key include it; a code row without one is queued for this chunk table.
2. The stage (``run``, after the rows are written, before the missing vectors are filled): asks the LLM for the
   queued chunks, highest priority first, one call per distinct content; stores each answer in the cache the
   moment it arrives; rewrites the explained rows' search_text, bm25_text and embed_key with a null vector, so the
   indexer's vector fill embeds them again (through the vector cache, as always).

Where things live: ``<state>/explanations.sqlite`` beside the LanceDB database, shared by the work trees of a
repository like the vector cache. ``explanations`` maps (LLM model, hash of the [explain] prompt, chunk content hash)
to the text; ``pending`` is the per-chunk-table queue of rows still waiting.

Invariants:
- Off by default; with summarize off nothing here runs, the LLM is never contacted, and the chunk table and its rows
  are exactly those of an index without this module.
- With it on, the chunk table's name carries ``table_variant`` (model + prompt hash): turning summarize on or off,
  or changing the model or the prompt, rebuilds the table cleanly instead of mixing rows with and without (or with
  other) explanations. The explanations stay cached, so turning it back on asks the LLM for nothing new.
- Resumable: a run stopped or killed at any point loses at most the explanation in flight; queued rows whose
  explanation is cached are rewritten by the next run without asking again.
- The LLM failing never fails the index run: an unreachable endpoint (or three failures in a row) stops the stage
  with a warning in the run's record, and indexing completes with BM25 and vectors; a chunk that fails three
  times is left unexplained.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import time
from pathlib import Path

from localidx.config import Settings
from localidx.errors import ConfigError

log = logging.getLogger(__name__)

EXPLAIN_PREFIX = "[META] Explain: "
_META = "[META] "
PAGE_ROWS = 32  # queued rows per LanceDB commit: a stopped stage loses no explanation, at most a page of rewrites
MAX_ATTEMPTS = 3  # a chunk the LLM failed on this many times is left unexplained
MAX_FAILURES_IN_A_ROW = 3  # then the endpoint is taken to be broken and the stage stops
_COLUMNS = ["id", "kind", "path", "language", "symbol", "text", "search_text", "bm25_text", "content_hash"]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS explanations (
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, prompt, content_hash)
);
CREATE TABLE IF NOT EXISTS pending (
    chunk_table TEXT NOT NULL,
    id TEXT NOT NULL,
    priority INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chunk_table, id)
);
"""


def cache_path(paths) -> Path:
    """The explanation cache of an index (``IndexPaths``): in the shared state dir, beside the LanceDB database."""
    return paths.state / "explanations.sqlite"


def prompt_key() -> str:
    """A hash of the [explain] prompt: part of every cache key, so a new prompt gets new explanations."""
    from localidx.llm import prompts

    material = json.dumps(prompts()["explain"], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def table_variant(settings: Settings) -> str:
    """The chunk table's name suffix for these settings: "" with summarize off (the table of an index without it)."""
    if not settings.summarize:
        return ""
    from localidx.llm import model_label

    return "x" + hashlib.sha256(f"{model_label(settings)}\0{prompt_key()}".encode()).hexdigest()[:10]


def with_explanation(search_text: str, explanation: str) -> str:
    """``search_text`` with an ``[META] Explain:`` line after its other [META] lines (the explanation redacted: a
    model may echo what it read, or make up something shaped like a key)."""
    from localidx.safety.redact import redact

    explanation = redact(explanation)[0]
    lines = search_text.split("\n")
    end = 0
    while end < len(lines) and lines[end].startswith(_META):
        end += 1
    line = EXPLAIN_PREFIX + " ".join(explanation.split())
    return "\n".join(lines[:end] + [line] + lines[end:])


def has_explanation(search_text: str) -> bool:
    for line in search_text.split("\n"):
        if not line.startswith(_META):
            return False
        if line.startswith(EXPLAIN_PREFIX):
            return True
    return False


class ExplainCache:
    """The SQLite file of explanations and of the rows waiting for one (shared by work trees; WAL, so two
    indexers of different work trees can use it at once)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def get(self, model: str, prompt: str, hashes: list[str]) -> dict[str, str]:
        """content hash -> explanation, for the hashes that have one."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            query = ("SELECT content_hash, text FROM explanations"
                     f" WHERE model = ? AND prompt = ? AND content_hash IN ({marks})")
            found.update(self._db.execute(query, (model, prompt, *part)).fetchall())
        return found

    def put(self, model: str, prompt: str, content_hash: str, text: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO explanations VALUES (?, ?, ?, ?, ?)",
                         (model, prompt, content_hash, text, time.time()))

    def queue(self, table: str, rows: list[tuple[str, int]]) -> None:
        """Queue (id, priority) rows of a chunk table (a row already queued keeps its attempts)."""
        if rows:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO pending (chunk_table, id, priority) VALUES (?, ?, ?)",
                                 [(table, i, p) for i, p in rows])
            self._db.execute("COMMIT")

    def pending(self, table: str) -> list[tuple[str, int]]:
        """(id, attempts) of the queued rows, highest priority first."""
        return self._db.execute("SELECT id, attempts FROM pending WHERE chunk_table = ? ORDER BY priority DESC, id",
                                (table,)).fetchall()

    def done(self, table: str, ids: list[str]) -> None:
        if ids:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM pending WHERE chunk_table = ? AND id = ?", [(table, i) for i in ids])
            self._db.execute("COMMIT")

    def failed(self, table: str, chunk_id: str) -> None:
        self._db.execute("UPDATE pending SET attempts = attempts + 1 WHERE chunk_table = ? AND id = ?",
                         (table, chunk_id))

    def forget_tables(self, keep: str, suffix: str) -> None:
        """Drop the queues of a work tree's other chunk tables (ending in ``suffix``): those tables are gone."""
        mine = re.compile(rf"{re.escape(suffix)}(_g\d+)?$")  # any generation of the work tree's index
        tables = [t for (t,) in self._db.execute("SELECT DISTINCT chunk_table FROM pending") if mine.search(t)]
        for table in tables:
            if table != keep:
                self._db.execute("DELETE FROM pending WHERE chunk_table = ?", (table,))


def open_explainer(index, settings: Settings) -> "Explainer | None":
    """The explain stage for an opened index; None when summarize is off. Raises ``ConfigError`` when it is on
    without an LLM endpoint (or with a URL that is not http(s))."""
    if not settings.summarize:
        return None
    from localidx import llm

    if not llm.configured(settings):
        raise ConfigError("summarize needs llm_base_url: set [llm] base_url in your config.toml or a trusted "
                          ".localidx.toml, or LOCALIDX_LLM_BASE_URL, or turn summarize off")
    llm.completions_url(settings)
    return Explainer(index, settings)


class Explainer:
    """The explain stage of one indexing pass (see the module docstring)."""

    def __init__(self, index, settings: Settings):
        from localidx.llm import model_label

        self.settings = settings
        self.store = index.store
        self.model_id = index.embedder.model_id
        self.table = index.store.table_name
        self.model = model_label(settings)
        self.prompt = prompt_key()
        self.cache = ExplainCache(cache_path(index.paths))
        self.cache.forget_tables(keep=self.table, suffix=index.store.worktree_suffix)

    def annotate(self, rows: list[dict]) -> None:
        """Before a batch is written: explain its code rows from the cache; queue the others."""
        from localidx.records import CODE_KINDS

        code = [r for r in rows if r["kind"] in CODE_KINDS]
        known = self.cache.get(self.model, self.prompt, [r["content_hash"] for r in code])
        waiting = []
        for row in code:
            text = known.get(row["content_hash"])
            if text:
                row.update(self._rewritten(row, text))
            else:
                waiting.append((row["id"], row["priority"]))
        self.cache.queue(self.table, waiting)

    def run(self, stats, progress, should_stop=None) -> None:
        """Explain the queued rows (stats: ``chunks_explained``, ``explain_failures``, ``explain_pending``,
        ``warnings``). Never raises for an LLM failure."""
        try:
            self._run(stats, progress, should_stop)
        finally:
            stats.explain_pending = len(self.cache.pending(self.table))
            self.cache.close()

    def _run(self, stats, progress, should_stop) -> None:
        from localidx.llm import LLMError, LLMUnreachable, explain_chunk

        queued = self.cache.pending(self.table)
        todo = [i for i, attempts in queued if attempts < MAX_ATTEMPTS]
        given_up = len(queued) - len(todo)
        if given_up:
            stats.warnings.append(f"summarize: {given_up} chunks failed {MAX_ATTEMPTS} times and stay unexplained")
        if not todo:
            return
        log.info("summarize: %d chunks to explain", len(todo))
        in_a_row = 0
        done = 0
        stop = False
        rewritten_any = False
        for start in range(0, len(todo), PAGE_ROWS):
            page = todo[start : start + PAGE_ROWS]
            found = {r["id"]: r for r in self.store.rows_by_id(page, _COLUMNS)}
            known = self.cache.get(self.model, self.prompt, [r["content_hash"] for r in found.values()])
            finished = [i for i in page if i not in found]  # rows gone since they were queued
            rewrites = []
            for chunk_id in page:
                row = found.get(chunk_id)
                if row is None:
                    continue
                if has_explanation(row["search_text"]):
                    finished.append(chunk_id)
                    continue
                text = known.get(row["content_hash"])
                if text is None:
                    if should_stop is not None and should_stop():
                        stop = True
                        break
                    try:
                        text = explain_chunk(self.settings, row["path"], row["language"], row["symbol"], row["text"])
                    except LLMUnreachable as exc:
                        stats.warnings.append(f"summarize stopped: {exc}")
                        log.warning("summarize stopped: %s", exc)
                        stop = True
                        break
                    except LLMError as exc:
                        stats.explain_failures += 1
                        self.cache.failed(self.table, chunk_id)
                        in_a_row += 1
                        log.warning("summarize: %s: %s", row["path"], exc)
                        if in_a_row >= MAX_FAILURES_IN_A_ROW:
                            stats.warnings.append(f"summarize stopped after {in_a_row} failures in a row: {exc}")
                            stop = True
                            break
                        continue
                    in_a_row = 0
                    self.cache.put(self.model, self.prompt, row["content_hash"], text)
                    known[row["content_hash"]] = text
                    stats.chunks_explained += 1
                rewrites.append({"id": chunk_id, **self._rewritten(row, text)})
                finished.append(chunk_id)
                done += 1
                progress("explain", done=done, total=len(todo))
            if rewrites:
                self.store.set_texts(rewrites)
                rewritten_any = True
            self.cache.done(self.table, finished)
            if stop:
                break
        if rewritten_any:
            self.store.ensure_indexes()

    def _rewritten(self, row: dict, explanation: str) -> dict:
        from localidx.store.lance import embed_key

        old = row["search_text"]
        words = row["bm25_text"][len(old) + 1 :] if row["bm25_text"].startswith(old + "\n") else ""
        search = with_explanation(old, explanation)
        return {"search_text": search, "bm25_text": f"{search}\n{words}", "embed_key": embed_key(self.model_id, search),
                "vector": None}
