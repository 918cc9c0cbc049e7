"""The lines of a match worth showing, and the query's terms highlighted in them.

Place in the flow: the last step of ``localidx search``'s plain output (``cli.py``), after the search itself. A match
shows the lines of its chunk that hold one of the query's terms, with their line numbers and their indentation, at
most ``MAX_LINES`` of them; a chunk where no term is found (a match by meaning alone) shows its first lines. On a
terminal the terms are highlighted; ``--color`` and ``NO_COLOR`` decide (``use_color``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

MAX_LINES = 3  # lines shown per match
WIDTH = 120  # a line is cut at this many characters
_WORD = re.compile(r"[A-Za-z0-9_]+")

BOLD_RED, GREEN, MAGENTA, RESET = "\x1b[1;31m", "\x1b[32m", "\x1b[35m", "\x1b[0m"


def use_color(choice: str, is_tty: bool, env: dict | None = None) -> bool:
    """``always``/``never`` as said; ``auto`` colours a terminal unless ``NO_COLOR`` is set (https://no-color.org)."""
    env = os.environ if env is None else env
    if choice == "always":
        return True
    if choice == "never":
        return False
    return is_tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"


def query_terms(query: str) -> list[str]:
    """The stems of the query's words that a line may hold: identifiers split into words, stopwords dropped, a
    plural's or past tense's ending cut (``redirects`` -> ``redirec``, ``followed`` -> ``follow``), lower case."""
    from localidx.text.words import split_identifier, stopwords

    stop = stopwords()
    terms: list[str] = []
    for token in _WORD.findall(query):
        for word in dict.fromkeys([token.lower(), *split_identifier(token)]):
            if len(word) < 2 or word in stop:
                continue
            stem = word[:-2] if len(word) > 5 and word.endswith(("es", "ed", "ng")) else word
            stem = stem[:-1] if len(stem) > 4 and stem.endswith("s") else stem
            if stem not in terms:
                terms.append(stem)
    return sorted(terms, key=len, reverse=True)


@dataclass(frozen=True)
class Line:
    number: int
    text: str  # indentation kept, tabs as four spaces, cut at WIDTH
    spans: tuple[tuple[int, int], ...]  # where the terms are in ``text``


def _spans(text: str, pattern: re.Pattern | None) -> tuple[tuple[int, int], ...]:
    return tuple(m.span() for m in pattern.finditer(text)) if pattern else ()


def snippet(text: str, start_line: int, terms: list[str]) -> list[Line]:
    """The chunk's lines holding a term (``MAX_LINES`` at most, in order), or its first non-blank lines."""
    # A stem is highlighted to the end of its word's letters: "redirec" lights up all of "redirects".
    pattern = re.compile("(?:" + "|".join(re.escape(t) for t in terms) + ")[a-z]*", re.IGNORECASE) if terms else None
    lines = [(start_line + n, line.replace("\t", "    ")[:WIDTH]) for n, line in enumerate(text.splitlines())]
    hits = [(n, line) for n, line in lines if line.strip() and pattern and pattern.search(line)]
    chosen = hits[:MAX_LINES] or [(n, line) for n, line in lines if line.strip()][:MAX_LINES]
    return [Line(n, line.rstrip(), _spans(line.rstrip(), pattern)) for n, line in chosen]


def render(line: Line, color: bool, printable) -> str:
    """``    NUMBER: text``, the terms in bold red when ``color`` (``printable`` makes each piece one safe line)."""
    if not color or not line.spans:
        body = printable(line.text)
    else:
        pieces, at = [], 0
        for begin, end in line.spans:
            pieces.append(printable(line.text[at:begin]) + BOLD_RED + printable(line.text[begin:end]) + RESET)
            at = end
        body = "".join(pieces) + printable(line.text[at:])
    number = f"{GREEN}{line.number}{RESET}" if color else str(line.number)
    return f"    {number}: {body}"
