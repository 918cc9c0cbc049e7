"""Symbol chunks for source files: one symbol, one chunk, with class skeletons, tiny-sibling merge and oversize split.

Input is a ``ParsedFile`` (symbols from the queries) and the file's redacted lines; output is a list of draft chunks
in file order. The rules, with no language named anywhere:

- A class-like symbol (or a module/namespace) with member symbols becomes a *skeleton*: its own lines with each
  member's body elided, and of the doc comment above it all but its first line, then every member is chunked at the
  next level. No body and no member's documentation is stored twice.
- Any other symbol is one chunk with everything inside it (nested helpers stay with their function).
- Lines outside every symbol at a level (imports, constants, statements) become ``module`` units.
- Adjacent tiny units of one parent are merged up to ``settings.merge_tokens``, keeping the names they hold. A chunk
  holding two or more symbols says so: ``symbols`` lists them, ``symbol`` is their names joined by ", " (never one
  member's name), ``kind`` is their common kind or ``group`` when they differ, and the title lists each member with
  its kind; no member's signature or doc stands for the group.
- A symbol the parser found inside a macro invocation (``Symbol.macro``) is chunked like any other; the invocation's
  own lines are module code, and the chunk's ``macro`` tag names the invocation for [META]. Lines with no word in
  them after a unit (the invocation's closing ``}``) join that unit rather than make a chunk of their own.
- Anything over ``settings.max_tokens`` is split with ``settings.overlap_lines`` of overlap (``split.split_lines``).

Every non-blank line ends up in at least one chunk; ``chunk_file`` checks that and reports a sentinel if not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from localidx.chunk.parse import ParsedFile, Symbol
from localidx.chunk.split import split_lines
from localidx.config import Settings
from localidx.records import Chunk
from localidx.text import tokens

GROUP = "group"  # the kind of a merged chunk whose symbols are of different kinds
# The most of the budget that the end of a long leading comment may take in the part that holds the declaration it
# documents; the rest of the comment is a chunk of its own (``_leading_comment``).
HEAD_SHARE = 0.5


@dataclass
class _Unit:
    """One piece at one nesting level before merging: a symbol (index) or a run of other lines."""

    start: int  # 1-based line numbers
    end: int
    symbol: int | None
    text_lines: list[str] = field(default_factory=list)  # lines of text as they will be stored
    line_numbers: Sequence[int] = ()  # original line number of each text line (a range for a run of lines)
    skeleton: bool = False
    text: str | None = None  # text_lines joined, once asked


def _is_blank(line: str) -> bool:
    return not line.strip()


class _CodeChunker:
    def __init__(self, path: str, parsed: ParsedFile, lines: list[str], settings: Settings):
        self.path = path
        self.parsed = parsed
        self.symbols = parsed.symbols
        self.lines = lines
        self.settings = settings
        self.chunks: list[Chunk] = []

    # -- units ---------------------------------------------------------------------------------------------------

    def _line_unit(self, start: int, end: int, symbol: int | None) -> _Unit:
        return _Unit(start, end, symbol, self.lines[start - 1 : end], range(start, end + 1))

    def _gap_units(self, start: int, end: int, members: list[int]) -> list[_Unit]:
        """Units for the lines between ``start`` and ``end`` that no member covers, in order, with the members."""
        units: list[_Unit] = []
        cursor = start
        for m in members:
            sym = self.symbols[m]
            if sym.start_line > cursor:
                units.extend(self._gap(cursor, sym.start_line - 1))
            units.append(self._symbol_unit(m))
            cursor = max(cursor, sym.end_line + 1)
        if cursor <= end:
            units.extend(self._gap(cursor, end))
        return self._closings_attached(units)

    def _closings_attached(self, units: list[_Unit]) -> list[_Unit]:
        """Lines with no word in them after a unit (the `}` that closes a macro invocation whose items are symbols)
        join that unit instead of making a chunk of their own that no question can find."""
        out: list[_Unit] = []
        for unit in units:
            if out and unit.symbol is None and not any(ch.isalnum() for line in unit.text_lines for ch in line):
                prev = out[-1]
                numbers = [*prev.line_numbers, *range(prev.end + 1, unit.end + 1)]
                out[-1] = _Unit(prev.start, unit.end, prev.symbol, prev.text_lines + self.lines[prev.end : unit.end],
                                numbers, skeleton=prev.skeleton)
            else:
                out.append(unit)
        return out

    def _gap(self, start: int, end: int) -> list[_Unit]:
        while start <= end and _is_blank(self.lines[start - 1]):
            start += 1
        while end >= start and _is_blank(self.lines[end - 1]):
            end -= 1
        return [self._line_unit(start, end, None)] if start <= end else []

    def _symbol_unit(self, index: int) -> _Unit:
        sym = self.symbols[index]
        if not (sym.is_container and sym.children):
            return self._line_unit(sym.start_line, sym.end_line, index)
        # A skeleton: the container's lines with each member's body replaced by one elision line.
        elided: dict[int, tuple[int, str]] = {}  # first elided line -> (last elided line, placeholder)
        for c in sym.children:
            first, last = self._body_span(self.symbols[c])
            if first <= last:
                indent = self.lines[first - 1][: len(self.lines[first - 1]) - len(self.lines[first - 1].lstrip())]
                elided[first] = (last, f"{indent}...")
            first, last = self._doc_span(self.symbols[c])
            if first <= last and first > sym.start_line and first not in elided:
                elided[first] = (last, "")
        text_lines: list[str] = []
        numbers: list[int] = []
        n = sym.start_line
        for first in sorted(elided):
            if first < n:
                continue  # inside a body already left out
            if first > sym.end_line:
                break
            text_lines += self.lines[n - 1 : first - 1]
            numbers += range(n, first)
            last, placeholder = elided[first]
            if placeholder:  # a member's doc comment is left out whole: it is in the member's own chunk
                text_lines.append(placeholder)
                numbers.append(first)
            n = last + 1
        text_lines += self.lines[n - 1 : sym.end_line]
        numbers += range(n, sym.end_line + 1)
        return _Unit(sym.start_line, sym.end_line, index, text_lines, numbers, skeleton=True)

    def _doc_span(self, sym: Symbol) -> tuple[int, int]:
        """The lines of a member's doc comment above it that its parent's skeleton leaves out (empty when it has
        none): all but the comment's first line of words, up to its first attribute or its declaration. The rest
        of the comment is the member's: in the skeleton, every method's whole documentation made a heavily
        documented class's skeleton many chunks of doc text that outranked the methods they describe, while its
        first lines keep the skeleton an outline of what the class does."""
        none = (sym.start_line, sym.start_line - 1)
        if not sym.doc or sym.name_line <= sym.start_line:
            return none
        marks = tuple(text.split("\n", 1)[0].strip()[:20] for text in sym.decorators if text.strip())
        stop = sym.name_line
        for line in range(sym.start_line, sym.name_line):
            if marks and self.lines[line - 1].strip().startswith(marks):
                stop = line
                break
        summary = next((line for line in range(sym.start_line, stop) if any(ch.isalpha()
                                                                            for ch in self.lines[line - 1])), None)
        return (summary + 1, stop - 1) if summary is not None else none

    def _body_span(self, sym: Symbol) -> tuple[int, int]:
        """The lines of a member that its parent's skeleton leaves out.

        A nested class-like member keeps its header in the parent's skeleton (its members go to its own skeleton).
        A body that opens on a line holding code before it (``void f() {``, ``class A {``) keeps that line; a body
        on lines of its own (Python blocks, Allman braces) is elided whole."""
        first = sym.body_start_line if sym.body_start_line is not None else sym.name_line + 1
        if sym.body_start_line is not None and (first == sym.name_line or _signature_continues(self.lines[first - 1])):
            first += 1
        return first, sym.end_line

    # -- chunks --------------------------------------------------------------------------------------------------

    def run(self) -> list[Chunk]:
        top = [i for i, s in enumerate(self.symbols) if s.parent is None]
        self._level(self._gap_units(1, len(self.lines), top), parent_chunk=None, depth=0)
        return self.chunks

    def _level(self, units: list[_Unit], parent_chunk: int | None, depth: int) -> None:
        for group in self._merge_groups(units):
            first_index = self._emit(group, parent_chunk, depth)
            for unit in group:
                if unit.skeleton:
                    sym = self.symbols[unit.symbol]
                    members = self._gap_units_inside(sym)
                    self._level(members, parent_chunk=first_index, depth=depth + 1)

    def _gap_units_inside(self, sym: Symbol) -> list[_Unit]:
        # Inside a container only the members are units: its other lines are already in the skeleton.
        return [self._symbol_unit(c) for c in sym.children]

    def _unit_tokens(self, unit: _Unit) -> int:
        """The unit's tokens when it may be tiny; anything larger than tiny reads as over the budget."""
        text = unit.text = "\n".join(unit.text_lines)
        if len(text) > self.settings.tiny_tokens * 8:  # no text this long is under the tiny size
            return self.settings.max_tokens + 1
        return tokens.count(text)

    def _merge_groups(self, units: list[_Unit]) -> list[list[_Unit]]:
        groups: list[list[_Unit]] = []
        current: list[_Unit] = []
        current_tokens = 0
        for unit in units:
            size = self._unit_tokens(unit) if not unit.skeleton else self.settings.max_tokens + 1
            tiny = size < self.settings.tiny_tokens
            if tiny and current and current_tokens + size <= self.settings.merge_tokens:
                current.append(unit)
                current_tokens += size
                continue
            if current:
                groups.append(current)
            current, current_tokens = [unit], size
            if not tiny:
                groups.append(current)
                current, current_tokens = [], 0
        if current:
            groups.append(current)
        return groups

    def _emit(self, group: list[_Unit], parent_chunk: int | None, depth: int) -> int:
        """Append the chunk (or its parts) for a group of units; return the index of its first chunk."""
        if len(group) == 1:
            text_lines, numbers, text = group[0].text_lines, group[0].line_numbers, group[0].text
        else:
            text_lines, numbers, text = [], [], None
            for k, unit in enumerate(group):
                if k:
                    # Keep the blank lines between merged siblings, so the text reads as it does in the file.
                    text_lines += self.lines[group[k - 1].end : unit.start - 1]
                    numbers += range(group[k - 1].end + 1, unit.start)
                text_lines += unit.text_lines
                numbers += unit.line_numbers
        base = self._base_chunk(group, depth)
        first_index = len(self.chunks)
        if text is None:
            text = "\n".join(text_lines)
        if tokens.fits(text, self.settings.max_tokens):
            base.text = text
            base.parent_index = parent_chunk
            self.chunks.append(base)
            return first_index
        preferred = self._preferred_cuts(group, numbers)  # only for a group that is cut: it reads the tree
        head = self._leading_comment(group, text_lines, numbers)
        if head:
            # The comment above a definition is too long to share a part with the line that names it: its head is
            # a chunk of its own, so that the definition's first part holds its declaration.
            self._emit_head(group, text_lines[:head], numbers[:head], parent_chunk, depth)
            first_index = len(self.chunks)
            text_lines, numbers = text_lines[head:], numbers[head:]
            preferred = {i - head for i in preferred if i > head}
        self._emit_parts(base, text_lines, numbers, parent_chunk, preferred, numbered=True)
        return first_index

    def _emit_parts(self, base: Chunk, text_lines: list[str], numbers: Sequence[int], parent_chunk: int | None,
                    preferred: set[int] | frozenset, numbered: bool) -> None:
        """``base`` cut to the budget along ``preferred`` lines, each part a chunk (titled "part k/n" when
        ``numbered``)."""
        parts = split_lines(list(text_lines), self.settings.max_tokens, self.settings.overlap_lines, preferred)
        for k, part in enumerate(parts):
            chunk = _copy(base)
            chunk.text = part.text
            chunk.start_line = numbers[part.start]
            chunk.end_line = numbers[part.end - 1]
            chunk.chunk_index = k
            chunk.overlap_lines = part.overlap
            if numbered:
                chunk.title = f"{base.title} (part {k + 1}/{len(parts)})"
            chunk.parent_index = parent_chunk
            self.chunks.append(chunk)

    def _leading_comment(self, group: list[_Unit], text_lines: list[str], numbers: Sequence[int]) -> int:
        """How many of the text lines of an oversize group go to a chunk of their own before it: 0, unless the
        group is one symbol whose leading comment and declaration line cannot share a part. Then the comment's
        last lines stay with the declaration while they take at most ``HEAD_SHARE`` of the budget."""
        if len(group) != 1 or group[0].symbol is None:
            return 0
        name_line = self.symbols[group[0].symbol].name_line
        at = next((i for i, n in enumerate(numbers) if n >= name_line), 0)
        if at == 0:
            return 0
        budget = int(self.settings.max_tokens * HEAD_SHARE)
        if tokens.fits("\n".join(text_lines[: at + 1]), budget):
            return 0
        cut = at
        while cut > 0 and tokens.fits("\n".join(text_lines[cut - 1 : at + 1]), budget):
            cut -= 1
        while cut > 0 and not text_lines[cut - 1].strip():
            cut -= 1
        return cut

    def _emit_head(self, group: list[_Unit], text_lines: list[str], numbers: Sequence[int], parent_chunk: int | None,
                   depth: int) -> None:
        """The head of a long leading comment: chunks with no symbol (not a definition), split if it is over the
        budget."""
        sym = self.symbols[group[0].symbol]
        base = Chunk(path=self.path, language=self.parsed.language, kind="module", start_line=numbers[0],
                     end_line=numbers[-1], text="", level=depth, title=f"comment above {sym.kind} {sym.qualified}")
        self._emit_parts(base, text_lines, numbers, parent_chunk, frozenset(), numbered=False)

    def _preferred_cuts(self, group: list[_Unit], numbers: Sequence[int]) -> set[int]:
        good_lines: set[int] = set()
        for unit in group:
            good_lines.add(unit.start)
            if unit.symbol is not None:
                sym = self.symbols[unit.symbol]
                good_lines.update(sym.split_lines)
                good_lines.update(self.symbols[c].start_line for c in sym.children)
            else:
                # Module code: a line that starts at column 0 begins a top-level statement.
                good_lines.update(n for n in unit.line_numbers if self.lines[n - 1][:1] not in ("", " ", "\t"))
        return {i for i, n in enumerate(numbers) if n in good_lines}

    def _base_chunk(self, group: list[_Unit], depth: int) -> Chunk:
        syms = [self.symbols[u.symbol] for u in group if u.symbol is not None]
        start, end = group[0].start, group[-1].end
        chunk = Chunk(path=self.path, language=self.parsed.language, kind="module", start_line=start, end_line=end,
                      text="", level=depth)
        if not syms:
            chunk.title = f"module code {start}-{end}"
            chunk.calls = self._module_calls(start, end)
            return chunk
        lead = syms[0]  # members share their parent (only siblings merge)
        parent = self.symbols[lead.parent] if lead.parent is not None else None
        chunk.parent = parent.qualified if parent else ""
        if parent:
            chunk.tags["parent_kind"] = parent.kind
        if len(syms) == 1:
            chunk.kind, chunk.symbol, chunk.name = lead.kind, lead.qualified, lead.name
            chunk.signature, chunk.doc = lead.signature, lead.doc
        else:
            kinds = {s.kind for s in syms}
            chunk.kind = kinds.pop() if len(kinds) == 1 else GROUP
            chunk.symbol = ", ".join(s.qualified for s in syms)
        macros = list(dict.fromkeys(s.macro for s in syms if s.macro))
        if macros:
            chunk.tags["macro"] = ", ".join(macros)  # defined inside a macro invocation: [META] says which
        chunk.decorators = list(dict.fromkeys(d for s in syms for d in s.decorators))
        chunk.calls = list(dict.fromkeys(c for s in syms for c in self._calls_within(s)))
        endpoints = [e for s in syms for e in self._endpoints_within(s)]
        if endpoints:
            chunk.tags["http_method"] = endpoints[0].method
            chunk.tags["http_path"] = endpoints[0].path
        if len(group) > 1:
            chunk.symbols = [s.qualified for s in syms]
        if len(syms) > 1:
            more = " and module code" if len(syms) < len(group) else ""
            chunk.title = f"{len(syms)} symbols{more}: " + ", ".join(f"{s.kind} {s.qualified}" for s in syms)
        elif len(group) > 1:
            chunk.title = f"{lead.kind} {lead.qualified} and module code"
        else:
            chunk.title = f"{lead.kind} {lead.qualified}"
        return chunk

    def _calls_within(self, sym: Symbol) -> list[str]:
        calls = list(sym.calls)
        if not (sym.is_container and sym.children):
            for c in sym.children:  # nested helpers are part of this chunk, so are their calls
                calls.extend(self._calls_within(self.symbols[c]))
        return calls

    def _endpoints_within(self, sym: Symbol):
        found = list(sym.endpoints)
        if not (sym.is_container and sym.children):
            for c in sym.children:
                found.extend(self._endpoints_within(self.symbols[c]))
        return found

    def _module_calls(self, start: int, end: int) -> list[str]:
        return list(dict.fromkeys(name for line, name in self.parsed.module_calls if start <= line <= end))


def _signature_continues(line: str) -> bool:
    """Whether the body's first line also holds code before the body (a brace at the end of a signature)."""
    stripped = line.strip()
    return bool(stripped) and stripped[0] not in "{[(" and stripped.endswith(("{", "{{"))


def _copy(chunk: Chunk) -> Chunk:
    return dataclasses.replace(chunk, symbols=list(chunk.symbols), calls=list(chunk.calls),
                               decorators=list(chunk.decorators), tags=dict(chunk.tags))


def chunk_code(path: str, parsed: ParsedFile, lines: list[str], settings: Settings) -> list[Chunk]:
    """Draft chunks for a parsed source file; ``lines`` are its redacted lines."""
    return _CodeChunker(path, parsed, lines, settings).run()
