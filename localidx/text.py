"""Text from outside, made safe where it crosses an edge: to encode (``valid_text``) and to print on one line
(``printable``).

Command-line arguments, socket frames and MCP calls can carry text that is not valid Unicode: bytes that were not
UTF-8 (Python hands them over as lone surrogates, ``\udcff``, by ``surrogateescape``) and lone surrogates from JSON
(``"\ud800"``). Such a string cannot be encoded, so a tokenizer, a database or a JSON writer fails on it;
``valid_text`` is applied where query text enters (the CLI, the MCP tools, the retrieve layer).

File names, symbols and messages can hold any character a file system or a user allows. Plain (non-JSON) output is
read line by line — ``path:line`` by editors and terminals, ``grep`` and ``cut`` by scripts — so every plain printer
passes what it did not write itself through ``printable``. JSON output needs none of this: JSON escapes for itself.

Pure functions, nothing imported beyond the standard library: the CLI and the git hooks load this module.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_ESCAPED_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # surrogates surrogateescape never makes


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: bytes that surrogateescape carried are decoded as UTF-8 where they form it (a
    UTF-8 name split by a bad byte keeps its good characters), and anything else that is not text becomes U+FFFD.
    Valid text comes back unchanged (the same object)."""
    if not _SURROGATE.search(text):
        return text
    data = _NOT_ESCAPED_BYTE.sub("\ufffd", text).encode("utf-8", "surrogateescape")
    return data.decode("utf-8", "replace")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and lone surrogates (a name's bytes that were
# not UTF-8, as Python's surrogateescape carries them): each would break a line, move the cursor or fail to encode.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for one byte that was not UTF-8: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text) -> str:
    """``text`` on one line of plain output: newlines, tabs and other control characters as backslash escapes
    (``\\n``, ``\\t``, ``\\x1b``), bytes that were not UTF-8 as ``\\xff``. Text without them comes back unchanged."""
    text = str(text)
    return _UNPRINTABLE.sub(_escape, text) if _UNPRINTABLE.search(text) else text
