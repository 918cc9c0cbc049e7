"""Text from outside, made safe where it crosses an edge: to encode (``valid_text``), to print on one line
(``printable``) and to reach a terminal at all (``terminal_text``).

Command-line arguments, socket frames and MCP calls can carry text that is not valid Unicode: bytes that were not
UTF-8 (Python hands them over as lone surrogates, ``\udcff``, by ``surrogateescape``) and lone surrogates from JSON
(``"\ud800"``). Such a string cannot be encoded, so a tokenizer, a database or a JSON writer fails on it;
``valid_text`` is applied where query text enters (the CLI, the MCP tools, the retrieve layer).

File names, symbols and messages can hold any character a file system or a user allows. Plain (non-JSON) output is
read line by line — ``path:line`` by editors and terminals, ``grep`` and ``cut`` by scripts — so every plain printer
passes what it did not write itself through ``printable``. JSON output needs none of this: JSON escapes for itself
(``json_text`` adds what JSON leaves raw: DEL and C1).

A terminal acts on what it is sent: ESC ] 52 writes the clipboard, ESC ] 0 sets the window title, ESC ] 8 makes a
link, CSI sequences move the cursor or hide text, C1 bytes (U+0080-U+009F) are the same controls in one character.
File content (a context pack, an LLM's answer that quotes it, a log line) holds whatever its author put there, so
everything a command writes to a terminal passes ``terminal_text`` (``localidx.interface.console.TerminalStream``
applies it to
the CLI's stdout and stderr): the controls are shown as escapes, ``\x1b`` and ``\x9b``, never acted on.

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


# What a terminal acts on in multi-line text: C0 controls but newline and tab, a carriage return not ending a line
# (it would let the rest of the line overwrite what came before), DEL, C1, and lone surrogates (they cannot be encoded).
_CONTROL = "\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]"
_TERMINAL = re.compile(_CONTROL)
_STYLED = re.compile(f"(\x1b\\[[0-9;]*m|\r)|{_CONTROL}")  # SGR (colour) sequences and carriage returns kept


def _escape_control(match: re.Match) -> str:
    return match.group(1) or _escape(match) if match.re is _STYLED else _escape(match)


def terminal_text(text, styled: bool = False) -> str:
    """``text`` as it may reach a terminal: lines and tabs kept, every other control character (C0, DEL, C1: the
    start of any CSI, OSC or DCS sequence) as a visible escape, ``\\x1b``. ``styled`` keeps colour (SGR) sequences and
    carriage returns, for lines localidx composed itself around text that has passed ``printable``. Idempotent; text
    without controls comes back unchanged."""
    text = str(text)
    pattern = _STYLED if styled else _TERMINAL
    return pattern.sub(_escape_control, text) if pattern.search(text) else text


_JSON_RAW = re.compile("[\x7f-\x9f\ud800-\udfff]")  # what json.dumps(ensure_ascii=False) leaves unescaped


def json_text(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with DEL, C1 and lone surrogates written as ``\\u`` escapes:
    the same JSON value, and nothing in it a terminal acts on (JSON's syntax is ASCII, so these occur only in
    strings)."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _JSON_RAW.search(text) else text
