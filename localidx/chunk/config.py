"""Config files (YAML, TOML, JSON, INI, .properties, opted-in .env): a file summary, then key-aligned windows.

Place in the flow: discover → parse → **chunk** → enrich → embed → store. Config files have no symbols for
``parse`` to find; this module reads the (already redacted) text and returns draft ``Chunk`` records for
``localidx.chunk.finalize``.

Output: a "summary" chunk naming the file, its language and its top-level keys and sections (never a value), then
"config" chunks: consecutive top-level units (a top-level key with its value, a TOML/INI section, a top-level list
item) packed up to ``settings.max_tokens``; a unit over the budget is split alone, with ``settings.overlap_lines``
overlap between its parts.

Invariants:
- Every non-blank line lies inside at least one config chunk's line range, and its text is in that chunk's text;
  a line over the budget is cut by characters into parts that share its line number and join back to it.
- Every chunk fits ``settings.max_tokens`` (the summary lists fewer names rather than exceed it).
- The summary is first and spans the whole file; an empty or whitespace-only file gives no chunks.
- Keys are found by regular expressions on column-0 lines (JSON: ``json.loads``, or a small scanner when the text is
  not valid JSON); no YAML library is involved, so odd YAML degrades to coarser windows, never to lost lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from localidx.chunk.docs import split_text_lines
from localidx.chunk.split import split_lines
from localidx.config import Settings
from localidx.records import Chunk
from localidx.text import tokens
from localidx.text.safe import valid_text

# Extension (lower case, with the dot) or exact file name -> language. File names are looked up first.
CONFIG_LANGUAGES: dict[str, str] = {
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".conf": "ini",
    ".properties": "properties",
    ".env": "dotenv",  # both the file ".env" and "*.env"
    "Pipfile": "toml",
    ".editorconfig": "ini",
}
# ".env.local", ".env.production", ...: dotenv files named by a suffix after ".env".
DOTENV_PREFIX = ".env."

SUMMARY_MAX_NAMES = 30
_SUMMARY_LIMITS = (SUMMARY_MAX_NAMES, 15, 7, 3, 1, 0)
_TITLE_MAX_KEYS = 3
_KEY_DISPLAY_CHARS = 80

_COMMENT_PREFIXES = {
    "yaml": ("#",),
    "toml": ("#",),
    "ini": ("#", ";"),
    "properties": ("#", "!"),
    "dotenv": ("#",),
    "json": ("//",),
}

# YAML: a column-0 mapping key (plain or quoted) followed by ":" and a space or the end of the line.
_YAML_KEY = re.compile(
    r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#\-?:,\[\]{}&*!|>'"%@`][^#]*?|<<)\s*:(?:\s|$)"""
)
_YAML_LIST_ITEM = re.compile(r"^-(?:\s|$)")
_YAML_DOCUMENT = re.compile(r"^(?:---|\.\.\.)(?:\s|$)")
# TOML: a [table] or [[array of tables]] header; a bare, quoted or dotted key before "=".
_TOML_SIMPLE_KEY = r"""(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_TOML_DOTTED_KEY = rf"{_TOML_SIMPLE_KEY}(?:\s*\.\s*{_TOML_SIMPLE_KEY})*"
_TOML_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_TOML_DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(rf"^\s*({_TOML_DOTTED_KEY})\s*=")
_TOML_STRINGS = re.compile(r"""\"\"\".*?\"\"\"|'''.*?'''|"(?:[^"\\]|\\.)*"|'[^']*'""")
# INI: a [section] header; a column-0 key before "=" or ":".
_INI_SECTION = re.compile(r"^\s*\[([^\]]+)\]")
_INI_KEY = re.compile(r"^([^\s=:#;\[][^=:]*?)\s*[=:]")
# .properties: a key ends at the first unescaped "=", ":" or whitespace.
_PROPERTIES_KEY = re.compile(r"^\s*((?:\\.|[^\s=:\\#!])(?:\\.|[^\s=:\\])*)")
_DOTENV_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=")


@dataclass
class _Outline:
    """What the summary says and where the top-level units start."""

    keys: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    array_items: int | None = None  # a JSON document whose top level is an array
    units: list[tuple[int, str]] = field(default_factory=list)  # (first line, key or "") of each top-level unit


def config_language(path: str) -> str | None:
    """The config language of ``path`` ("yaml", "toml", "json", "ini", "dotenv", "properties"), or None."""
    name = PurePosixPath(path).name
    if name in CONFIG_LANGUAGES:
        return CONFIG_LANGUAGES[name]
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in CONFIG_LANGUAGES:
        return CONFIG_LANGUAGES[suffix]
    if name.startswith(DOTENV_PREFIX):
        return "dotenv"
    return None


def chunk_config(path: str, text: str, language: str, settings: Settings) -> list[Chunk]:
    """Draft chunks of a config file: a file summary, then "config" windows aligned to top-level keys/sections.

    ``text`` is already redacted; ``language`` is one of ``CONFIG_LANGUAGES``' values. Returns [] for a file with no
    non-blank line.
    """
    if not text.strip():
        return []
    if language not in _OUTLINERS:
        raise ValueError(f"unknown config language {language!r}; expected one of {sorted(_OUTLINERS)}")
    lines = split_text_lines(text)
    outline = _OUTLINERS[language](lines, text)
    chunks = [_summary(path, language, outline, len(lines), settings.max_tokens)]
    chunks.extend(_windows(path, language, lines, _attach_comments(lines, outline.units, language), settings))
    return chunks


def _summary(path: str, language: str, outline: _Outline, line_count: int, max_tokens: int) -> Chunk:
    # Long or many key names could push the summary over budget; list fewer of them rather than exceed it.
    for limit in _SUMMARY_LIMITS:
        rows = [f"File: {path}", f"Language: {language}"]
        if outline.array_items is not None:
            rows.append(f"Top-level: array of {outline.array_items} items")
        else:
            rows.append(f"Top-level keys: {_name_list(outline.keys, limit) or '(none)'}")
        if outline.sections:
            rows.append(f"Sections: {_name_list([f'[{s}]' for s in outline.sections], limit)}")
        text = "\n".join(rows)
        if tokens.fits(text, max_tokens):
            break
    return Chunk(
        path=path,
        language=language,
        kind="summary",
        start_line=1,
        end_line=line_count,
        text=text,
        title=f"{path} (summary)",
        level=0,
    )


def _name_list(names: list[str], limit: int) -> str:
    if limit == 0 and names:
        return f"{len(names)} (not listed)"
    listed = ", ".join(_display(name) for name in names[:limit])
    if len(names) > limit:
        listed += f" ... and {len(names) - limit} more"
    return listed


def _display(name: str) -> str:
    return name if len(name) <= _KEY_DISPLAY_CHARS else name[: _KEY_DISPLAY_CHARS - 1] + "…"


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(name for name in names if name))


def _unquote(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


def _toml_first_component(key: str) -> str:
    quoted = re.match(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*')""", key)
    if quoted:
        return _unquote(quoted.group(1))
    return key.split(".")[0].strip()


def _outline_yaml(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    keys_in_document = False
    for number, line in enumerate(lines, start=1):
        if _YAML_DOCUMENT.match(line):
            keys_in_document = False
            outline.units.append((number, ""))
            continue
        match = _YAML_KEY.match(line)
        if match:
            key = _unquote(match.group("key"))
            outline.keys.append(key)
            outline.units.append((number, key))
            keys_in_document = True
        elif _YAML_LIST_ITEM.match(line) and not keys_in_document:
            # A top-level list (not the compact "key:\n- item" form, whose items belong to the key above).
            outline.units.append((number, ""))
    outline.keys = _unique(outline.keys)
    return outline


def _outline_toml(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    in_table = False
    closing: str | None = None  # the delimiter of an open multi-line string
    depth = 0  # open brackets of a multi-line array
    for number, line in enumerate(lines, start=1):
        if closing is not None:
            if closing in line:
                depth += _bracket_balance(line[line.index(closing) + 3 :])
                closing = None
            continue
        if depth > 0:
            depth = max(0, depth + _bracket_balance(line))
            continue
        header = _TOML_HEADER.match(line)
        if header:
            name = re.sub(r"\s*\.\s*", ".", header.group(2))
            outline.sections.append(name if header.group(1) == "[" else f"[{name}]")
            outline.keys.append(_toml_first_component(name))
            outline.units.append((number, name))
            in_table = True
            continue
        key = _TOML_KEY.match(line)
        if key:
            name = re.sub(r"\s*\.\s*", ".", key.group(1))
            if not in_table:
                outline.keys.append(_toml_first_component(name))
                outline.units.append((number, name))
            value = line[key.end() :]
            for delimiter in ('"""', "'''"):
                if value.count(delimiter) % 2 == 1:
                    closing = delimiter
                    break
            if closing is None:
                depth = max(0, _bracket_balance(value))
    outline.keys = _unique(outline.keys)
    outline.sections = _unique(outline.sections)
    return outline


def _bracket_balance(value: str) -> int:
    bare = _TOML_STRINGS.sub("", value).split("#", 1)[0]
    return bare.count("[") - bare.count("]")


def _outline_ini(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    in_section = False
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith(_COMMENT_PREFIXES["ini"]):
            continue
        section = _INI_SECTION.match(line)
        if section:
            name = section.group(1).strip()
            outline.sections.append(name)
            outline.units.append((number, name))
            in_section = True
            continue
        key = _INI_KEY.match(line)
        if key and not in_section:
            outline.keys.append(key.group(1))
            outline.units.append((number, key.group(1)))
    outline.keys = _unique(outline.keys)
    outline.sections = _unique(outline.sections)
    return outline


def _outline_properties(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    continued = False
    for number, line in enumerate(lines, start=1):
        if continued:
            continued = _continues(line)
            continue
        stripped = line.lstrip()
        if not stripped or stripped.startswith(_COMMENT_PREFIXES["properties"]):
            continue
        continued = _continues(line)
        key = _PROPERTIES_KEY.match(line)
        if key:
            outline.keys.append(key.group(1))
            outline.units.append((number, key.group(1)))
    outline.keys = _unique(outline.keys)
    return outline


def _continues(line: str) -> bool:
    # A .properties value goes on to the next line after an odd number of trailing backslashes.
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _outline_dotenv(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    quote: str | None = None  # the quote of a value that spans lines
    for number, line in enumerate(lines, start=1):
        if quote is not None:
            if quote in line:
                quote = None
            continue
        key = _DOTENV_KEY.match(line)
        if not key:
            continue
        outline.keys.append(key.group(1))
        outline.units.append((number, key.group(1)))
        value = line[key.end() :].lstrip()
        if value[:1] in ("'", '"') and value.count(value[0]) == 1:
            quote = value[0]
    outline.keys = _unique(outline.keys)
    return outline


def _outline_json(lines: list[str], text: str) -> _Outline:
    outline = _Outline()
    members = _json_members(text)
    outline.units = members
    try:
        document = json.loads(text)
    except ValueError:
        document = None
        outline.keys = _unique([key for _, key in members])
    else:
        if isinstance(document, dict):
            # json.loads turns an escaped lone surrogate ("\udfaa") into one, which no database can store.
            outline.keys = [valid_text(str(key)) for key in document]
        elif isinstance(document, list):
            outline.array_items = len(document)
    return outline


def _json_members(text: str) -> list[tuple[int, str]]:
    """(line, key) where each member of the top-level object starts, or (line, "") for each top-level array item.

    A scanner rather than ``json.loads`` so that it also works on JSON with comments, trailing commas or other
    damage, and so that it knows line numbers.
    """
    members: list[tuple[int, str]] = []
    depth = 0
    top = ""
    expect_member = False  # inside the top-level container, after its opening bracket or a comma
    line = 1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            if depth == 1 and expect_member:
                members.append((line, text[i + 1 : j] if top == "{" else ""))
                expect_member = False
            i = j + 1 if j < n and text[j] == '"' else j
            continue
        if depth == 1 and expect_member and c not in "}],":
            members.append((line, ""))
            expect_member = False
        if c in "{[":
            if depth == 0 and not top:
                top = c
                expect_member = True
            depth += 1
        elif c in "}]":
            depth = max(0, depth - 1)
        elif c == "," and depth == 1:
            expect_member = True
        i += 1
    return members


_OUTLINERS = {
    "yaml": _outline_yaml,
    "toml": _outline_toml,
    "json": _outline_json,
    "ini": _outline_ini,
    "properties": _outline_properties,
    "dotenv": _outline_dotenv,
}


def _attach_comments(lines: list[str], units: list[tuple[int, str]], language: str) -> list[tuple[int, list[str]]]:
    """The units grouped by first line, each start moved up over the comment lines right above it (a comment there
    describes what follows it), with a keyless unit at line 1 when the first unit starts later."""
    prefixes = _COMMENT_PREFIXES.get(language, ())
    grouped: dict[int, list[str]] = {}
    for start, key in units:
        grouped.setdefault(start, []).append(key)
    attached: list[tuple[int, list[str]]] = []
    floor = 0  # the previous unit's first line, which stays with that unit
    for start in sorted(grouped):
        indent = _indent(lines[start - 1])
        first = start
        while first - 1 > floor:
            above = lines[first - 2]
            if not above.lstrip().startswith(prefixes) or _indent(above) > indent:
                break
            first -= 1
        attached.append((first, _unique(grouped[start])))
        floor = start
    if not attached or attached[0][0] > 1:
        attached.insert(0, (1, []))
    return attached


def _windows(
    path: str, language: str, lines: list[str], units: list[tuple[int, list[str]]], settings: Settings
) -> list[Chunk]:
    """Consecutive units packed into chunks up to the token budget; a unit over the budget is split on its own."""
    spans = [
        (start, units[i + 1][0] - 1 if i + 1 < len(units) else len(lines), keys)
        for i, (start, keys) in enumerate(units)
    ]
    chunks: list[Chunk] = []
    pending: list[tuple[int, int, list[str]]] = []

    def flush() -> None:
        if pending:
            span = _trim(lines, pending[0][0], pending[-1][1])
            if span:
                keys = _unique([key for _, _, unit_keys in pending for key in unit_keys])
                chunks.append(_config_chunk(path, language, keys, span[0], span[1], _text(lines, *span)))
            pending.clear()

    for span in spans:
        candidate = _trim(lines, (pending[0][0] if pending else span[0]), span[1])
        if candidate is None or tokens.fits(_text(lines, *candidate), settings.max_tokens):
            pending.append(span)
            continue
        flush()
        own = _trim(lines, span[0], span[1])
        if own is None or tokens.fits(_text(lines, *own), settings.max_tokens):
            pending.append(span)
            continue
        chunks.extend(_split_unit(path, language, lines, own, span[2], settings))
    flush()
    return chunks


def _split_unit(
    path: str, language: str, lines: list[str], span: tuple[int, int], keys: list[str], settings: Settings
) -> list[Chunk]:
    first, last = span
    region = lines[first - 1 : last]
    indent = min((_indent(line) for line in region[1:] if line.strip()), default=0)
    # Cuts read well after a blank line and before a sibling of the unit's second-level entries.
    preferred = {
        k for k in range(1, len(region)) if not region[k - 1].strip() or region[k].strip() and _indent(region[k]) <= indent
    }
    parts = split_lines(region, settings.max_tokens, settings.overlap_lines, preferred)
    made = []
    for index, part in enumerate(parts):
        chunk = _config_chunk(path, language, keys, first + part.start, first + part.end - 1, part.text, part.overlap)
        chunk.chunk_index = index
        chunk.title = f"{chunk.title} (part {index + 1})"
        made.append(chunk)
    return made


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _config_chunk(
    path: str, language: str, keys: list[str], start: int, end: int, text: str, overlap: int = 0
) -> Chunk:
    if not keys:
        title = f"{PurePosixPath(path).name} lines {start}-{end}"
    elif len(keys) <= _TITLE_MAX_KEYS:
        title = ", ".join(keys)
    else:
        title = f"{', '.join(keys[:_TITLE_MAX_KEYS])} and {len(keys) - _TITLE_MAX_KEYS} more"
    symbol = keys[0] if keys else ""
    return Chunk(
        path=path,
        language=language,
        kind="config",
        start_line=start,
        end_line=end,
        text=text,
        symbol=symbol,
        name=symbol,
        title=title,
        overlap_lines=overlap,
    )


def _trim(lines: list[str], first: int, last: int) -> tuple[int, int] | None:
    while first <= last and not lines[first - 1].strip():
        first += 1
    while last >= first and not lines[last - 1].strip():
        last -= 1
    return (first, last) if first <= last else None


def _text(lines: list[str], first: int, last: int) -> str:
    return "\n".join(lines[first - 1 : last])
