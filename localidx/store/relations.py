"""Call relations: which indexed symbol a called name reaches, kept in the work tree's catalog (SQLite).

Flow: chunk -> **store** -> retrieve. The indexer writes a file's facts (``file_relations`` of its chunks and import
statements) in the same flush that writes its chunk rows and catalog record; retrieval asks ``callees`` / ``callers``
for expansion and ``uses_md`` / ``used_by_md`` for what results show.

Stored per file, replaced whole when the file is re-indexed and removed with it (files and chunks have small integer
ids here, ``fid`` and ``cid``, that no other module sees):

- ``rel_files(fid, path)``; ``rel_chunks(cid, chunk_id, fid, head, symbol, start_line)``: every code chunk; ``head``
  is the first part of a split symbol. Parts share their symbol's calls and definition, so refs and defs hang on the
  head, and a part asked about speaks for its head.
- ``rel_defs(cid, symbol, name, fid, kind)``: one row per symbol a chunk defines (a symbol chunk's own; each member of
  a merged chunk of tiny siblings, which is then a callee for each of them).
- ``rel_refs(cid, pos, name, fid, bare)``: one row per distinct called name per chunk, in call order, the bare name
  (``self.store.save`` is ``save``); ``bare`` is 0 when the chunk only writes it after ``.``/``->``/``::`` and the
  file has a top-level definition of that name, which such a call cannot reach (see ``file_relations``).
- ``rel_imports(fid, key)``: module keys the file's imports name; ``rel_modules(fid, key, weight)``: keys that name
  the file. A key is lower-case components joined by ``/`` (``a.b.c``, ``a::b::c`` and ``a/b/c`` are all ``a/b/c``);
  an import and a file match on a shared key, and a longer shared key is a more specific match (``import_keys``,
  ``module_keys``).

Edges are resolved at read time against the current tables, so they are always those of what is indexed and an edit
changes every edge it takes part in while writing only the edited file's rows. For a name N called in chunk C of file
F:

0. C defines N itself (recursion, or a call between tiny siblings merged into C): no edge, and no further step;
1. definitions of N in F: confidence 1.0, "same-file" (several: those in the caller's own class first);
2. definitions of N in files F imports: 0.8, "import" (only the most specific key match);
3. the one definition of N in the repository (not counting one in C that the call cannot reach): 0.5, "unique-name".

Names in the noise table (``data/relations.toml``: builtins, container methods, logging) stop after step 1, and are
stored only where the file defines them; so do names defined more than ``COMMON_DEFS`` times (setUp, visit, close).
A name defined in several files F does not import resolves to nothing: a guess among them would spend context budget
on the wrong code more often than not. At most ``MAX_TARGETS`` definitions are kept for one reference.

Invariants: only the indexer writes (``replace_files``, ``remove``, ``clear``), each call one transaction, in the
order chunk rows -> relations -> catalog record, so a run killed in between re-indexes the file and replaces its rows.
The tables live and die with the catalog: a rebuild or a new model (``Catalog.bind``), or a new ``CATALOG_VERSION``,
empties them; a catalog with files but relations of another ``RELATIONS_SCHEMA`` (or none: an index from before them)
is ``stale``, and the indexer rebuilds it. A reader of a catalog without them gets no edges, never an error.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

from localidx import tomlfile
from localidx.imports import imported_modules
from localidx.records import CODE_KINDS

RELATIONS_SCHEMA = 1  # the tables and what is written in them: a new value rebuilds existing indexes (``stale``)
MAX_TARGETS = 3  # definitions kept for one reference when a step finds several
COMMON_DEFS = 50  # a name defined more often is a protocol (setUp, visit, close): resolved within its file only
CALLERS_SCAN = 512  # references ``callers`` reads per confidence tier at most: a bound on the time of one question
_SUFFIX_MAX = 4  # components of the longest import suffix key (github.com/acme/proj/internal/store -> internal/store)

CONFIDENCE = {"same-file": 1.0, "import": 0.8, "unique-name": 0.5}

# Files and chunks get small integer ids here: every other row names them, and 32-digit chunk ids in every row and
# index made the tables 2.3 times larger. Every index serves a query below; none is kept for symmetry.
_TABLES = ("rel_files", "rel_chunks", "rel_defs", "rel_refs", "rel_imports", "rel_modules")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rel_files (fid INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS rel_chunks (
    cid INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL UNIQUE, fid INTEGER NOT NULL, head INTEGER NOT NULL,
    symbol TEXT NOT NULL, start_line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rel_chunks_fid ON rel_chunks(fid);
CREATE TABLE IF NOT EXISTS rel_defs (
    cid INTEGER NOT NULL, symbol TEXT NOT NULL, name TEXT NOT NULL, fid INTEGER NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (cid, symbol)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rel_defs_name ON rel_defs(name, fid);
CREATE TABLE IF NOT EXISTS rel_refs (
    cid INTEGER NOT NULL, pos INTEGER NOT NULL, name TEXT NOT NULL, fid INTEGER NOT NULL, bare INTEGER NOT NULL,
    PRIMARY KEY (cid, pos)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rel_refs_name ON rel_refs(name, fid);
CREATE TABLE IF NOT EXISTS rel_imports (
    fid INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (fid, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rel_modules (
    fid INTEGER NOT NULL, key TEXT NOT NULL, weight INTEGER NOT NULL, PRIMARY KEY (fid, key)
) WITHOUT ROWID;
"""
_META_KEY = "relations_schema"

_WORD = re.compile(r"\w")
_NAME_SPLIT = re.compile(r"::|[.#]")


@dataclass(frozen=True)
class Edge:
    """One resolved call: the chunk ``caller_id`` calls ``name``, defined by the chunk ``callee_id``."""

    caller_id: str
    callee_id: str
    name: str
    confidence: float  # 1.0 same-file, 0.8 import, 0.5 unique-name
    reason: str  # "same-file" | "import" | "unique-name"
    caller_symbol: str
    caller_path: str
    caller_line: int
    callee_symbol: str
    callee_path: str
    callee_line: int


@dataclass
class FileRelations:
    """What one indexed file contributes (``file_relations``); the writer's unit, replaced whole."""

    path: str
    chunks: list[tuple[str, str, int, str]] = field(default_factory=list)  # (chunk_id, symbol, start_line, head_id)
    defs: list[tuple[str, str, str, str, int]] = field(default_factory=list)  # (name, symbol, chunk_id, kind, line)
    refs: list[tuple[str, str, int]] = field(default_factory=list)  # (chunk_id, name, bare)
    imports: list[str] = field(default_factory=list)  # module keys


# -- data -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tables:
    noise: frozenset[str]
    package_files: frozenset[str]
    path_roots: frozenset[str]


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    data = tomlfile.package_table("localidx", "data/relations.toml")
    return _Tables(
        noise=frozenset(name for names in data["noise"].values() for name in names),
        package_files=frozenset(data["package_files"]),
        path_roots=frozenset(data["path_roots"]),
    )


def is_package_file(stem: str) -> bool:
    """Whether a file of this stem stands for its directory (``__init__``, ``index``, ``mod``)."""
    return stem in _tables().package_files


def is_noise(name: str) -> bool:
    """Whether a called name is too common to resolve outside the caller's file."""
    return name in _tables().noise


# -- what a file contributes ------------------------------------------------------------------------------------


def _bare(name: str) -> str:
    return _NAME_SPLIT.split(name)[-1] if "." in name or ":" in name or "#" in name else name


def file_relations(path: str, chunks, imports: list[str]) -> FileRelations:
    """The defs, refs and import keys of one file from its finalized chunks and its import statements' text.

    A noise name is kept as a reference only where the file defines it (elsewhere it could never resolve). A
    reference is ``bare`` unless the file defines the name as a top-level function or class and the chunk only ever
    writes it after ``.``, ``->`` or ``::`` (``cache.update(x)`` is not a call of the module's own ``update``)."""
    out = FileRelations(path=path, imports=import_keys(path, imports))
    heads = []
    texts: dict[str, list[str]] = {}  # head id -> the text of its parts
    head_id = ""
    for chunk in chunks:
        if chunk.kind not in CODE_KINDS:
            continue
        if chunk.chunk_index == 0:
            head_id = chunk.id
            heads.append(chunk)  # a later part of a split symbol has its head's calls and definition
        out.chunks.append((chunk.id, chunk.symbol, chunk.start_line, head_id or chunk.id))
        texts.setdefault(head_id or chunk.id, []).append(chunk.text)
    for chunk in heads:
        for symbol in dict.fromkeys([chunk.symbol, *chunk.symbols]) if chunk.symbol else ():
            name = chunk.name if symbol == chunk.symbol and chunk.name else _bare(symbol)
            out.defs.append((name, symbol, chunk.id, chunk.kind, chunk.start_line))
    defined = {d[0] for d in out.defs}
    plain = {d[0] for d in out.defs if not _is_member(d[1], d[3])}
    for chunk in heads:
        for name in dict.fromkeys(_bare(c) for c in chunk.calls):
            if not name or (is_noise(name) and name not in defined):
                continue
            bare = name not in plain or any(_written_bare(name, text) for text in texts[chunk.id])
            out.refs.append((chunk.id, name, int(bare)))
    return out


def _is_member(symbol: str, kind: str) -> bool:
    """Whether a definition is reached through an object or a path (a method, a member of a class or namespace)."""
    return "." in symbol or kind == "method"


def _written_bare(name: str, text: str) -> bool:
    # str.find over the few occurrences: a regular expression per name cost more to compile than to run.
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_$.>:") and not (after.isalnum() or after in "_$"):
            return True
        start = text.find(name, start + 1)
    return False


def module_keys(path: str) -> dict[str, int]:
    """The keys that name a file, with their weight: every tail of its module path (``src/app/util`` for
    src/app/util.ts, the directory for a package file such as ``__init__.py``), and, less specific, every tail of its
    directory (Go, Java and C# import packages and namespaces, which are directories)."""
    parts = path.lower().split("/")
    dirs = parts[:-1]
    stem = PurePosixPath(parts[-1]).stem
    module = dirs if stem in _tables().package_files else [*dirs, stem]
    keys: dict[str, int] = {}
    for k in range(1, len(dirs) + 1):
        keys["/".join(dirs[-k:])] = 2 * k
    for k in range(1, len(module) + 1):
        keys["/".join(module[-k:])] = 2 * k + 1
    return keys


def import_keys(path: str, statements: list[str]) -> list[str]:
    """Normalised keys of the modules a file's import statements name, from their text alone.

    The statements are read by ``localidx.imports.imported_modules``, as [META] reads them. A relative name (``./x``,
    ``../x``, Python's ``from ..x import y``) is resolved against the importing file's directory and kept exact. A
    quoted path drops a source extension and a package file name. Python's ``from a.b import c, d`` names ``a/b``,
    ``a/b/c`` and ``a/b/d``. Names that are not relative also give their tails of 2 to 4 components, and a name of
    three or more components that may end in an item (``use a::b::C``, ``import a.b.C``) its parent; a leading path
    root (``crate``, ``self``: the table in ``data/relations.toml``) is dropped, so ``use crate::store::Catalog``
    gives ``store/catalog`` and ``store``."""
    here = path.split("/")[:-1]
    keys: dict[str, None] = {}
    for statement in statements:
        for parts, exact, item in _modules(here, statement):
            parts = [p for p in parts if _WORD.search(p)]
            if not parts:
                continue
            keys["/".join(parts)] = None
            if exact:
                continue
            forms = [parts, parts[:-1]] if item and len(parts) >= 3 else [parts]
            for form in forms:
                while len(form) > 1 and form[0] in _tables().path_roots:
                    form = form[1:]
                keys["/".join(form)] = None
                for k in range(2, min(_SUFFIX_MAX, len(form) - 1) + 1):
                    keys["/".join(form[-k:])] = None
    return list(keys)


def _modules(here: list[str], statement: str):
    """(lower-case components, exact, may end in an item name) of each module a statement names."""
    for module in imported_modules(statement):
        parts = module.resolve(here)
        if parts is None:
            continue  # outside the repository
        exact = module.up is not None
        if module.path:
            if parts:
                parts[-1] = _strip_source_extension(parts[-1])
                if parts[-1] in _tables().package_files:
                    parts.pop()
            yield [p.lower() for p in parts], exact, False
            continue
        parts = [p.lower() for p in parts]
        yield parts, exact, module.item
        for name in module.names:
            yield [*parts, name.lower()], exact, False


def _strip_source_extension(name: str) -> str:
    from localidx.languages import language_for_path

    return PurePosixPath(name).stem if language_for_path(name) is not None else name


# -- the store --------------------------------------------------------------------------------------------------


@dataclass
class _Ref:
    cid: int  # the calling chunk (a head)
    name: str
    fid: int
    bare: int
    symbol: str  # the calling chunk's symbol


@dataclass
class _Def:
    cid: int
    symbol: str
    kind: str
    fid: int
    weight: int = 0


_JSON_PAIRS = ("WITH q(fid, name) AS "
               "(SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)) ")
_REFS = "SELECT r.cid, r.name, r.fid, r.bare, c.symbol FROM rel_refs r JOIN rel_chunks c ON c.cid = r.cid "
# Whether the referring file imports a key of file ?: probed per reference (a file has a few dozen imports), never
# listed (a directory key like "test" is imported by thousands of files).
_IMPORTS_FILE = ("EXISTS (SELECT 1 FROM rel_imports i CROSS JOIN rel_modules m ON m.fid = ? AND m.key = i.key "
                 "WHERE i.fid = r.fid)")


class Relations:
    """Call relations of one work tree, over its catalog's SQLite connection (writable or read-only)."""

    def __init__(self, catalog):
        self._catalog = catalog
        self._db: sqlite3.Connection = catalog.connection

    # -- writer side (the indexer only) --------------------------------------------------------------------------

    @property
    def stale(self) -> bool:
        """Whether the catalog vouches for files whose relations were written under another ``RELATIONS_SCHEMA``, or
        never (an index from before relations): the indexer then rebuilds, so every file gets its relations."""
        return self._catalog.count() > 0 and not self._ready()

    def _ensure(self) -> None:
        if self._catalog.get_meta(_META_KEY) == str(RELATIONS_SCHEMA):
            return
        self._db.executescript("".join(f"DROP TABLE IF EXISTS {t};" for t in _TABLES) + _SCHEMA)
        self._catalog.set_meta(_META_KEY, str(RELATIONS_SCHEMA))

    def replace_files(self, entries: list[FileRelations]) -> None:
        """Replace the relations of each entry's file with the entry's (an empty entry removes them)."""
        if not entries:
            return
        self._ensure()
        db = self._db
        with self._transaction():
            next_cid = db.execute("SELECT COALESCE(MAX(cid), 0) + 1 FROM rel_chunks").fetchone()[0]
            for e in entries:
                fid = self._forget(e.path, keep_file=bool(e.chunks))
                if not e.chunks:
                    continue
                cids = {chunk_id: next_cid + k for k, (chunk_id, *_rest) in enumerate(e.chunks)}
                next_cid += len(cids)
                db.executemany("INSERT INTO rel_chunks VALUES (?, ?, ?, ?, ?, ?)",
                               [(cids[c], c, fid, cids.get(head, cids[c]), symbol, line)
                                for c, symbol, line, head in e.chunks])
                db.executemany("INSERT OR IGNORE INTO rel_defs VALUES (?, ?, ?, ?, ?)",
                               [(cids[c], symbol, name, fid, kind) for name, symbol, c, kind, _line in e.defs])
                db.executemany("INSERT INTO rel_refs VALUES (?, ?, ?, ?, ?)",
                               [(cids[c], pos, name, fid, bare) for pos, (c, name, bare) in enumerate(e.refs)])
                db.executemany("INSERT OR IGNORE INTO rel_imports VALUES (?, ?)", [(fid, k) for k in e.imports])
                if e.defs:
                    db.executemany("INSERT INTO rel_modules VALUES (?, ?, ?)",
                                   [(fid, k, w) for k, w in module_keys(e.path).items()])

    def remove(self, paths: list[str]) -> None:
        """Forget the relations of files (deleted, or no longer indexed)."""
        if not paths:
            return
        self._ensure()
        with self._transaction():
            for path in paths:
                self._forget(path, keep_file=False)

    def clear(self) -> None:
        """Forget everything (a rebuild)."""
        self._ensure()
        with self._transaction():
            for table in _TABLES:
                self._db.execute(f"DELETE FROM {table}")

    def _forget(self, path: str, keep_file: bool) -> int | None:
        """Delete a file's rows; returns its file id when ``keep_file`` (made if new), else None."""
        db = self._db
        row = db.execute("SELECT fid FROM rel_files WHERE path = ?", (path,)).fetchone()
        if row is not None:
            fid = row[0]
            db.execute("DELETE FROM rel_refs WHERE cid IN (SELECT cid FROM rel_chunks WHERE fid = ?)", (fid,))
            db.execute("DELETE FROM rel_defs WHERE cid IN (SELECT cid FROM rel_chunks WHERE fid = ?)", (fid,))
            for table in ("rel_chunks", "rel_imports", "rel_modules"):
                db.execute(f"DELETE FROM {table} WHERE fid = ?", (fid,))
            if keep_file:
                return fid
            db.execute("DELETE FROM rel_files WHERE fid = ?", (fid,))
            return None
        if keep_file:
            return db.execute("INSERT INTO rel_files (path) VALUES (?)", (path,)).lastrowid
        return None

    def _transaction(self):
        return self._catalog.transaction()

    def _reading(self):
        # One read transaction per question: every query of it sees the same commit of the writer.
        return contextlib.nullcontext() if self._db.in_transaction else self._transaction()

    # -- reader side ---------------------------------------------------------------------------------------------

    def _ready(self) -> bool:
        try:
            return self._catalog.get_meta(_META_KEY) == str(RELATIONS_SCHEMA)
        except sqlite3.Error:
            return False

    def callees(self, chunk_id: str, limit: int = 20) -> list[Edge]:
        """What this chunk calls, best confidence first, then in call order."""
        if limit <= 0 or not self._ready():
            return []
        with self._reading():
            head = self._head(chunk_id)
            if head is None:
                return []
            refs = [_Ref(*r) for r in self._db.execute(_REFS + "WHERE r.cid = ? ORDER BY r.pos", (head[0],))]
            found = self._resolve(refs)
            found.sort(key=lambda f: -CONFIDENCE[f[2]])
            return self._edges(found[:limit])

    def callers(self, chunk_id: str, limit: int = 20) -> list[Edge]:
        """Who calls the symbol(s) this chunk defines, best confidence first, then by place.

        References are read in confidence tiers (the chunk's file, files that import it, then anywhere for a name
        defined at most twice) and only until ``limit`` edges are found, reading at most ``CALLERS_SCAN`` per tier:
        a name called from thousands of places costs a page of them, not all."""
        if limit <= 0 or not self._ready():
            return []
        with self._reading():
            head = self._head(chunk_id)
            if head is None:
                return []
            head_cid, fid = head
            names = [n for (n,) in self._db.execute("SELECT DISTINCT name FROM rel_defs WHERE cid = ?", (head_cid,))]
            counts = self._counts(names)
            wider = [n for n in names if not is_noise(n) and counts[n] <= COMMON_DEFS]
            unique = [n for n in wider if counts[n] <= 2]
            tiers = [(_REFS + "WHERE r.name IN (SELECT value FROM json_each(?)) AND r.fid = ?",
                      (json.dumps(names), fid))]
            if wider:
                tiers.append((_REFS + f"WHERE r.name IN (SELECT value FROM json_each(?)) AND r.fid != ? "
                              f"AND {_IMPORTS_FILE}", (json.dumps(wider), fid, fid)))
            if unique:
                tiers.append((_REFS + f"WHERE r.name IN (SELECT value FROM json_each(?)) AND r.fid != ? "
                              f"AND NOT {_IMPORTS_FILE}", (json.dumps(unique), fid, fid)))
            page = min(max(4 * limit, 128), CALLERS_SCAN)
            found: list = []
            for sql, params in tiers:
                offset = 0
                while len(found) < limit and offset < CALLERS_SCAN:
                    refs = [_Ref(*r) for r in self._db.execute(sql + " LIMIT ? OFFSET ?", (*params, page, offset))]
                    found += [f for f in self._resolve(refs, counts) if f[1].cid == head_cid]
                    offset += page
                    if len(refs) < page:
                        break
            edges = self._edges(found)
            edges.sort(key=lambda e: (-e.confidence, e.caller_path, e.caller_line, e.name))
            return edges[:limit]

    def uses_md(self, chunk_ids: str | list[str], limit: int = 10) -> str:
        """What these chunks call (one chunk, or the parts of a merged match), one Markdown list line per callee
        ("" when nothing resolves): a callee called from several places, or by several parts, is listed once."""
        ids = [chunk_ids] if isinstance(chunk_ids, str) else chunk_ids
        edges = [e for i in ids for e in self.callees(i, 3 * limit)]
        return _md(((e.callee_symbol, e.callee_path, e.callee_line, e) for e in edges), limit)

    def used_by_md(self, chunk_ids: str | list[str], limit: int = 10) -> str:
        """Who calls these chunks' symbol(s), one Markdown list line per caller ("" when nobody does): a caller
        that calls them from several places is listed once."""
        ids = [chunk_ids] if isinstance(chunk_ids, str) else chunk_ids
        edges = [e for i in ids for e in self.callers(i, 3 * limit)]
        return _md(((e.caller_symbol, e.caller_path, e.caller_line, e) for e in edges), limit)

    def _head(self, chunk_id: str) -> tuple[int, int] | None:
        """(head chunk, file) of a chunk: a later part of a split symbol speaks for its first part."""
        row = self._db.execute("SELECT head, fid FROM rel_chunks WHERE chunk_id = ?", (chunk_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def _counts(self, names) -> dict[str, int]:
        """How many definitions each name has, counted up to ``COMMON_DEFS + 1``."""
        return dict(self._db.execute(
            "SELECT n.value, (SELECT COUNT(*) FROM (SELECT 1 FROM rel_defs x WHERE x.name = n.value LIMIT ?)) "
            "FROM json_each(?) n", (COMMON_DEFS + 1, json.dumps(sorted(set(names))))))

    def _resolve(self, refs: list[_Ref], counts: dict[str, int] | None = None) -> list[tuple[_Ref, _Def, str]]:
        """(reference, definition, reason) of each resolved reference, by the rules in the module docstring."""
        if not refs:
            return []
        db = self._db
        pairs = sorted({(r.fid, r.name) for r in refs})
        same: dict[tuple[int, str], list[_Def]] = {}
        for q_fid, q_name, *d in db.execute(
                _JSON_PAIRS + "SELECT q.fid, q.name, d.cid, d.symbol, d.kind, d.fid FROM q "
                "CROSS JOIN rel_defs d ON d.name = q.name AND d.fid = q.fid", (json.dumps(pairs),)):
            same.setdefault((q_fid, q_name), []).append(_Def(*d))
        names = {n for _f, n in pairs if not is_noise(n)}
        if counts is None or not names <= counts.keys():
            counts = {**(counts or {}), **self._counts(names)}
        names = {n for n in names if 0 < counts[n] <= COMMON_DEFS}
        imported, unique = self._beyond_the_file(pairs, names) if names else ({}, {})
        found = []
        for ref in refs:
            key = (ref.fid, ref.name)
            targets = _same_file(ref, same.get(key, []))
            if targets is None:
                continue  # the chunk calls a name it defines itself: recursion, or a merged sibling
            reason = "same-file"
            if not targets:
                targets, reason = _most_specific(ref, imported.get(key, [])), "import"
            if not targets:
                others = [d for d in unique.get(ref.name, []) if d.cid != ref.cid]
                targets, reason = (others if len(others) == 1 else []), "unique-name"
            found.extend((ref, d, reason) for d in targets[:MAX_TARGETS])
        return found

    def _beyond_the_file(self, pairs: list[tuple[int, str]], names: set[str]):
        """Steps 2 and 3 for (file, name) pairs: import matches by (file, name), and the definitions of each name
        that has at most two. Read as a few small row sets (the names' definitions, the keys of their files, the
        referring files' imports) and matched here: a join from either side fans out on popular keys."""
        db = self._db
        defs: dict[str, list[_Def]] = {}
        for name, *d in db.execute("SELECT d.name, d.cid, d.symbol, d.kind, d.fid FROM json_each(?) n "
                                   "CROSS JOIN rel_defs d ON d.name = n.value", (json.dumps(sorted(names)),)):
            defs.setdefault(name, []).append(_Def(*d))
        keys_of: dict[int, list[tuple[str, int]]] = {}
        def_fids = sorted({d.fid for found in defs.values() for d in found})
        for fid, key, weight in db.execute("SELECT m.fid, m.key, m.weight FROM json_each(?) n "
                                           "CROSS JOIN rel_modules m ON m.fid = n.value", (json.dumps(def_fids),)):
            keys_of.setdefault(fid, []).append((key, weight))
        referring: dict[str, list[int]] = {}
        for fid, name in pairs:
            if name in names:
                referring.setdefault(name, []).append(fid)
        imports_of: dict[int, list[str]] = {}
        ref_fids = sorted({fid for fids in referring.values() for fid in fids})
        for fid, key in db.execute("SELECT i.fid, i.key FROM json_each(?) n "
                                   "CROSS JOIN rel_imports i ON i.fid = n.value", (json.dumps(ref_fids),)):
            imports_of.setdefault(fid, []).append(key)
        imported: dict[tuple[int, str], list[_Def]] = {}
        for name, fids in referring.items():
            by_key: dict[str, list[tuple[_Def, int]]] = {}
            for d in defs.get(name, []):
                for key, weight in keys_of.get(d.fid, []):
                    by_key.setdefault(key, []).append((d, weight))
            for fid in fids:
                best: dict[int, tuple[_Def, int]] = {}
                for key in imports_of.get(fid, []):
                    for d, weight in by_key.get(key, []):
                        if d.fid != fid and weight > best.get(d.cid, (d, 0))[1]:
                            best[d.cid] = (d, weight)
                if best:
                    imported[(fid, name)] = [_Def(d.cid, d.symbol, d.kind, d.fid, w) for d, w in best.values()]
        unique = {name: found for name, found in defs.items() if len(found) <= 2}
        return imported, unique

    def _edges(self, found: list[tuple[_Ref, _Def, str]]) -> list[Edge]:
        cids = sorted({f[0].cid for f in found} | {f[1].cid for f in found})
        if not cids:
            return []
        info = {cid: rest for cid, *rest in self._db.execute(
            "SELECT c.cid, c.chunk_id, c.symbol, c.start_line, f.path FROM json_each(?) n "
            "CROSS JOIN rel_chunks c ON c.cid = n.value CROSS JOIN rel_files f ON f.fid = c.fid",
            (json.dumps(cids),))}
        edges = []
        for ref, d, reason in found:
            caller_id, caller_symbol, caller_line, caller_path = info[ref.cid]
            callee_id, _symbol, callee_line, callee_path = info[d.cid]
            edges.append(Edge(caller_id=caller_id, callee_id=callee_id, name=ref.name,
                              confidence=CONFIDENCE[reason], reason=reason, caller_symbol=caller_symbol,
                              caller_path=caller_path, caller_line=caller_line, callee_symbol=d.symbol,
                              callee_path=callee_path, callee_line=callee_line))
        return edges


def _parent(symbol: str) -> str:
    return symbol.rsplit(".", 1)[0] if "." in symbol else ""


def _same_file(ref: _Ref, defs: list[_Def]) -> list[_Def] | None:
    found = [d for d in defs if ref.bare or _is_member(d.symbol, d.kind)]
    if any(d.cid == ref.cid for d in found):
        return None
    if len(found) > 1:
        # self.save() in a method of Store means Store.save, not another class's save in the same file.
        mine = [d for d in found if _parent(d.symbol) == _parent(ref.symbol)]
        found = mine or found
    return sorted(found, key=lambda d: d.cid)


def _most_specific(ref: _Ref, defs: list[_Def]) -> list[_Def]:
    found = [d for d in defs if d.cid != ref.cid]
    if not found:
        return []
    best = max(d.weight for d in found)
    return sorted((d for d in found if d.weight == best), key=lambda d: (d.fid, d.cid))


def _md(places, limit: int) -> str:
    """Markdown list lines for (symbol, path, line, edge) in order, each (symbol, path, line) once, ``limit`` at
    most."""
    seen: set = set()
    lines = []
    for symbol, path, line, edge in places:
        if (symbol, path, line) in seen:
            continue
        seen.add((symbol, path, line))
        lines.append(_line(symbol, path, line, edge))
        if len(lines) == limit:
            break
    return "\n".join(lines)


def _line(symbol: str, path: str, line: int, edge: Edge) -> str:
    label = f"`{symbol}`" if symbol else "module code"
    return f"- {label} ({path}:{line}) — {edge.reason}, {edge.confidence:.1f}"
