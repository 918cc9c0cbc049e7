"""Markdown documents as a heading hierarchy of draft chunks.

Place in the flow: discover → parse → **chunk** → enrich → embed → store. Markdown has no grammar in ``parse``;
this module reads the (already redacted) text line by line and returns draft ``Chunk`` records that
``localidx.chunk.finalize`` turns into stored chunks.

Output, in document order:
- YAML front matter (``---`` … ``---`` at the very top), when present, as one "content" chunk without a parent.
- Content before the first heading as "content" chunks without a parent: the only content that has none.
- For each heading, a "heading" chunk (``level`` = 1..6) followed by the "content" chunks of the lines under it
  up to the next heading (``level`` = ``LEVEL_CONTENT``).

Invariants (``check_docs`` verifies them):
- Every non-blank line lies inside at least one chunk's line range and its text appears in that chunk's text; a line
  longer than the token budget is cut by characters into parts that share its line number and concatenate back to it.
- A content chunk's ``parent_index`` points at the heading it sits under; a heading's points at the nearest preceding
  heading of a lower level number, or is None when there is none.
- Lines are 1-based and inclusive; ``start_line <= end_line``.

Oversize content is split by ``localidx.chunk.split``, told which cuts Markdown forbids: inside a fenced code block
(unless the block alone is over the budget) and after a blank line. Paragraph ends and fence edges are preferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from localidx.text import tokens
from localidx.chunk.split import split_lines
from localidx.config import Settings
from localidx.records import LEVEL_CONTENT, Chunk

LANGUAGE = "markdown"

# CommonMark allows up to three spaces before an ATX or setext marker; four make an indented code block.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
# Fences are accepted at any indentation (CommonMark says up to three spaces) because README fences nested in list
# items are indented further, and a "# comment" inside them must still not become a heading.
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$")
_HTML_COMMENT_OPEN = re.compile(r"^ {0,3}<!--")
# Lines that open a block which cannot be the text of a setext heading (so a following "---" is a thematic break).
_NOT_PARAGRAPH = re.compile(r"^(?: {4,}|\t| {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\|))")
_FRONT_MATTER_OPEN = "---"
_FRONT_MATTER_CLOSE = ("---", "...")

FRONT_MATTER_TITLE = "front matter"


@dataclass(frozen=True)
class _Heading:
    start: int
    end: int
    level: int
    title: str


def split_text_lines(text: str) -> list[str]:
    """The lines of ``text`` as line numbers count them: split on "\\n", a final newline ends the last line."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _atx_title(rest: str) -> str:
    return _ATX_CLOSING.sub("", rest.strip()).strip()


def _scan(lines: list[str]) -> tuple[tuple[int, int] | None, list[_Heading], dict[int, int]]:
    """Front matter range, headings, and for each line of a fenced code block (delimiters included) the block's
    number; all line numbers 1-based."""
    front = None
    i = 0
    if lines and lines[0].lstrip("\ufeff").rstrip() == _FRONT_MATTER_OPEN:
        for j in range(1, len(lines)):
            if lines[j].rstrip() in _FRONT_MATTER_CLOSE:
                front = (1, j + 1)
                i = j + 1
                break
    headings: list[_Heading] = []
    fenced: dict[int, int] = {}
    fence: tuple[str, int] | None = None
    blocks = 0
    in_comment = False
    paragraph: int | None = None  # 0-based start of the open paragraph; -1 when it cannot become a setext heading
    for k in range(i, len(lines)):
        line = lines[k]
        if fence is not None:
            fenced[k + 1] = blocks
            close = _FENCE_CLOSE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= fence[1]:
                fence = None
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        opening = _FENCE_OPEN.match(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = (opening.group(1)[0], len(opening.group(1)))
            blocks += 1
            fenced[k + 1] = blocks
            paragraph = None
            continue
        if _HTML_COMMENT_OPEN.match(line):
            in_comment = "-->" not in line[line.index("<!--") + 4 :]
            paragraph = None
            continue
        if not line.strip():
            paragraph = None
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append(_Heading(k + 1, k + 1, len(atx.group(1)), _atx_title(atx.group(2))))
            paragraph = None
            continue
        underline = _SETEXT_UNDERLINE.match(line)
        if underline and paragraph is not None and paragraph >= 0:
            title = " ".join(part.strip() for part in lines[paragraph:k])
            level = 1 if underline.group(1)[0] == "=" else 2
            headings.append(_Heading(paragraph + 1, k + 1, level, title))
            paragraph = None
            continue
        if _THEMATIC_BREAK.match(line):
            paragraph = None  # so a "---" right after it is another break, not a setext underline
            continue
        if paragraph is None:
            paragraph = -1 if _NOT_PARAGRAPH.match(line) else k
    return front, headings, fenced


def chunk_markdown(path: str, text: str, settings: Settings) -> list[Chunk]:
    """Draft chunks of a Markdown file: front matter, intro content, then each heading followed by its content.

    ``text`` is already redacted. Content over ``settings.max_tokens`` is split on line boundaries (paragraph and
    fence boundaries preferred, never inside a fenced block that fits alone) with ``settings.overlap_lines`` overlap.
    """
    lines = split_text_lines(text)
    front, headings, fenced = _scan(lines)
    chunks: list[Chunk] = []

    def add_content(first: int, last: int, title: str, parent_index: int | None, parent_symbol: str, tags: dict):
        while first <= last and not lines[first - 1].strip():
            first += 1
        while last >= first and not lines[last - 1].strip():
            last -= 1
        if first > last:
            return
        body = "\n".join(lines[first - 1 : last])
        if tokens.fits(body, settings.max_tokens):
            parts = [(first, last, body, 0)]
        else:
            parts = _split_section(lines, first, last, fenced, settings)
        for index, (start, end, part_text, overlap) in enumerate(parts):
            part_title = f"{title} (part {index + 1})" if len(parts) > 1 else title
            chunks.append(
                Chunk(
                    path=path,
                    language=LANGUAGE,
                    kind="content",
                    start_line=start,
                    end_line=end,
                    text=part_text,
                    name=part_title,
                    title=part_title,
                    parent=parent_symbol,
                    level=LEVEL_CONTENT,
                    chunk_index=index,
                    overlap_lines=overlap,
                    parent_index=parent_index,
                    tags=dict(tags),
                )
            )

    body_start = 1
    if front is not None:
        add_content(front[0], front[1], FRONT_MATTER_TITLE, None, "", {"front_matter": True})
        body_start = front[1] + 1
    first_heading = headings[0].start if headings else len(lines) + 1
    add_content(body_start, first_heading - 1, f"{PurePosixPath(path).name} (intro)", None, "", {})

    stack: list[tuple[int, int, str]] = []  # (level, index in chunks, symbol) of the open ancestors
    for number, heading in enumerate(headings):
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        parent_index = stack[-1][1] if stack else None
        parent_symbol = stack[-1][2] if stack else ""
        symbol = f"{parent_symbol} > {heading.title}" if parent_symbol else heading.title
        index = len(chunks)
        chunks.append(
            Chunk(
                path=path,
                language=LANGUAGE,
                kind="heading",
                start_line=heading.start,
                end_line=heading.end,
                text="\n".join(lines[heading.start - 1 : heading.end]),
                symbol=symbol,
                name=heading.title,
                title=heading.title,
                parent=parent_symbol,
                level=heading.level,
                parent_index=parent_index,
            )
        )
        stack.append((heading.level, index, symbol))
        next_start = headings[number + 1].start if number + 1 < len(headings) else len(lines) + 1
        add_content(heading.end + 1, next_start - 1, heading.title, index, symbol, {})
    return chunks


def _split_section(lines: list[str], first: int, last: int, fenced: dict[int, int],
                   settings: Settings) -> list[tuple[int, int, str, int]]:
    """Lines ``first``..``last`` (1-based, inclusive; not blank at either end) over the budget, as parts
    ``(start, end, text, overlap)``. A part never ends inside a fenced block that fits alone, nor on a blank line, and
    prefers to end a paragraph or a fenced block."""
    region = lines[first - 1 : last]
    forbidden, preferred = set(), set()
    for k in range(1, len(region)):
        n = first + k - 1  # a cut at k ends a part after line n
        if not region[k - 1].strip() or (n in fenced and fenced.get(n + 1) == fenced[n]):
            forbidden.add(k)
        elif not region[k].strip() or fenced.get(n) != fenced.get(n + 1):
            preferred.add(k)
    parts = split_lines(region, settings.max_tokens, settings.overlap_lines, preferred, forbidden=forbidden)
    return [(first + part.start, first + part.end - 1, part.text, part.overlap) for part in parts]


def check_docs(chunks: list[Chunk], text: str) -> str | None:
    """Verify the invariants of ``chunk_markdown``'s output for ``text``: None when they hold, else a one-line reason.

    Checked: line ranges are ordered and inside the file; every non-blank line is assigned (inside a chunk's range
    and its text inside that chunk's text, or for a line cut by characters, inside its parts joined); a content
    chunk's parent is a preceding heading (None only when no heading precedes it); a heading's parent is a preceding
    heading of a lower level (None only when no such heading precedes it).
    """
    lines = split_text_lines(text)
    for i, chunk in enumerate(chunks):
        if chunk.kind not in ("heading", "content"):
            return f"chunk {i} has kind {chunk.kind!r}, expected heading or content"
        if chunk.start_line < 1 or chunk.start_line > chunk.end_line or chunk.end_line > len(lines):
            return f"chunk {i} has line range {chunk.start_line}-{chunk.end_line} outside 1-{len(lines)} or reversed"

    for i, chunk in enumerate(chunks):
        reason = _check_parent(chunks, i)
        if reason:
            return reason

    assigned = [False] * (len(lines) + 1)
    cut: dict[int, list[Chunk]] = {}
    for chunk in chunks:
        if chunk.start_line == chunk.end_line:
            cut.setdefault(chunk.start_line, []).append(chunk)
        for n in range(chunk.start_line, chunk.end_line + 1):
            if not assigned[n] and lines[n - 1].strip() in chunk.text:
                assigned[n] = True
    for n, line in enumerate(lines, start=1):
        if assigned[n] or not line.strip():
            continue
        pieces = sorted(cut.get(n, []), key=lambda c: c.chunk_index)
        if pieces and line.strip() in "".join(c.text for c in pieces):
            continue
        if any(c.start_line <= n <= c.end_line for c in chunks):
            return f"line {n} lies in a chunk's range but its text is missing from the chunk"
        return f"line {n} is not assigned to any chunk"
    return None


def _check_parent(chunks: list[Chunk], i: int) -> str | None:
    chunk = chunks[i]
    index = chunk.parent_index
    if index is not None:
        if not 0 <= index < len(chunks) or index == i:
            return f"chunk {i} ({chunk.title!r}) has parent_index {index} outside the list"
        parent = chunks[index]
        if parent.kind != "heading":
            return f"chunk {i} ({chunk.title!r}) has a {parent.kind} chunk as parent, not a heading"
        if parent.start_line > chunk.start_line:
            return f"chunk {i} ({chunk.title!r}) has a parent heading that comes after it (line {parent.start_line})"
        if chunk.kind == "heading" and parent.level >= chunk.level:
            return f"heading {i} ({chunk.title!r}, level {chunk.level}) has a parent of level {parent.level}"
        return None
    for other in chunks:
        if other.kind != "heading" or other.start_line >= chunk.start_line:
            continue
        if chunk.kind == "content":
            return f"content chunk {i} ({chunk.title!r}) has no parent though heading {other.title!r} precedes it"
        if other.level < chunk.level:
            return (
                f"heading {i} ({chunk.title!r}) has no parent though {other.title!r} (level {other.level}) precedes it"
            )
    return None
