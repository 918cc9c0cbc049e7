"""What a pasted bug report, traceback or log says about where the code is.

Place in the flow: retrieve (before search, which reads it for long queries; the context pipeline searches through
search). Pure functions over text; the patterns live in ``localidx/data/evidence.toml``.

A report mixes evidence with noise. ``read_report`` separates:
- **frames**: stack frames in any of the common shapes (Python's ``File "x.py", line 3, in f``, Node's
  ``at f (x.js:3:9)``, Go's ``x.go:3`` with its function line, Rust's ``src/x.rs:3:5``, Java's ``at a.B.f(B.java:3)``),
  as a path as written, a line and a function, innermost first. A frame inside the repository is close to certain
  evidence; ``resolve_frames`` maps the written paths (``/usr/lib/python3/site-packages/pkg/mod.py``) onto indexed
  ones (``src/pkg/mod.py``) by their longest common tail.
- **errors**: exception and panic lines (``TypeError: ...``, ``panic: ...``, ``Error: ...``);
- **identifiers**: names written as code (backticks, code blocks, ``snake_case``, ``camelCase``, ``a.b.c``, calls),
  counted;
- **text**: the report without its boilerplate (version dumps, environment tables, package lists, log
  timestamps and addresses), which is what the words of a search should come from.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

_DATA = Path(__file__).resolve().parent.parent / "data" / "evidence.toml"
LONG_CHARS = 400  # a query this long, or of several lines, is read as a report
LONG_LINES = 5


@dataclass(frozen=True)
class Frame:
    path: str  # as written, forward slashes
    line: int
    function: str  # "" when the frame does not say


@dataclass
class Evidence:
    frames: list[Frame] = field(default_factory=list)  # innermost first
    errors: list[str] = field(default_factory=list)
    identifiers: Counter = field(default_factory=Counter)
    text: str = ""
    long: bool = False


@dataclass(frozen=True)
class _Patterns:
    frames: tuple[tuple[re.Pattern, bool], ...]  # (pattern, innermost listed last)
    path: re.Pattern
    errors: tuple[re.Pattern, ...]
    boilerplate: tuple[re.Pattern, ...]
    template: tuple[re.Pattern, ...]
    noise: tuple[re.Pattern, ...]
    generic_names: frozenset[str]
    source_suffixes: frozenset[str]


@lru_cache(maxsize=1)
def _patterns() -> _Patterns:
    from localidx.config import read_toml

    raw = read_toml(_DATA)
    suffixes = frozenset(raw["source_suffixes"])
    ext = "|".join(sorted((re.escape(s) for s in suffixes), key=len, reverse=True))
    path = re.compile(rf"(?<![\w/.-])((?:[A-Za-z]:)?[\w.@+~-]*(?:[/\\][\w.@+~-]+)*\.(?:{ext}))(?::(\d+))?(?!\w)")
    return _Patterns(
        frames=tuple((re.compile(f["pattern"], re.MULTILINE), bool(f.get("innermost_last", False)))
                     for f in raw["frames"]),
        path=path,
        errors=tuple(re.compile(p, re.MULTILINE) for p in raw["errors"]),
        boilerplate=tuple(re.compile(p, re.IGNORECASE) for p in raw["boilerplate_lines"]),
        template=tuple(re.compile(p, re.IGNORECASE) for p in raw["template_lines"]),
        noise=tuple(re.compile(p) for p in raw["noise_tokens"]),
        generic_names=frozenset(raw["generic_file_names"]),
        source_suffixes=suffixes,
    )


STRIP_TEMPLATES = True  # drop an issue template's comments (<!-- ... -->), headings and check boxes
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_BACKTICK = re.compile(r"`([^`\n]{1,120})`")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->|#)[A-Za-z_$][\w$]*)*")
_CODE_SHAPE = re.compile(r"_|[a-z][A-Z]|[A-Z]{2,}[a-z]|\.|::|->|#")


def is_long(query: str) -> bool:
    """Whether a query reads as a report (pasted text) rather than a question."""
    return len(query) >= LONG_CHARS or query.count("\n") >= LONG_LINES


def read_report(query: str) -> Evidence:
    """The evidence in ``query`` (see the module docstring)."""
    pats = _patterns()
    evidence = Evidence(long=is_long(query))
    evidence.frames = _frames(query, pats)
    for pattern in pats.errors:
        for m in pattern.finditer(query):
            line = " ".join(m.group(0).split())[:300]
            if line not in evidence.errors:
                evidence.errors.append(line)
    evidence.identifiers = _identifiers(query)
    evidence.text = _without_boilerplate(query, pats)
    return evidence


def _frames(query: str, pats: _Patterns) -> list[Frame]:
    found: list[tuple[int, Frame, bool]] = []
    taken: list[tuple[int, int]] = []
    for pattern, innermost_last in pats.frames:
        for m in pattern.finditer(query):
            if any(a <= m.start() < b for a, b in taken):
                continue
            groups = m.groupdict()
            path = (groups.get("path") or "").replace("\\", "/")
            if not path or PurePosixPath(path).suffix[1:].lower() not in pats.source_suffixes:
                continue
            frame = Frame(path=path, line=int(groups.get("line") or 0), function=_function(groups.get("func") or ""))
            found.append((m.start(), frame, innermost_last))
            taken.append((m.start(), m.end()))
    found.sort(key=lambda f: f[0])
    # A run of frames of one shape is one stack; Python's (and Ruby's) list the innermost last.
    frames: list[Frame] = []
    stack: list[Frame] = []
    last_kind = None
    for _pos, frame, innermost_last in found:
        if last_kind is not None and innermost_last != last_kind:
            frames.extend(reversed(stack) if last_kind else stack)
            stack = []
        stack.append(frame)
        last_kind = innermost_last
    frames.extend(reversed(stack) if last_kind else stack)
    # Paths written outside a frame (a log line, a file named in prose) count as weaker frames, after the stacks.
    named = {f.path for f in frames}
    for m in pats.path.finditer(query):
        path = m.group(1).replace("\\", "/")
        if path not in named:
            named.add(path)
            frames.append(Frame(path=path, line=int(m.group(2) or 0), function=""))
    return frames


def _function(text: str) -> str:
    """The bare function name of a frame's function text: ``(*defaultValidator).ValidateStruct`` -> ``ValidateStruct``,
    ``Object.parse`` -> ``parse``, ``<module>`` -> ""."""
    text = text.strip()
    if not text or text.startswith("<"):
        return ""
    name = re.split(r"[.:#/]", text.rstrip("()"))[-1]
    name = name.strip("()*[] ")
    return name if re.fullmatch(r"[A-Za-z_$][\w$]*", name or "") else ""


def _identifiers(query: str) -> Counter:
    """Names written as code, counted: everything in code blocks and backticks, and prose words of a code shape."""
    counts: Counter = Counter()
    code = [m.group(1) for m in _FENCE.finditer(query)] + [m.group(1) for m in _BACKTICK.finditer(query)]
    prose = _BACKTICK.sub(" ", _FENCE.sub(" ", query))
    for block in code:
        for token in _IDENT.findall(block):
            if len(token) > 2:
                counts[token] += 1
    for token in _IDENT.findall(prose):
        if len(token) > 2 and _CODE_SHAPE.search(token) and not token.endswith("."):
            counts[token] += 1
    return counts


def _without_boilerplate(query: str, pats: _Patterns) -> str:
    kept = []
    dropped = pats.boilerplate + pats.template if STRIP_TEMPLATES else pats.boilerplate
    if STRIP_TEMPLATES:
        query = _HTML_COMMENT.sub(" ", query)
    for line in query.split("\n"):
        if any(p.search(line) for p in dropped):
            continue
        for p in pats.noise:
            line = p.sub(" ", line)
        kept.append(line)
    return "\n".join(kept)


# -- frames onto the index ----------------------------------------------------------------------------------------


def resolve_frames(frames: list[Frame], indexed_paths) -> list[tuple[str, Frame, int]]:
    """(indexed path, frame, matched tail length) for frames whose path names an indexed file, innermost first.

    A written path matches the indexed paths that share its longest tail of components; a tail of one component
    (the file name alone) counts only when it names exactly one indexed file and is not a generic name
    (``__init__.py``, ``index.js``, ``mod.rs``, ``main.go``...). Several files sharing the best tail all match."""
    pats = _patterns()
    by_name: dict[str, list[list[str]]] = {}
    for path in indexed_paths:
        parts = path.split("/")
        by_name.setdefault(parts[-1], []).append(parts)
    out: list[tuple[str, Frame, int]] = []
    for frame in frames:
        parts = [p for p in frame.path.split("/") if p and p != "."]
        if not parts:
            continue
        candidates = by_name.get(parts[-1], [])
        best, matches = 0, []
        for cand in candidates:
            n = 0
            while n < min(len(cand), len(parts)) and cand[-1 - n] == parts[-1 - n]:
                n += 1
            if n > best:
                best, matches = n, [cand]
            elif n == best:
                matches.append(cand)
        if not matches:
            continue
        if best == 1 and (len(matches) > 1 or parts[-1] in pats.generic_names):
            continue
        for cand in matches[:3]:
            out.append(("/".join(cand), frame, best))
    return out
