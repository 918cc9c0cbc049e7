"""The language table: file name -> grammar -> query files.

Everything a grammar needs to say about a language lives in ``languages.toml`` and ``queries/*.scm``; this module only
loads them. Files no grammar reads are labelled by ``text-types.toml`` (``text_type``). Grammars and compiled queries
are created lazily, once per process, so the CLI starts fast and worker processes pay only for the languages they meet.

A query file may start with ``; inherits: ecma`` (several names: ``; inherits: ecma,jsx``): the text of
``ecma-<kind>.scm`` (``<kind>`` is the file's own, ``tags`` or ``chunks``), itself resolved the same way, is read
before its own, as nvim-treesitter reads its query files; a file inherited twice is read once. Languages that share
node names share patterns that way.

Layer: above the bottom (``tomlfile``); below ``chunk`` (``parse`` reads the queries) and ``store.relations``.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import PurePosixPath

from localidx import tomlfile

_INHERITS = re.compile(r";+\s*inherits\s*:\s*([\w,\s]+?)\s*")


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    extensions: tuple[str, ...]
    filenames: tuple[str, ...]
    grammar: str
    queries: tuple[str, ...] = field(default=())
    conditionals: tuple[str, ...] = field(default=())  # open, switch, close line patterns of a preprocessor's blocks

    def ts_language(self):
        """The tree-sitter Language object (cached)."""
        return _ts_language(self.grammar)

    def query_source(self) -> str:
        """The concatenated text of this language's query files, each after the files it inherits (each file once)."""
        files = dict.fromkeys(name for query in self.queries for name in _inherited(query))
        return "\n".join(_query_text(name) for name in files)

    def query(self):
        """The compiled tree-sitter Query (cached per language)."""
        return _compiled_query(self.name)


def _queries_dir():
    return resources.files("localidx.languages").joinpath("queries")


@lru_cache(maxsize=None)
def _query_text(name: str) -> str:
    return _queries_dir().joinpath(name).read_text(encoding="utf-8")


def _inherited(name: str, inheriting: tuple[str, ...] = ()) -> list[str]:
    """``name`` after the files its first line inherits, depth first, each file once."""
    if name in inheriting:
        raise ValueError(f"query files inherit each other in a loop: {' -> '.join([*inheriting, name])}")
    directive = _INHERITS.fullmatch(_query_text(name).split("\n", 1)[0])
    files: list[str] = []
    if directive is not None:
        kind = name.rsplit("-", 1)[1]
        for parent in filter(None, (p.strip() for p in directive.group(1).split(","))):
            files += [f for f in _inherited(f"{parent}-{kind}", (*inheriting, name)) if f not in files]
    return [*files, name]


@lru_cache(maxsize=None)
def _ts_language(grammar: str):
    import tree_sitter

    module_name, _, func = grammar.partition(":")
    module = importlib.import_module(module_name)
    with warnings.catch_warnings():
        # A grammar wheel built with older bindings (tree-sitter-perl 2.0) returns its pointer as an int, which
        # tree-sitter 0.26 still takes, with a DeprecationWarning a user can do nothing about.
        warnings.filterwarnings("ignore", "int argument support is deprecated", DeprecationWarning)
        return tree_sitter.Language(getattr(module, func or "language")())


@lru_cache(maxsize=None)
def _compiled_query(name: str):
    import tree_sitter

    spec = LANGUAGES[name]
    return tree_sitter.Query(spec.ts_language(), spec.query_source())


def _load_table() -> dict[str, LanguageSpec]:
    raw = tomlfile.package_table("localidx.languages", "languages.toml")
    available = {entry.name for entry in _queries_dir().iterdir()}
    table = {}
    for name, entry in raw.items():
        queries = entry.get("queries") or [q for q in (f"{name}-tags.scm", f"{name}-chunks.scm") if q in available]
        table[name] = LanguageSpec(
            name=name,
            extensions=tuple(e.lower() for e in entry.get("extensions", ())),
            filenames=tuple(entry.get("filenames", ())),
            grammar=entry["grammar"],
            queries=tuple(queries),
            conditionals=tuple(entry.get("conditionals", ())),
        )
    return table


LANGUAGES: dict[str, LanguageSpec] = _load_table()
_BY_FILENAME = {fn: spec for spec in LANGUAGES.values() for fn in spec.filenames}
_BY_EXTENSION = {ext: spec for spec in LANGUAGES.values() for ext in spec.extensions}
_ALIASES = {alias.lower(): name for name, entry in tomlfile.package_table("localidx.languages", "languages.toml").items()
            for alias in entry.get("aliases", ())}


TEXT = "text"  # the label of a file no grammar reads and text-types.toml does not name


@lru_cache(maxsize=1)
def _text_types() -> tuple[frozenset[str], dict[str, str]]:
    raw = tomlfile.package_table("localidx.languages", "text-types.toml")
    return frozenset(e.lower() for e in raw.get("extensions", ())), dict(raw.get("filenames", {}))


def text_type(path: str) -> str:
    """The label of a file no grammar reads: its type when ``text-types.toml`` names it (``sh``, ``sql``, ``html``,
    ``dockerfile``, ...), else ``"text"`` — never a made-up name from an unknown ending (``py.typed`` is text)."""
    extensions, filenames = _text_types()
    pure = PurePosixPath(path)
    if pure.name in filenames:
        return filenames[pure.name]
    suffix = pure.suffix[1:].lower()
    return suffix if suffix in extensions else TEXT


def text_labels() -> frozenset[str]:
    """Every label ``text_type`` can give besides ``text``."""
    extensions, filenames = _text_types()
    return extensions | frozenset(filenames.values())


def alias_of(name: str) -> str | None:
    """The language an ``aliases`` entry of ``languages.toml`` names (lowercase), or None."""
    return _ALIASES.get(name.lower())


def language_for_path(path: str) -> LanguageSpec | None:
    """The grammar-backed language for a file path, or None when no grammar reads it."""
    pure = PurePosixPath(path)
    if pure.name in _BY_FILENAME:
        return _BY_FILENAME[pure.name]
    suffix = pure.suffix[1:].lower()
    return _BY_EXTENSION.get(suffix) if suffix else None
