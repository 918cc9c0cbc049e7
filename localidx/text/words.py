"""The words of identifiers, and the words too common to count: shared by [META] (``localidx.chunk.enrich``), the query
side (``localidx.retrieve``) and the highlighting of ``localidx search`` (``localidx.interface.highlight``).

Light to import (a regular expression and ``tomlfile``): ``localidx search`` through a running daemon loads it to
highlight its answer, and everything else a search does happens in the daemon.
"""

from __future__ import annotations

import re
from functools import lru_cache

from localidx import tomlfile

# Word parts of an identifier, in order: "2D" units, a plural acronym (URLs, IDs), an acronym before a capitalised
# word (HTTP|Server), a lower-case word with the digits that belong to it (base64, utf8; not the 2 of parse2D), an
# acronym (IO, HTTP2), bare digits. "Lower case" includes every non-ASCII letter: those have no ASCII case to split on.
_LOWER = r"[^\W\d_A-Z]"
_DIGITS = rf"(?:\d+(?![A-Z](?!{_LOWER})))?"
_WORD_PART = re.compile(
    rf"\d+[A-Z](?!{_LOWER})|[A-Z]{{2,}}s(?!{_LOWER})|[A-Z]+(?=[A-Z]{_LOWER})"
    rf"|[A-Z]?{_LOWER}+{_DIGITS}|[A-Z]+{_DIGITS}|\d+"
)

STOPWORDS_TABLE = "stopwords"  # in data/keywords.toml: "english" and "keywords"


def split_identifier(name: str) -> list[str]:
    """The lower-case words of an identifier.

    ``verifyToken`` -> verify, token; ``HTTPServerError`` -> http, server, error; ``verify_token`` -> verify, token;
    ``parse2D`` -> parse, 2d; ``base64Encode`` -> base64, encode. Separators (``_ - . $``, spaces) only split.
    """
    return list(split_words(name))


@lru_cache(maxsize=65536)
def split_words(name: str) -> tuple[str, ...]:
    """``split_identifier`` as a tuple, remembered (the chunker splits the same names over and over)."""
    return tuple(part.lower() for part in _WORD_PART.findall(name))


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """Frequent English words and the languages' keywords: left out of identifier words, query terms and
    highlighting. Read from the ``[stopwords]`` table of ``data/keywords.toml`` alone (parsing the whole file cost a
    search's client as much as the rest of its work)."""
    text = tomlfile.package_text("localidx", "data/keywords.toml")
    start = text.find(f"\n[{STOPWORDS_TABLE}]")
    end = text.find("\n[", start + 1) if start >= 0 else -1
    try:
        table = tomlfile.loads(text[start:end] if end > start >= 0 else text)[STOPWORDS_TABLE]
    except (KeyError, tomlfile.TOMLDecodeError):  # laid out otherwise: read the whole file
        table = tomlfile.loads(text)[STOPWORDS_TABLE]
    return frozenset(table["english"]) | frozenset(table["keywords"])
