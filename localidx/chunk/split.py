"""Cutting text that is over the token budget into overlapping parts.

Used by every chunker for oversize pieces and by the fallback line windows. Parts follow line boundaries, prefer the
lines the caller marks as statement starts, repeat ``overlap`` lines of the previous part, and each part's text is
counted exactly against ``max_tokens``: no part is ever over the budget. A single line over the budget is cut by
characters (its parts keep that line's number).
"""

from __future__ import annotations

from dataclasses import dataclass

from localidx import tokens


_PLAN_FILL = 0.92


@dataclass(frozen=True)
class Part:
    start: int  # index into the lines given, inclusive
    end: int  # exclusive
    text: str
    overlap: int  # lines repeated from the previous part


def _cut_line(line: str, max_tokens: int) -> list[str]:
    pieces = []
    rest = line
    while rest:
        size = min(len(rest), max_tokens * 8)
        while size > 1 and not tokens.fits(rest[:size], max_tokens):
            size = size * 3 // 4
        pieces.append(rest[:size])
        rest = rest[size:]
    return pieces


def split_lines(
    lines: list[str],
    max_tokens: int,
    overlap: int,
    preferred: set[int] | frozenset = frozenset(),
    max_lines: int | None = None,
) -> list[Part]:
    """Cut ``lines`` into parts of at most ``max_tokens`` tokens each.

    ``preferred`` holds indexes of lines where a cut reads well (a statement starts there); the cut moves back to the
    latest such line in the last third of a part. ``overlap`` lines of each part are repeated at the start of the
    next one, capped so that each part advances by at least a third of its length. ``max_lines`` caps a part's lines
    (line windows of text files).
    """
    n = len(lines)
    # Plan with per-line costs from one exact count of the whole region (its characters per token), aiming a little
    # under the budget; every part is then counted exactly and shrunk if the plan was optimistic.
    whole = "\n".join(lines)
    ratio = max(len(whole), 1) / max(tokens.count(whole), 1)
    costs = [(len(line) + 1) / ratio for line in lines]
    target = max_tokens * _PLAN_FILL
    parts: list[Part] = []
    i = 0
    carried = 0
    while i < n:
        total = 0
        j = i
        limit = n if max_lines is None else min(n, i + max_lines)
        while j < limit and total + costs[j] <= target:
            total += costs[j]
            j += 1
        j = max(j, i + 1)
        if j < n:
            # A statement start in the last third of the part reads better than a full part; earlier ones would
            # leave a small part and push the rest into one more.
            floor = i + carried + max(1, 2 * (j - i - carried) // 3)
            cut = next((k for k in range(j, floor - 1, -1) if k in preferred and k > i + carried), None)
            if cut is not None:
                j = cut
        text = "\n".join(lines[i:j])
        while j - i > 1 and not tokens.fits(text, max_tokens):
            j -= max(1, (j - i) // 10)  # the plan was optimistic here: give back a tenth at a time
            text = "\n".join(lines[i:j])
        if j - i == 1 and not tokens.fits(text, max_tokens):
            # One line alone is over the budget: cut it by characters. The plan may have thought it would fit (a
            # base64 line costs more tokens per character than the code around it), so this is counted, not planned.
            for piece in _cut_line(lines[i], max_tokens):
                parts.append(Part(i, i + 1, piece, 0))
            i += 1
            carried = 0
            continue
        parts.append(Part(i, j, text, carried))
        if j >= n:
            break
        # Each part moves at least a third of its length past the previous one, so small budgets still progress.
        carried = min(overlap, (j - i) - max(1, -(-(j - i) // 3)))
        i = j - carried
    return parts
