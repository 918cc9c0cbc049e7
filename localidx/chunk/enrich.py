"""The [META] header and search text of a chunk: the enrich step.

Flow: discover → parse → chunk → **enrich** → embed → store. ``localidx.chunk.finalize`` calls ``tags`` and
``search_text`` on every draft chunk (its text already redacted); the embedder reads the search text, BM25 reads it
plus ``identifier_words``.

A header is one ``[META] Key: value`` line per fact, empty facts left out, in this order::

    [META] File: app/auth/handler.py
    [META] Language: python
    [META] Role: Authentication, API
    [META] Endpoint: POST /auth/verify
    [META] Symbol: Method revoke (in class AuthHandler)
    [META] Signature: def revoke(self, token: str) -> None
    [META] Doc: Put a token on the revocation list.
    [META] Contains: authentication, session

Invariants:
- Pure and deterministic: the same chunk and file context give the same header, byte for byte. The only I/O is
  reading ``localidx/data/keywords.toml`` once. Role and Contains follow the order of that table, never a set's.
- The header stays under 20% of the tokens of header plus text (see ``header`` for the one exception).
- ``META_VERSION`` names the chunk table: bump it with any change to the output, in code or in the keyword table,
  so that an index rebuilds instead of mixing both. Vectors are cached by the exact text embedded
  (``store.lance.embed_key``), so a rebuild re-embeds only the chunks whose text changed.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import PurePosixPath

from localidx import tomlfile
from localidx.imports import imported_modules
from localidx.records import Chunk, FileContext
from localidx.text import tokens
from localidx.text.words import split_identifier  # noqa: F401 - enrich's callers split identifiers with it
from localidx.text.words import split_words as _split
from localidx.text.words import stopwords


# Part of the table's name: raised whenever the chunks an index holds would differ for the same files (the [META]
# text, or where chunks are cut: 2 = merged groups name their members, over-budget lines cut by characters; 3 = import
# statements read by localidx.imports: a relative import gives no Role, a Go raw-string import does; Markdown split
# by the one line splitter, over-budget lines cut after whitespace; 4 = BM25 reads a chunk's path words, a long
# leading comment is a chunk of its own, a summary lists each definition's line and spans the file's head; 5 = items
# inside macro invocations are symbols, their Symbol line names the macro; 6 = a class skeleton leaves its members'
# doc comments to the members), so an index built by an older version is rebuilt beside itself on the next run;
# unchanged texts keep their vectors.
META_VERSION = 6

_CONTAINS_MAX = 8
_DOC_CHARS = 120
_SIGNATURE_CHARS = 200
_ENDPOINTS_MAX = 5
_CLASS_KINDS = frozenset({"class", "struct", "interface", "trait", "impl", "enum"})
# A group holds symbols of different kinds, so at least one that is not a plain function (a type, a method).
_PRIORITY_5_KINDS = _CLASS_KINDS | {"group"}

# Trimming, in order, until the header fits: (field, what is left of it). For list fields the number counts items,
# for text fields characters; 0 drops the field. Past the last step one line is left: File, Endpoint, symbol.
_TRIM_STEPS: tuple[tuple[str, int], ...] = (
    ("Doc", 60),
    ("Doc", 0),
    ("Contains", 3),
    ("Contains", 0),
    ("Signature", 60),
    ("Signature", 0),
    ("Endpoints", 0),
    ("Language", 0),
    ("Role", 0),
    ("Symbols", 5),
)
_LIST_FIELDS = frozenset({"Role", "Contains", "Endpoints", "Symbols"})
_LABEL_FIELDS = ("Symbol", "Symbols", "Section")

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
_PATH_SPLIT = re.compile(r"[/\\]")
_MODULE_SEPARATORS = re.compile(r"::|\\|/")
_DECORATOR_NAME = re.compile(r"^(?:@|#!?\[|\[)?\s*([\w.:$]+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_QUALIFIER = re.compile(r"\.|::|#")


@dataclass(frozen=True)
class _Role:
    name: str
    paths: frozenset[str]
    extensions: frozenset[str]
    dotted_imports: tuple[str, ...]  # "django.urls": the module and its submodules
    plain_imports: frozenset[str]  # "flask": any part of a module name
    decorators: frozenset[str]
    pattern: re.Pattern | None


@dataclass(frozen=True)
class _Concept:
    name: str
    words: frozenset[str]
    weak: frozenset[str]


@dataclass(frozen=True)
class _Tables:
    stopwords: frozenset[str]
    roles: tuple[_Role, ...]
    concepts: tuple[_Concept, ...]
    test_paths: re.Pattern
    test_symbols: re.Pattern
    test_calls: re.Pattern
    # word -> (concept index, whether the word alone triggers it), for every word any concept names
    concept_words: dict[str, tuple[tuple[int, bool], ...]]
    concept_vocabulary: frozenset[str]  # the keys of concept_words
    # The role and async patterns as literal-first regexes (``_literal_first``): most texts match none of a role's
    # patterns, and then one fast scan each decides.
    role_scans: tuple[re.Pattern, ...]
    async_scans: tuple[re.Pattern, ...]
    # Whether those patterns match in a run of whole lines of a text exactly where they match in the text (no
    # anchors or lookbehinds, which read the edges of a text differently); see _FileFacts.
    role_patterns_local: bool
    async_pattern_local: bool


@lru_cache(maxsize=1)
def keyword_tables() -> _Tables:
    data = tomlfile.package_table("localidx", "data/keywords.toml")
    roles = []
    for row in data["role"]:
        imports = [_normalize_module(name) for name in row.get("imports", [])]
        patterns = row.get("patterns", [])
        roles.append(
            _Role(
                name=row["name"],
                paths=frozenset(w.lower() for w in row.get("paths", [])),
                extensions=frozenset(e.lower() for e in row.get("extensions", [])),
                dotted_imports=tuple(m for m in imports if "." in m),
                plain_imports=frozenset(m for m in imports if "." not in m),
                decorators=frozenset(_normalize_decorator(d) for d in row.get("decorators", [])),
                pattern=_any_of(patterns) if patterns else None,
            )
        )
    concepts = tuple(
        _Concept(row["name"], frozenset(row.get("words", [])), frozenset(row.get("weak", [])))
        for row in data["concept"]
    )
    concept_words: dict[str, list[tuple[int, bool]]] = {}
    for index, concept in enumerate(concepts):
        for word in concept.words:
            concept_words.setdefault(word, []).append((index, True))
        for word in concept.weak - concept.words:
            concept_words.setdefault(word, []).append((index, False))
    role_patterns = [p for row in data["role"] for p in row.get("patterns", [])]
    return _Tables(
        stopwords=stopwords(),
        roles=tuple(roles),
        concepts=concepts,
        test_paths=_any_of(data["test"]["paths"]),
        test_symbols=re.compile(data["test"]["symbols"]),
        test_calls=re.compile(data["test"]["call_symbols"]),
        concept_words={word: tuple(hits) for word, hits in concept_words.items()},
        concept_vocabulary=frozenset(concept_words),
        role_scans=_literal_first(role_patterns),
        async_scans=_literal_first(data["async"]["patterns"]),
        role_patterns_local=all(map(_local, role_patterns)),
        async_pattern_local=all(map(_local, data["async"]["patterns"])),
    )


_ESCAPE = re.compile(r"\\.")
_CHAR_CLASS = re.compile(r"\[\^?\]?[^\]]*\]")


def _local(pattern: str) -> bool:
    """Whether ``pattern`` matches in a run of whole lines of a text exactly where it matches in the text.

    True without anchors (``^ $ \\A \\Z``), lookbehinds and inline flags: then only ``\\b`` and lookaheads read
    past a match, and they read a line break and a text's edge alike."""
    if re.search(r"\\[AZz]", pattern):
        return False
    bare = _CHAR_CLASS.sub("x", _ESCAPE.sub("x", pattern))
    return not any(mark in bare for mark in ("^", "$", "(?<", "(?m", "(?i", "(?x", "(?a", "(?L", "(?u"))


def _any_of(patterns: list[str]) -> re.Pattern:
    r"""One regex for a list of alternatives, with a leading ``\b`` they share factored out.

    The regex engine checks every alternative at every position; ``\b(?:a|b|c)`` asks the boundary once, which
    makes the has_async scan about fifteen times faster than ``\ba|\bb|\bc``.
    """
    bounded = [p[2:] for p in patterns if p.startswith(r"\b")]
    others = [f"(?:{p})" for p in patterns if not p.startswith(r"\b")]
    branches = ([r"\b(?:" + "|".join(bounded) + ")"] if bounded else []) + others
    return re.compile("|".join(branches) or r"(?!)")


def _literal_first(patterns: list[str]) -> tuple[re.Pattern, ...]:
    r"""Regexes that together match where ``_any_of(patterns)`` does, each starting with a literal where it can.

    Python's regex engine finds a leading literal with a fast string search, but tries a leading ``\b`` at every
    position of a text: ``async(?<!\wasync)\b`` says what ``\basync\b`` says (no word character before the word)
    and scans a file several times faster. A leading group of alternatives is distributed (``\b(?:a|b)\.x`` gives
    ``a(?<!\wa)\.x`` and ``b(?<!\wb)\.x``); a pattern this cannot read (an alternation at its top level, a
    quantified group) is kept whole, as ``_any_of`` writes it."""
    sources: list[str] = []
    for pattern in patterns:
        if not pattern.startswith(r"\b"):
            sources.append(f"(?:{pattern})")
            continue
        body = pattern[2:]
        branches = _distributed(body) if len(_alternatives(body) or ()) == 1 else None
        rewritten = [_word_first(b) for b in branches or ()]
        sources += rewritten if branches and all(rewritten) else [rf"\b(?:{body})"]
    return tuple(map(re.compile, sources))


def _word_first(branch: str) -> str:
    r"""``\b`` + ``branch`` with its leading word written first, or "" when it does not start with one."""
    word = re.match(r"[A-Za-z0-9_]+", branch)
    literal = word.group() if word else ""
    if branch[len(literal) : len(literal) + 1] in ("*", "+", "?", "{"):
        literal = literal[:-1]  # a quantifier binds the last character, which is then no literal
    return f"{literal}(?<!\\w{literal}){branch[len(literal):]}" if literal else ""


def _distributed(body: str) -> list[str] | None:
    """``body`` as alternatives tried in the same order, a leading non-capturing group distributed over the rest."""
    if not body.startswith("(?:"):
        return [body]
    end = _group_end(body)
    if end is None or body[end : end + 1] in ("*", "+", "?", "{"):
        return None
    alternatives = _alternatives(body[3 : end - 1])
    if alternatives is None:
        return None
    out: list[str] = []
    for alternative in alternatives:
        branches = _distributed(alternative + body[end:])
        if branches is None:
            return None
        out += branches
    return out


_REGEX_ATOM = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|.", re.DOTALL)  # an escape, a character class, a character


def _group_end(body: str) -> int | None:
    """The index just past the group that opens ``body``."""
    depth = 0
    for atom in _REGEX_ATOM.finditer(body):
        depth += {"(": 1, ")": -1}.get(atom.group(), 0)
        if depth == 0:
            return atom.end()
    return None


def _alternatives(body: str) -> list[str] | None:
    """``body`` split at the ``|`` outside any group, or None when its groups do not balance."""
    out, depth, start = [], 0, 0
    for atom in _REGEX_ATOM.finditer(body):
        c = atom.group()
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return None
        if c == "|" and depth == 0:
            out.append(body[start : atom.start()])
            start = atom.end()
    return [*out, body[start:]] if depth == 0 else None


# -- words ------------------------------------------------------------------------------------------------------


def identifier_words(text: str, limit: int = 40) -> list[str]:
    """Distinct words of the identifiers in ``text``, in order of first appearance, at most ``limit`` of them.

    Stopwords and language keywords (the table in ``keywords.toml``), one-letter words and bare numbers are left out.
    """
    stop = keyword_tables().stopwords
    words: dict[str, None] = {}
    for ident in dict.fromkeys(_IDENTIFIER.findall(text)):
        for word in _split(ident):
            if len(word) < 2 or word.isdigit() or word in stop or word in words:
                continue
            words[word] = None
            if len(words) >= limit:
                return list(words)
    return list(words)


def _word_set(text: str) -> set[str]:
    """Every split word of every identifier in ``text`` (keywords included), plus its singular for a plural."""
    words: set[str] = set()
    for ident in set(_IDENTIFIER.findall(text)):
        words.update(_split(ident))
    return _with_singulars(words)


def _with_singulars(words: set[str]) -> set[str]:
    return words | {w[:-1] for w in words if len(w) > 3 and w.endswith("s")}


# -- roles and concepts -----------------------------------------------------------------------------------------


def roles(path: str, imports: list[str], decorators: list[str], text: str) -> list[str]:
    """What the code is for, e.g. ``["Authentication", "API"]``, in the order of the keyword table.

    A role is given by a word of the path (``auth/``, ``handlers.py``), the file's extension, a module the file
    imports (``fastapi``, ``sqlalchemy``), a decorator (``@app.route``, ``@Test``) or a pattern in the text
    (``app.get(``, ``SELECT ... FROM``).
    """
    return _roles(path, imports, decorators, text, endpoint=False)


def _roles(path: str, imports: list[str], decorators: list[str], text: str, *, endpoint: bool,
           pattern_hit: bool | None = None) -> list[str]:
    """``roles``; ``pattern_hit`` False says, when known, that no role pattern occurs in ``text``."""
    return _roles_from(_file_roles(path, tuple(imports)), decorators, text, endpoint=endpoint,
                       pattern_hit=pattern_hit)


def _roles_from(given: frozenset[str], decorators: list[str], text: str, *, endpoint: bool,
                pattern_hit: bool | None) -> list[str]:
    """The roles in table order: ``given`` (from the path and imports), an endpoint, decorators, text patterns."""
    table = keyword_tables()
    names = [_normalize_decorator(d) for d in decorators]
    if pattern_hit is None:
        pattern_hit = any(scan.search(text) is not None for scan in table.role_scans)
    if not (given or names or pattern_hit or endpoint):
        return []
    out = []
    for role in table.roles:
        if (
            role.name in given
            or (endpoint and role.name == "API")
            or any(_decorator_matches(name, role.decorators) for name in names)
            or (pattern_hit and role.pattern is not None and role.pattern.search(text) is not None)
        ):
            out.append(role.name)
    return out


@lru_cache(maxsize=256)
def _file_roles(path: str, imports: tuple[str, ...]) -> frozenset[str]:
    """The roles a file has by its path words, its extension and the modules it imports."""
    path_words, extension = _path_facts(path)
    from_imports = _import_roles(imports)
    return frozenset(
        role.name
        for role in keyword_tables().roles
        if not path_words.isdisjoint(role.paths) or extension in role.extensions or role.name in from_imports
    )


@lru_cache(maxsize=4096)
def _path_facts(path: str) -> tuple[frozenset[str], str]:
    parts = [p for p in _PATH_SPLIT.split(path) if p]
    if not parts:
        return frozenset(), ""
    name = PurePosixPath(parts[-1])
    words: set[str] = set()
    for part in [*parts[:-1], name.stem, name.name.split(".")[0]]:
        words.update(_split(part))
    return frozenset(_with_singulars(words)), name.suffix.lower()


@lru_cache(maxsize=1024)
def _import_roles(imports: tuple[str, ...]) -> frozenset[str]:
    modules = {m for statement in imports for m in _modules(statement)}
    parts = {part for m in modules for part in m.split(".")}
    found = set()
    for role in keyword_tables().roles:
        if not parts.isdisjoint(role.plain_imports) or any(
            m == trigger or m.startswith(trigger + ".") for trigger in role.dotted_imports for m in modules
        ):
            found.add(role.name)
    return frozenset(found)


def _modules(statement: str) -> list[str]:
    """The libraries an import statement names (``localidx.imports``), in lower-case dotted form: ``a.b``, ``a::b`` and
    ``a/b`` are all ``a.b``. A relative name (``./x``, ``from ..x import y``) is a module of the repository itself,
    never a library, and is left out."""
    return [_normalize_module(".".join(m.parts)) for m in imported_modules(statement) if m.up is None]


def _normalize_module(name: str) -> str:
    return _MODULE_SEPARATORS.sub(".", name).strip(".").lower()


def _normalize_decorator(text: str) -> str:
    m = _DECORATOR_NAME.match(text.strip())
    return m.group(1).replace("::", ".").strip(".").lower() if m else ""


def _decorator_matches(name: str, triggers: frozenset[str]) -> bool:
    if not name:
        return False
    # The whole name, or a dotted prefix or suffix of it: pytest.mark.parametrize matches "pytest.mark",
    # unittest.mock.patch matches "mock.patch", app.route matches "route".
    pieces = name.split(".")
    return any(
        ".".join(pieces[:i]) in triggers or ".".join(pieces[-i:]) in triggers for i in range(1, len(pieces) + 1)
    )


def contains(text: str, imports: list[str], symbol: str) -> list[str]:
    """Concepts the code deals with, e.g. ``["authentication", "session"]``: at most 8, in keyword-table order.

    A concept is triggered by one of its words, or by two of its weak words, among the identifier words of the
    text, the symbol's name and the file's import statements.
    """
    return _concepts(_text_concept_words(text) | _text_concept_words(symbol) | _import_concept_words(tuple(imports)))


def _concepts(words: set[str] | frozenset[str]) -> list[str]:
    """The concepts ``words`` trigger, in table order, at most ``_CONTAINS_MAX``."""
    if not words:
        return []
    table = keyword_tables()
    strong: set[int] = set()
    weak: dict[int, int] = {}
    for word in words:
        for index, alone in table.concept_words[word]:
            if alone:
                strong.add(index)
            else:
                weak[index] = weak.get(index, 0) + 1
    strong.update(index for index, n in weak.items() if n >= 2)
    return [table.concepts[index].name for index in sorted(strong)[:_CONTAINS_MAX]]


class _ConceptWords(dict):
    """identifier -> the words of it (and their singulars) that some concept names; filled as identifiers come."""

    def __missing__(self, ident: str) -> frozenset[str]:
        words = _with_singulars(set(_split(ident))) & keyword_tables().concept_vocabulary
        found = frozenset(words) if words else _NO_WORDS
        if len(self) >= 65536:
            self.clear()
        self[ident] = found
        return found


_NO_WORDS: frozenset[str] = frozenset()
_IDENT_CONCEPT_WORDS = _ConceptWords()


def _text_concept_words(text: str) -> set[str]:
    """``_word_set(text)`` restricted to words a concept names: all ``contains`` needs of a text."""
    return set().union(*map(_IDENT_CONCEPT_WORDS.__getitem__, set(_IDENTIFIER.findall(text))))


@lru_cache(maxsize=1024)
def _import_words(imports: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_word_set("\n".join(imports)))


@lru_cache(maxsize=256)
def _import_concept_words(imports: tuple[str, ...]) -> frozenset[str]:
    return _import_words(imports) & keyword_tables().concept_vocabulary


# -- per-file facts ---------------------------------------------------------------------------------------------


class _FileFacts:
    """What every chunk of a file shares, found once: its roles by path and imports, its import words, whether it is
    a test file, and where the role and async patterns match in its text.

    For a chunk whose text is a run of whole lines of the file's text (``region``), a pattern that ``_local``
    accepts matches in the chunk exactly when the file holds a match inside that run: a match found inside it
    says yes; none touching it says no (the scan tried every position of the run); only a match across its edge
    leaves the chunk to be searched itself, as is any other chunk."""

    __slots__ = ("path", "roles", "import_words", "test_path", "text", "line_starts", "_spans")

    def __init__(self, path: str, imports: list[str], text: str = "", line_starts: list[int] | None = None):
        imports_key = tuple(imports)
        self.path = path
        self.roles = _file_roles(path, imports_key)
        self.import_words = _import_concept_words(imports_key)
        self.test_path = keyword_tables().test_paths.search(path) is not None
        self.text = text
        self.line_starts = line_starts or []
        self._spans: dict[str, tuple[list[int], list[int], list[int]] | None] = {}

    def region(self, chunk: Chunk) -> tuple[int, int] | None:
        """Where the chunk's text is in the file's text, when it is exactly lines ``start_line``..``end_line``."""
        starts = self.line_starts
        if not (0 < chunk.start_line <= chunk.end_line <= len(starts)):
            return None
        begin = starts[chunk.start_line - 1]
        end = starts[chunk.end_line] - 1 if chunk.end_line < len(starts) else len(self.text)
        if end - begin == len(chunk.text) and self.text.startswith(chunk.text, begin):
            return begin, end
        return None

    def matches(self, which: str, text: str, region: tuple[int, int] | None) -> bool:
        """Whether the ``which`` pattern (``role`` or ``async``) matches in ``text``, the text of ``region``."""
        table = keyword_tables()
        scans = table.role_scans if which == "role" else table.async_scans
        spans = self._spans.get(which, False) if region is not None else None
        if spans is False:
            spans = self._spans[which] = self._find(scans, which)
        if spans is not None:
            starts, ends, reach = spans
            begin, end = region
            i = bisect.bisect_left(starts, begin)
            across = i > 0 and reach[i - 1] > begin  # a match starting before the run reaches into it
            while i < len(starts) and starts[i] < end:
                if ends[i] <= end:
                    return True
                across = True
                i += 1
            if not across:
                return False
        return any(scan.search(text) is not None for scan in scans)

    def _find(self, scans: tuple[re.Pattern, ...], which: str) -> tuple[list[int], list[int], list[int]] | None:
        """Every match of every scan in the file's text: starts, ends and the farthest end so far, by start."""
        local = keyword_tables().role_patterns_local if which == "role" else keyword_tables().async_pattern_local
        if not local:
            return None
        found = sorted(m.span() for scan in scans for m in scan.finditer(self.text))
        if any(start == end for start, end in found):
            return None  # an empty match sits between characters: leave every chunk to its own search
        return [m[0] for m in found], [m[1] for m in found], list(accumulate((m[1] for m in found), max))


def _file_facts(chunk: Chunk, ctx: FileContext) -> _FileFacts:
    if chunk.path != ctx.path:  # a caller's chunk from elsewhere: its own path decides, and nothing is shared
        return _FileFacts(chunk.path, ctx.imports)
    facts = ctx.memo.get("enrich")
    if facts is None or facts.text is not ctx.text or facts.line_starts is not ctx.line_starts:
        facts = ctx.memo["enrich"] = _FileFacts(ctx.path, ctx.imports, ctx.text, ctx.line_starts)
    return facts


# -- tags -------------------------------------------------------------------------------------------------------


def tags(chunk: Chunk, ctx: FileContext) -> dict:
    """The chunk's tags: its own (``http_method``/``http_path`` from the chunker win) plus the derived facts.

    - ``is_api_endpoint``: the chunker found an HTTP route on it (``http_path`` is set).
    - ``has_async``: async/await, goroutines, promises, futures... in the text (patterns in ``keywords.toml``).
    - ``is_test``: a test file by path (``tests/``, ``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``*Test.java``...)
      or a test symbol (``test_*``, ``Test*``; functions named ``it``, ``describe``).
    - ``priority``: 10 for endpoints and methods, 5 for classes, structs, interfaces, traits, impls, enums and
      groups of tiny symbols of different kinds, else 0.
    """
    facts = _file_facts(chunk, ctx)
    return _tags(chunk, facts, facts.region(chunk))


def _tags(chunk: Chunk, facts: _FileFacts, region: tuple[int, int] | None) -> dict:
    table = keyword_tables()
    out = dict(chunk.tags)
    endpoint = bool(out.get("http_path"))
    out["is_api_endpoint"] = endpoint
    out["has_async"] = facts.matches("async", chunk.text, region)
    # A merged chunk has no one name: its members' names count (a group of tiny test functions is test code).
    names = [chunk.name, *(_QUALIFIER.split(s)[-1] for s in chunk.symbols)] if chunk.symbols else [chunk.name]
    out["is_test"] = bool(
        facts.test_path
        or any(table.test_symbols.match(name) for name in names)
        or (chunk.kind == "function" and any(table.test_calls.match(name) for name in names))
    )
    out["priority"] = 10 if endpoint or chunk.kind == "method" else 5 if chunk.kind in _PRIORITY_5_KINDS else 0
    return out


# -- the header -------------------------------------------------------------------------------------------------


def header(chunk: Chunk, ctx: FileContext, text_tokens: int) -> str:
    """The [META] lines for ``chunk``, trimmed to stay under 20% of the tokens of header plus text.

    ``text_tokens`` is the cl100k token count of ``chunk.text``. While the header has 25% of that or more (20% of
    the sum), it is trimmed: the Doc is shortened, then dropped, then Contains, Signature, Language and Role go,
    and finally it becomes one line, ``[META] File: a.py | Symbol: Function f`` (with ``| Endpoint: GET /x``
    after the File for a route handler: the route is the fact most worth keeping).

    Floor: that one line is always kept, even when it alone is over 20% (a tiny chunk, a long path). The header is
    counted line by line with memoized counts (``_fits``).
    """
    facts = _file_facts(chunk, ctx)
    return _header(chunk, ctx, text_tokens, facts, facts.region(chunk))


def _header(chunk: Chunk, ctx: FileContext, text_tokens: int, facts: _FileFacts,
            region: tuple[int, int] | None) -> str:
    """``header``, computing Role and Contains only when some form of the header that holds them can fit.

    Every form before the last trim holds the File, Endpoint and symbol lines; every form that holds a Role line
    also holds those, and every form that holds a Contains line also holds the form reached once Doc and Contains
    are dropped. A header's count is the sum of its lines' (``_fits``), so when the smaller form is over the budget,
    so is each larger one, and the fact they would add cannot change the result."""
    budget = (text_tokens - 1) // 4  # the most header tokens with 4 * header < text
    fields = {"File": chunk.path, "Endpoint": _endpoint(chunk), **_label(chunk)}
    floor = "[META] " + " | ".join(f"{key}: {value}" for key, value in fields.items() if value)
    if not _fits(floor, budget, floor_head=f"[META] File: {chunk.path}" if chunk.path else ""):
        return floor  # every longer form holds the floor's words too: none can fit, so skip building them
    if not _fits(_render(fields), budget):
        return _first_fitting(fields, budget, floor)
    endpoint = bool(fields["Endpoint"])
    endpoints = ctx.endpoints[:_ENDPOINTS_MAX] if chunk.kind == "summary" else []
    pattern_hit = facts.matches("role", chunk.text, region)
    fields["Language"] = chunk.language
    fields["Role"] = ", ".join(_roles_from(facts.roles, chunk.decorators, chunk.text, endpoint=endpoint,
                                           pattern_hit=pattern_hit))
    fields["Endpoints"] = ", ".join(f"{e.method} {e.path}" for e in endpoints)
    fields["Signature"] = _clip(" ".join(chunk.signature.split()), _SIGNATURE_CHARS)
    with_contains = _fits(_render(fields), budget)
    fields["Doc"] = _first_sentence(chunk.doc)
    fields["Contains"] = ", ".join(_concepts(
        _text_concept_words(chunk.text) | _text_concept_words(chunk.name or chunk.symbol) | facts.import_words
    )) if with_contains else ""
    return _first_fitting(fields, budget, floor)


def _first_fitting(fields: dict[str, str], budget: int, floor: str) -> str:
    """The full header, else the first trimmed form (``_TRIM_STEPS``) that fits ``budget``, else ``floor``."""
    text = _render(fields)
    if _fits(text, budget):
        return text
    for name, keep in _TRIM_STEPS:
        value = fields.get(name, "")
        if not value:
            continue
        fields[name] = _shorten(name, value, keep)
        if fields[name] == value:
            continue
        text = _render(fields)
        if _fits(text, budget):
            return text
    return floor


def tags_and_header(chunk: Chunk, ctx: FileContext, text_tokens: int) -> tuple[dict, str]:
    """``tags(chunk, ctx)`` and then ``header`` of the chunk with those tags, sharing the work they have in common."""
    facts = _file_facts(chunk, ctx)
    region = facts.region(chunk)
    chunk.tags = _tags(chunk, facts, region)
    return chunk.tags, _header(chunk, ctx, text_tokens, facts, region)


def _fits(header_text: str, budget: int, floor_head: str = "") -> bool:
    """Whether a header has at most ``budget`` tokens, counted line by line.

    cl100k's pre-tokenizer splits at line breaks, so a header's count is its lines' counts plus one per break; the
    lines (File, Language, Role...) repeat from chunk to chunk and trimmed variant to variant, and ``tokens.count``
    remembers them, so most headers cost no encoding at all.

    ``floor_head`` is the File line a one-line floor starts with: no piece runs from the path's last character into
    the `` |`` after it (unless that character is a space), so the floor has at least that line's tokens, and a
    File line over the budget (the same on every chunk of a file, counted once) answers without counting the rest."""
    if len(header_text.encode()) <= budget:
        return True  # a token is at least one byte: no count needed
    if floor_head and not floor_head[-1].isspace() and tokens.count(floor_head) > budget:
        return False
    return sum(tokens.count(line) + 1 for line in header_text.split("\n")) - 1 <= budget


PATH_STEM_REPEAT = 2  # the file stem's words, this many times in a chunk's BM25 text
PATH_DIRS = 3  # the last directories whose words are in a chunk's BM25 text


def path_text(path: str) -> str:
    """The words a chunk's BM25 text adds for its file's path: the stem and its split words ``PATH_STEM_REPEAT``
    times, then the last ``PATH_DIRS`` directory names and their split words (``src/net/HttpClient.java`` ->
    ``httpclient http client httpclient http client net``).

    A file is often named for what it holds (``ObjectUtils.java``, ``transfer.c``, ``Session.swift``); the [META]
    header writes the path once, as one token per component, so a question's plain words ("object", "transfer")
    never met it."""
    pure = PurePosixPath(path)
    stem_words = [w for part in pure.stem.split(".") if part for w in _path_part_words(part)]
    dirs = [d for d in pure.parent.parts if d not in ("", ".", "/")][-PATH_DIRS:] if PATH_DIRS else []
    dir_words = [w for d in dirs for w in _path_part_words(d)]
    return " ".join(stem_words * PATH_STEM_REPEAT + dir_words)


def _path_part_words(part: str) -> list[str]:
    words = _split(part)
    whole = part.lower()
    return list(dict.fromkeys([whole, *words])) if len(words) > 1 or (words and words[0] != whole) else list(words)


def bm25_text(chunk: Chunk) -> str:
    """What BM25 reads of a chunk: its search text, the words of its path (``path_text``) and every identifier of
    its text split into words ("verify token" finds ``verifyToken``)."""
    words = " ".join(identifier_words(chunk.text, limit=400))
    return f"{chunk.search_text}\n{path_text(chunk.path)}\n{words}"


def search_text(chunk: Chunk, ctx: FileContext, text_tokens: int) -> str:
    """What the embedder and BM25 read: the [META] header, a newline, then the chunk's text."""
    return header(chunk, ctx, text_tokens) + "\n" + chunk.text


def _endpoint(chunk: Chunk) -> str:
    http_path = chunk.tags.get("http_path", "")
    return f"{chunk.tags.get('http_method') or 'ANY'} {http_path}" if http_path else ""


def _label(chunk: Chunk) -> dict[str, str]:
    """The line that says which symbol or section this is, keyed Symbol, Symbols or Section."""
    if chunk.kind in ("heading", "content"):
        section = chunk.symbol if chunk.kind == "heading" else chunk.parent or chunk.title
        return {"Section": section} if section else {}
    if chunk.kind == "config":
        return {"Section": chunk.title} if chunk.title else {}
    if chunk.kind == "summary":
        return {"Symbol": "file summary"}
    if len(chunk.symbols) >= 2:
        return {"Symbols": ", ".join(chunk.symbols)}
    if chunk.kind in ("module", "window", "error") or not (chunk.name or chunk.symbol):
        return {}
    name = chunk.name or _QUALIFIER.split(chunk.symbol)[-1]
    words = _split(name)
    label = f"{chunk.kind.capitalize()} {name}"
    if len(words) >= 2:
        label += f" [{' '.join(words)}]"
    if chunk.parent:
        parent_kind = chunk.tags.get("parent_kind", "")
        label += f" (in {parent_kind} {chunk.parent})" if parent_kind else f" (in {chunk.parent})"
    if chunk.tags.get("macro"):
        label += f" (in {chunk.tags['macro']})"  # defined inside a macro invocation: `Struct Lines (in cfg_io_util!)`
    return {"Symbol": label}


def _render(fields: dict[str, str]) -> str:
    order = ("File", "Language", "Role", "Endpoint", "Endpoints", *_LABEL_FIELDS, "Signature", "Doc", "Contains")
    return "\n".join(f"[META] {key}: {fields[key]}" for key in order if fields.get(key))


def _shorten(name: str, value: str, keep: int) -> str:
    if keep == 0:
        return ""
    if name in _LIST_FIELDS:
        items = value.split(", ")
        return value if len(items) <= keep else ", ".join(items[:keep]) + ", …"
    return _clip(value, keep)


def _first_sentence(doc: str) -> str:
    first = doc.strip().split("\n", 1)[0]
    end = _SENTENCE_END.search(first)
    return _clip(first[: end.start()] if end else first, _DOC_CHARS)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"
