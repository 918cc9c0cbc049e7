"""Query transforms: what the pipeline reads out of a question before it searches.

Place in the flow: retrieve (after the guard, before search). Pure functions over text; the optional LLM variants
(``localidx.llm``) are called by ``localidx.retrieve.context``, never from here.

- ``analyze``: identifiers (``verifyToken``, ``store.save``, ``snake_case``, anything in backticks), quoted phrases,
  keywords (words minus English stopwords and language keywords), the languages a question names, whether it is about
  tests, whether it looks like English.
- ``standalone``: a follow-up ("and who calls it?") made standalone without an LLM, by carrying the identifiers and
  key terms of the most recent turns that have any.
- ``sub_queries``: the extra queries multi-query runs: identifier forms, quoted phrases, the keywords alone.

The word lists live in ``localidx/data/query.toml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from localidx.chunk.enrich import split_identifier

_DATA = Path(__file__).resolve().parent.parent / "data" / "query.toml"
_WORD = re.compile(r"[^\W_][\w'#+-]*", re.UNICODE)
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::|->)[A-Za-z_$][A-Za-z0-9_$]*)*(?:\(\))?")
_QUOTED = re.compile(r'"([^"]{2,200})"|“([^”]{2,200})”|`([^`]{1,200})`|(?<!\w)\'([^\']{2,200})\'(?!\w)')
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


@dataclass(frozen=True)
class QueryData:
    follow_up: frozenset[str]
    test_words: frozenset[str]
    test_paths: tuple[re.Pattern, ...]
    role_paths: tuple[tuple[str, tuple[re.Pattern, ...]], ...]  # (role, patterns), tried in order
    doc_languages: frozenset[str]
    doc_words: frozenset[str]
    config_languages: frozenset[str]
    config_words: frozenset[str]
    languages: dict[str, str]
    foreign: dict[str, frozenset[str]]
    english: frozenset[str]
    name_keywords: dict[str, str]  # "class" -> "type", "def" -> "function", "const" -> "value"
    non_definition_kinds: frozenset[str]
    declaration_forms: tuple[str, ...]  # regular expressions with {name} (see query.toml)
    name: re.Pattern  # a name as a name query takes it: ``Client.send``, ``push!``, ``foldl'``, ``Remove-Item``


@lru_cache(maxsize=1)
def data() -> QueryData:
    from localidx.chunk.enrich import keyword_tables
    from localidx.config import read_toml

    raw = read_toml(_DATA)
    return QueryData(
        follow_up=frozenset(raw["follow_up_words"]), test_words=frozenset(raw["test_words"]),
        test_paths=tuple(re.compile(p) for p in raw["test_paths"]),
        role_paths=tuple((role, tuple(re.compile(p) for p in raw[f"{role}_paths"]))
                         for role in ("test", "doc", "generated", "example")),
        doc_languages=frozenset(raw["doc_languages"]), doc_words=frozenset(raw["doc_words"]),
        config_languages=frozenset(raw["config_languages"]), config_words=frozenset(raw["config_words"]),
        languages=dict(raw["languages"]),
        foreign={lang: frozenset(words) for lang, words in raw["foreign_stopwords"].items()},
        english=keyword_tables().stopwords,
        name_keywords={word: group for group in ("type", "function", "value")
                       for word in raw[f"{group}_keywords"]},
        non_definition_kinds=frozenset(raw["non_definition_kinds"]),
        declaration_forms=tuple(
            form.replace("{keywords}", "|".join(raw["declaration_keywords"]))
            .replace("{value_keywords}", "|".join(raw["declaration_value_keywords"]))
            .replace("{modifiers}", "|".join(raw["declaration_modifiers"]))
            for form in raw["declaration_forms"]),
        name=_name_pattern(raw["name_inner_characters"], raw["name_final_characters"]),
    )


def _name_pattern(inner: str, final: str) -> re.Pattern:
    """One to several components joined by ``_NAME_SEPARATOR``'s separators; a component is an identifier that may
    hold ``inner`` characters between word characters and end in ``final`` ones."""
    component = r"[A-Za-z_$][\w$]*"
    if inner:
        component += rf"(?:[{re.escape(inner)}][\w$]+)*"
    if final:
        component += rf"[{re.escape(final)}]*"
    return re.compile(rf"{component}(?:(?:{_NAME_SEPARATOR.pattern}){component})*")


@dataclass
class Analysis:
    identifiers: list[str] = field(default_factory=list)  # as written: "verifyToken", "Store.save"
    phrases: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    languages: set[str] = field(default_factory=set)  # localidx language ids the question names
    about_tests: bool = False
    about_docs: bool = False  # names docs, examples or built files (``path_role``'s other roles)
    about_config: bool = False  # names a kind of config or build file (``path_role``'s "config")
    english: bool = True
    foreign_language: str = ""


_MEMBER = re.compile(r"\.|::|->")


def last_component(name: str) -> str:
    """``Store.save`` -> ``save``; also ``a::b`` and ``a->b``."""
    return _MEMBER.split(name)[-1]


def looks_like_identifier(token: str) -> bool:
    bare = token.rstrip("()")
    return ("_" in bare.strip("_") or bool(_CAMEL.search(bare)) or "." in bare or "::" in bare or "->" in bare
            or token.endswith("()"))


def analyze(question: str) -> Analysis:
    d = data()
    out = Analysis()
    for match in _QUOTED.finditer(question):
        phrase = next(g for g in match.groups() if g)
        if match.group(3) and " " not in phrase.strip():  # `name` in backticks is an identifier
            out.identifiers.append(phrase.strip())
        else:
            out.phrases.append(phrase.strip())
    unquoted = _QUOTED.sub(" ", question)
    for token in _IDENT.findall(unquoted):
        if looks_like_identifier(token) and token.rstrip("()") not in out.identifiers:
            out.identifiers.append(token.rstrip("()"))
    words = [w.lower() for w in _WORD.findall(question)]
    seen: set[str] = set()
    for word in words:
        if len(word) >= 3 and word not in d.english and word not in seen and not word.isdigit():
            seen.add(word)
            out.keywords.append(word)
    out.languages = {d.languages[w] for w in words if w in d.languages and w not in ("one", "go") or w == "golang"}
    if re.search(r"\b(in|with|using)\s+go\b|\bgo\s+(code|file|package|function)", question, re.IGNORECASE):
        out.languages.add("go")
    out.about_tests = any(w in d.test_words for w in words)
    out.about_docs = any(w in d.doc_words for w in words)
    out.about_config = any(w in d.config_words for w in words)
    out.english, out.foreign_language = _english(question, words)
    return out


def _english(text: str, words: list[str]) -> tuple[bool, str]:
    letters = [c for c in text if c.isalpha()]
    if letters:
        non_latin = sum(1 for c in letters if ord(c) > 0x24F)
        if non_latin / len(letters) > 0.3:
            return False, "non-latin"
    d = data()
    english = sum(1 for w in words if w in d.english)
    best, best_hits = "", 0
    for lang, stop in d.foreign.items():
        hits = sum(1 for w in words if w in stop and w not in d.english)
        if hits > best_hits:
            best, best_hits = lang, hits
    if best_hits >= 2 and best_hits > english:
        return False, best
    return True, ""


# A lone colon between two names is a qualifier too: PowerShell's scopes (``script:Name``), Lisp's packages. Not
# in a route (``/user/:id``): there it follows no word character.
_NAME_SEPARATOR = re.compile(r"\.|::|#|->|(?<=\w):(?=[A-Za-z_$])")
_CALL_TAIL = re.compile(r"\(.*\)?$")
_MAX_NAMES = 3


@dataclass(frozen=True)
class NameQuery:
    """A query that is a name or a few: each name's components (``httpx.Client.send`` -> ("httpx", "Client",
    "send")), and the kind of definition a leading keyword asks for ("type", "function", "value", or "")."""

    names: tuple[tuple[str, ...], ...]
    wants: str = ""


def fold_name(name: str) -> str:
    """A name without case and separators: ``open_dataset``, ``OpenDataset`` and ``opendataset`` fold alike."""
    return name.replace("_", "").replace("-", "").replace("$", "").lower()


def name_parts(name: str) -> tuple[str, ...]:
    """A qualified name's components (``a.b``, ``a::b``, ``A#b``, ``a->b``, ``script:a``)."""
    return tuple(part for part in _NAME_SEPARATOR.split(name) if part)


def name_query(query: str) -> NameQuery | None:
    """The names a query consists of, or None for a question or a report.

    A name query is one to three names, each optionally qualified and optionally followed by a call's parentheses
    (``open_dataset(``, ``f()``), after at most one keyword a person types before a name (``class Response``,
    ``def open_dataset``, ``fn parse``). Several names count only when each is written as code (qualified, with an
    underscore or inner capitals): "where are redirects" is a question, not three names.
    """
    words = query.split()
    if not words or len(words) > _MAX_NAMES + 1:
        return None
    wants = ""
    keywords = data().name_keywords
    if len(words) > 1 and words[0].lower() in keywords:
        wants = keywords[words[0].lower()]
        words = words[1:]
    if len(words) > _MAX_NAMES:
        return None
    names = []
    for word in words:
        word = _CALL_TAIL.sub("", word).rstrip(",;:")
        if not data().name.fullmatch(word):
            return None
        names.append(word)
    if len(names) > 1 and not all(looks_like_identifier(n) or _NAME_SEPARATOR.search(n) for n in names):
        return None
    return NameQuery(names=tuple(name_parts(n) for n in names), wants=wants)


def is_test_path(path: str) -> bool:
    return any(p.search(path) for p in data().test_paths)


@lru_cache(maxsize=1 << 16)
def path_role(path: str, language: str = "") -> str:
    """What a file holds besides the code itself: "test", "doc", "generated", "example", "config" (a config, build
    or data file: ``CMakeLists.txt``, ``package.json``), or "" for code. Remembered per path: a hybrid search asks it
    for every candidate (about 4 ms of a query at 100k chunks)."""
    d = data()
    for role, patterns in d.role_paths:
        if any(p.search(path) for p in patterns):
            return role
    if language in d.doc_languages:
        return "doc"
    return "config" if language in d.config_languages else ""


def is_follow_up(question: str, analysis: Analysis) -> bool:
    words = {w.lower() for w in _WORD.findall(question)}
    own_terms = len(analysis.identifiers) + len([k for k in analysis.keywords if k not in data().follow_up])
    return bool(words & data().follow_up) and own_terms <= 3 or own_terms == 0


def standalone(question: str, turns: list[str], limit: int = 6) -> tuple[str, list[str]]:
    """(standalone question, carried terms): the question plus identifiers and key terms of the most recent turns
    (newest first) that it does not already contain; unchanged when it is not a follow-up or nothing is carried."""
    analysis = analyze(question)
    if not turns or not is_follow_up(question, analysis):
        return question, []
    have = {t.lower() for t in analysis.identifiers + analysis.keywords}
    carried: list[str] = []
    for turn in reversed(turns):
        earlier = analyze(turn)
        for term in earlier.identifiers + earlier.phrases + earlier.keywords[:4]:
            if term.lower() not in have and len(carried) < limit:
                have.add(term.lower())
                carried.append(term)
        if earlier.identifiers or earlier.keywords:
            break  # the most recent turn with terms of its own is what the follow-up refers to
    if not carried:
        return question, []
    return f"{question} ({' '.join(carried)})", carried


def sub_queries(question: str, analysis: Analysis, count: int) -> list[str]:
    """Up to ``count`` queries besides the question itself, most specific first: each identifier with its split
    words, each quoted phrase, then the keywords alone."""
    out: list[str] = []

    def add(text: str) -> None:
        text = text.strip()
        if text and text.lower() != question.lower() and text.lower() not in (q.lower() for q in out):
            out.append(text)

    for ident in analysis.identifiers:
        words = " ".join(split_identifier(ident))
        add(f"{ident} {words}" if words and words != ident.lower() else ident)
    for phrase in analysis.phrases:
        add(phrase)
    if len(analysis.keywords) >= 2:
        add(" ".join(analysis.keywords))
    return out[:max(0, count)]
