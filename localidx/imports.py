"""Import statements read once: which modules a statement names, from its text alone.

Place in the flow: the bottom layer, beside records.py. ``localidx.chunk.parse`` captures each import statement's text
(the ``@import`` captures of the query files); two steps read it: [META] (``localidx.chunk.enrich``: a library the file
imports gives it a Role) and the call relations (``localidx.store.relations``: a called name resolves to a
definition in a file the caller imports). Both read a statement through ``imported_modules``, so they agree on what
it names.

How a statement is read, in order:

- Quoted names win: in double, single or back quotes (Go's raw strings) or in ``<>``, they are paths (JavaScript,
  Go, C includes, Ruby requires, PHP). ``./x``, ``../x``, ``.`` and ``..`` are relative to the importing file's
  directory. A template string with a substitution (``${...}``) names no module.
- Python's ``from X import a, b``: leading dots make X relative (one dot is the file's own package, each further dot
  one package up); ``a`` and ``b`` are names imported from X.
- Otherwise the first name of each comma-separated clause after the keyword (``import a.b, c``, ``use a::b::C``,
  ``using A.B;``, ``import static a.B.c;``), braces left out (``use std::{fmt, io}`` names ``std``). Its last part
  may be an item of a module rather than a module. ``package`` declares a module and imports nothing.

Pure and standard library only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

_QUOTED = re.compile(r"""["'<`]([^"'<>`\s]+)[>"'`]""")
_FROM_IMPORT = re.compile(r"^\s*from\s+(\.*[\w.]*)\s+import\b\s*(.*)$", re.DOTALL)
_IMPORT_HEAD = re.compile(
    r"^\s*(?:import|use|using|require|include|extern\s+crate|mod)\s+(?:static\s+|type\s+)?(.*)$", re.DOTALL
)
_MODULE_NAME = re.compile(r"[@\w][\w.:\\/@-]*")
_BRACED = re.compile(r"\{[^}]*\}")
_SEPARATORS = re.compile(r"::|[.\\/]")


@dataclass(frozen=True, slots=True)
class Module:
    """One module an import statement names."""

    parts: tuple[str, ...]  # its components as written: a.b.c, a::b::c, a/b/c and a\b\c are ("a", "b", "c")
    up: int | None = None  # a relative name: how many directories up from the importing file's it starts; else None
    path: bool = False  # a quoted path: components are path segments, and the last may carry a file extension
    item: bool = False  # the last part may name an item of a module (use a::b::C, import a.b.C) rather than one
    names: tuple[str, ...] = ()  # names imported from it (from a import b, c): submodules or items

    def resolve(self, directory: Sequence[str]) -> list[str] | None:
        """The components of the module for a file in ``directory`` (its path's components): a relative name
        joined to it, any other as written; None when a relative name climbs out of the repository."""
        if self.up is None:
            return list(self.parts)
        if self.up > len(directory):
            return None
        return [*directory[: len(directory) - self.up], *self.parts]


@lru_cache(maxsize=8192)
def imported_modules(statement: str) -> tuple[Module, ...]:
    """The modules an import statement's text names, in the order written (see the module docstring)."""
    quoted = _QUOTED.findall(statement)
    if quoted:
        return tuple(_quoted(name) for name in quoted if "${" not in name)
    from_import = _FROM_IMPORT.match(statement)
    if from_import:
        module, imported = from_import.groups()
        dots = len(module) - len(module.lstrip("."))
        names = (_MODULE_NAME.match(clause.strip(" \t\n()\\")) for clause in imported.split(","))
        return (Module(parts=tuple(p for p in module[dots:].split(".") if p), up=dots - 1 if dots else None,
                       names=tuple(n.group() for n in names if n is not None)),)
    head = _IMPORT_HEAD.match(statement)
    if head is None:
        return ()
    names = (_MODULE_NAME.match(clause.strip()) for clause in _BRACED.sub("", head.group(1)).split(","))
    return tuple(Module(parts=tuple(p for p in _SEPARATORS.split(n.group()) if p), item=True)
                 for n in names if n is not None)


def _quoted(name: str) -> Module:
    if name.startswith(("./", "../")) or name in (".", ".."):
        parts = posixpath.normpath(name).split("/")
        up = parts.count("..")  # normpath leaves ".." only at the start
        return Module(parts=tuple(p for p in parts[up:] if p != "."), up=up, path=True)
    return Module(parts=tuple(p for p in name.replace("\\", "/").split("/") if p), path=True)
