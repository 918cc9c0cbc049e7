"""File summary chunks for source files: what a file holds, without any code body.

Made for files with at least ``settings.summary_min_symbols`` symbols and for files whose path names an API or routes
(``api``, ``route`` as a word of the path). They answer "where is X handled" questions that no single symbol chunk
answers: path, language, module docstring, symbols grouped by kind with the line that declares each (first few, then
"... and N more") and the HTTP endpoints as ``METHOD /path -> handler``. Its span is the file's head (``head_end``),
not the whole file.
"""

from __future__ import annotations

import re

from localidx.chunk.parse import ParsedFile
from localidx.config import Settings
from localidx.records import Chunk
from localidx.text import tokens

_SHOWN_PER_KIND = 8
_SHOWN_ENDPOINTS = 30
_PATH_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_API_WORDS = ("api", "apis", "route", "routes", "router", "routing")
_KIND_TITLES = {
    "class": "Classes", "struct": "Structs", "interface": "Interfaces", "enum": "Enums", "trait": "Traits",
    "impl": "Impl blocks", "module": "Modules", "function": "Functions", "method": "Methods",
}


def wants_summary(path: str, parsed: ParsedFile, settings: Settings) -> bool:
    """Whether a source file gets a summary chunk."""
    if len(parsed.symbols) >= settings.summary_min_symbols:
        return True
    words = {w.lower() for w in _PATH_WORDS.findall(path)}
    return any(w in words for w in _API_WORDS)


def _render(path: str, parsed: ParsedFile, per_kind: int, endpoints: int) -> str:
    out = [f"File: {path}", f"Language: {parsed.language}"]
    if parsed.module_doc:
        out.append(f"Module: {parsed.module_doc.splitlines()[0][:300]}")
    by_kind: dict[str, list[str]] = {}
    for sym in parsed.symbols:
        by_kind.setdefault(sym.kind, []).append(f"{sym.qualified} ({sym.name_line})")
    for kind, title in _KIND_TITLES.items():
        names = by_kind.get(kind)
        if not names:
            continue
        shown = ", ".join(names[:per_kind])
        more = f" ... and {len(names) - per_kind} more" if len(names) > per_kind else ""
        out.append(f"{title} ({len(names)}): {shown}{more}".replace(": ... and", ": ..."))
    if parsed.endpoints and endpoints:
        out.append("Endpoints:")
        out.extend(f"  {e.render()}" for e in parsed.endpoints[:endpoints])
        if len(parsed.endpoints) > endpoints:
            out.append(f"  ... and {len(parsed.endpoints) - endpoints} more")
    return "\n".join(out)


def head_end(parsed: ParsedFile, line_count: int) -> int:
    """The last line of a file's head, which its summary points at: the lines before its first definition (its
    licence, module comment and imports), at least the first line. The summary lists each definition with the line
    that declares it; its span is not the whole file, which would make it a match for every line of it."""
    first = min((sym.start_line for sym in parsed.symbols), default=line_count + 1)
    return max(1, min(first - 1, line_count))


def summary_chunk(path: str, parsed: ParsedFile, line_count: int, max_tokens: int) -> Chunk:
    """The summary chunk of a parsed source file, listing fewer names until it fits ``max_tokens``."""
    per_kind, endpoints = _SHOWN_PER_KIND, _SHOWN_ENDPOINTS
    text = _render(path, parsed, per_kind, endpoints)
    while not tokens.fits(text, max_tokens) and (per_kind or endpoints):
        per_kind, endpoints = per_kind // 2, endpoints // 2
        text = _render(path, parsed, per_kind, endpoints)
    if not tokens.fits(text, max_tokens):
        text = f"File: {path}\nLanguage: {parsed.language}\nSymbols: {len(parsed.symbols)}"
    chunk = Chunk(path=path, language=parsed.language, kind="summary", start_line=1,
                  end_line=head_end(parsed, line_count), text=text, title=f"{path} (summary)", doc=parsed.module_doc)
    if parsed.endpoints:
        chunk.tags["endpoints"] = [e.render() for e in parsed.endpoints]
    return chunk
