"""Text from outside, made safe where it crosses an edge: to print on one line.

File names, symbols and messages can hold any character a file system or a user allows. Plain (non-JSON) output is
read line by line — ``path:line`` by editors and terminals, ``grep`` and ``cut`` by scripts — so every plain printer
passes what it did not write itself through ``printable``. JSON output needs none of this: JSON escapes for itself.

Pure functions, nothing imported beyond the standard library: the CLI and the git hooks load this module.
"""

from __future__ import annotations

import re

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
