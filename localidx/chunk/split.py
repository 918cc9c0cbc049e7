"""Cutting text that is over the token budget into overlapping parts: the one line splitter.

Used by every chunker for oversize pieces (code, Markdown sections, config entries) and by the fallback line windows.
Parts follow line boundaries, prefer the lines the caller marks as good places to start a part, never end where the
caller forbids a cut (Markdown: inside a fenced code block, after a blank line) unless what cannot be parted is alone
over the budget, repeat ``overlap`` lines of the previous part, and each part's text is counted exactly against
``max_tokens``: no part is ever over the budget. A single line over the budget is cut by characters (its parts keep
that line's number and join back to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from localidx.text import tokens


_PLAN_FILL = 0.92


@dataclass(frozen=True)
class Part:
    start: int  # index into the lines given, inclusive
    end: int  # exclusive
    text: str
    overlap: int  # lines repeated from the previous part


def _cut_line(line: str, max_tokens: int) -> list[str]:
    """Cut one over-budget line into pieces that fit, each as long as the budget allows (at most ``max_tokens * 8``
    characters, which bounds the counting on a huge line), preferring to cut after whitespace; they join back to it."""
    pieces = []
    rest = line
    while not tokens.fits(rest, max_tokens):
        lo, hi = 1, min(len(rest) - 1, max_tokens * 8)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if tokens.fits(rest[:mid], max_tokens):
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = max(rest.rfind(" ", 0, cut), rest.rfind("\t", 0, cut))
        if space >= 0 and space + 1 >= cut // 2:
            cut = space + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def split_lines(
    lines: list[str],
    max_tokens: int,
    overlap: int,
    preferred: set[int] | frozenset = frozenset(),
    max_lines: int | None = None,
    forbidden: set[int] | frozenset = frozenset(),
) -> list[Part]:
    """Cut ``lines`` into parts of at most ``max_tokens`` tokens each.

    A cut at ``k`` ends a part before ``lines[k]``. ``preferred`` holds the ``k`` where a cut reads well (a statement
    starts there); the cut moves back to the latest such line in the last third of a part. ``forbidden`` holds the
    ``k`` where a part may not end: the cut moves to the latest allowed one, or to the first allowed one after the
    budget's end when the part still fits; failing both, the repeated lines are dropped, and only what cannot be
    parted alone over the budget is cut where the budget ends. ``overlap`` lines of each part are repeated at the
    start of the next one, capped so that each part advances by at least a third of its length. ``max_lines`` caps a
    part's lines (line windows of text files).
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
        if not carried:
            # A part that repeats nothing starts with a line of text: blank lines between parts belong to neither.
            while i < n and not lines[i].strip():
                i += 1
            if i == n:
                break
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
            cut = next((k for k in range(j, floor - 1, -1)
                        if k in preferred and k > i + carried and k not in forbidden), None)
            if cut is not None:
                j = cut
        text = "\n".join(lines[i:j])
        while j - i > 1 and not tokens.fits(text, max_tokens):
            j -= max(1, (j - i) // 10)  # the plan was optimistic here: give back a tenth at a time
            text = "\n".join(lines[i:j])
        if j < n and j in forbidden:
            allowed = _allowed_cut(lines, i, j, carried, limit, max_tokens, forbidden)
            if allowed is None and carried:
                # The repeated lines pushed what cannot be parted over the budget; on its own it may fit.
                i += carried
                carried = 0
                continue
            if allowed is not None:
                j = allowed
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


def _allowed_cut(lines: list[str], i: int, j: int, carried: int, limit: int, max_tokens: int,
                 forbidden: set[int] | frozenset) -> int | None:
    """The latest cut before ``j`` that is not forbidden and brings a new line, else the first one after ``j`` that
    keeps ``lines[i:cut]`` within the budget; None when neither exists. ``lines[i:j]`` fits."""
    back = next((k for k in range(j - 1, i + carried, -1) if k not in forbidden), None)
    if back is not None:
        return back
    ahead = next((k for k in range(j + 1, limit + 1) if k not in forbidden or k == len(lines)), None)
    if ahead is not None and tokens.fits("\n".join(lines[i:ahead]), max_tokens):
        return ahead
    return None
