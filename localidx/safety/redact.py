"""Secret redaction: the last thing the chunker does to a file's text before anything is stored or embedded.

Flow: discover → parse → chunk → **redact** → enrich → embed → store. Two passes, one function:

- the chunker redacts a file's whole text before cutting it (``redact``; opted-in ``.env`` files ``redact_env``), so
  a secret split across chunks (a private key block) is found whole;
- ``scrub_chunks``, the choke point, runs in ``chunk.finalize`` over every text field of every chunk of a file and
  of what the file shares with them, before ids, hashes and the [META] header are made: text, symbol, title,
  signature, doc, decorators, calls, symbols, tags, imports, module doc, endpoints, then the [META] header itself.
  Those come from the parser, which reads the file's bytes, and from summaries built from them: they need their own
  pass. Everything stored (the chunk table, call relations, the catalog) and served comes from these fields.
- the LLM's explanations (``localidx.index.explain``), the reasons of the catalog's problems and the log records of the
  daemon and the hooks (``LogFilter``) pass ``redact`` too.

Invariants:
- A secret is replaced by the literal ``«redacted:KIND»`` followed by the line breaks the secret covered, so the text
  keeps its line count and every line number (chunk spans, ``Redaction.line``) stays right.
- Text outside a secret is byte-for-byte unchanged; a text without secrets comes back as the very same string object.
- Finding is ``localidx.safety.secret_scan``'s: which spans of a text are secrets, and their kinds (the kinds, what
  counts
  as a secret value and the bounds on its time are described there). This module replaces what it finds.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from localidx.safety.secret_scan import LINE_BREAKS, env_kind, find_secrets, merge_spans

REPLACEMENT = "«redacted:{kind}»"
_LINE_BREAK = re.compile("[" + "".join(sorted(LINE_BREAKS)) + "]")


@dataclass
class Redaction:
    """One secret that was replaced: its kind and the 1-based line it starts on."""

    kind: str
    line: int


def redact(text: str, deadline: float | None = None) -> tuple[str, list[Redaction]]:
    """Replace every secret in ``text`` with ``«redacted:KIND»``, keeping line breaks; return the text and what went.

    A text with nothing to redact is returned as the same object with an empty list. Past ``deadline`` (a
    ``time.monotonic()`` value, see ``deadline_after``) it raises ``RedactionTimeout``: checked between passes, so it
    overruns by one linear pass at most.
    """
    spans = find_secrets(text, deadline)
    if not spans:
        return text, []
    return _apply(text, spans)


def redact_env(text: str, deadline: float | None = None) -> tuple[str, list[Redaction]]:
    """Redact a ``.env``-style file: the value of every ``KEY=value`` whose key looks secret, and all ``redact`` finds.

    Keys look secret when one of their parts is a word such as PASSWORD, SECRET, TOKEN, KEY, CREDENTIAL, PRIVATE,
    AUTH, DSN, or the key names a database URL, unless its last part says the value only describes one
    (``TOKEN_TTL``, ``AUTH_URL``, ``PASSWORD_MIN_LENGTH``). Empty values, switches (``AUTH_ENABLED=true``) and pure
    references to another variable (``${OTHER}``, ``$OTHER``) are left alone: they hold no secret and help search.
    """
    found = find_secrets(text, deadline)
    found_starts = [s for s, _e, _k in found]
    spans: list[tuple[int, int, str]] = []
    for m in _ENV_LINE.finditer(text):
        kind = env_kind(m.group("key"))
        if kind is None:
            continue
        start, end = _env_value(text, m)
        value = text[start:end]
        if not value.strip() or _ENV_REFERENCE.match(value) or value.lower() in _ENV_FLAGS:
            continue
        # The whole value goes, but a recognised secret inside names it better (private_key, not secret): the first
        # found at or after its start, by binary search (a scan of all per line cost quadratic time, 3.6 s for a
        # 100 KB file of secret lines).
        i = bisect.bisect_left(found_starts, start)
        if i < len(found) and found[i][1] <= end:
            kind = found[i][2]
        spans.append((start, end, kind))
    spans = merge_spans(spans, found)
    if not spans:
        return text, []
    return _apply(text, spans)


_ENV_LINE = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?P<key>[A-Za-z_][\w.-]*)[ \t]*=[ \t]*"
    # The line ends before a CR too: "$" alone never matched a CRLF file's line, whose values then all stayed.
    # A raw value is the rest of the line, read once and never given back (the atomic-group idiom), its comment
    # (blanks then "#") and trailing blanks cut off by ``_env_value``: a lazy run tried the rest of the pattern
    # after every character of a long line.
    r"(?:(?:\"(?P<dq>(?:[^\"\\]|\\.)*)\"|'(?P<sq>[^']*)')[ \t]*(?:[ \t]#[^\r\n]*)?|(?=(?P<raw>[^\r\n]*))(?P=raw))"
    r"(?=\r?$)",
    re.MULTILINE,
)
_ENV_COMMENT = re.compile(r"[ \t]#")


def _env_value(text: str, m: re.Match) -> tuple[int, int]:
    """Where the value of an ``_ENV_LINE`` match lies: a quoted one's inside, or a raw one up to its comment (the
    first blanks before a "#") without its trailing blanks."""
    group = next(g for g in ("dq", "sq", "raw") if m.group(g) is not None)
    start, end = m.span(group)
    if group == "raw":
        comment = _ENV_COMMENT.search(text, start, end)
        if comment is not None:
            end = comment.start()
        end = start + len(text[start:end].rstrip(" \t"))
    return start, end


_ENV_REFERENCE = re.compile(r"^\$(?:\{[A-Za-z_]\w*\}|[A-Za-z_]\w*)$")
_ENV_FLAGS = frozenset("true false yes no on off enabled disabled none null".split())


def _apply(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[Redaction]]:
    pieces: list[str] = []
    redactions: list[Redaction] = []
    pos = 0
    line = 1
    for start, end, kind in spans:
        line += text.count("\n", pos, start)
        pieces.append(text[pos:start])
        secret = text[start:end]
        pieces.append(REPLACEMENT.format(kind=kind) + "".join(_LINE_BREAK.findall(secret)))
        redactions.append(Redaction(kind, line))
        line += secret.count("\n")
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), redactions


# -- the choke point ------------------------------------------------------------------------------------------------

_CHUNK_TEXT_FIELDS = ("text", "symbol", "name", "title", "parent", "signature", "doc")
_CHUNK_LIST_FIELDS = ("symbols", "calls", "decorators")


def _clean(value: str, deadline: float | None = None) -> str:
    return redact(value, deadline)[0] if value else value


def _clean_json(value, deadline: float | None = None):
    if isinstance(value, str):
        return _clean(value, deadline)
    if isinstance(value, list):
        return [_clean_json(v, deadline) for v in value]
    if isinstance(value, dict):
        return {k: _clean_json(v, deadline) for k, v in value.items()}
    return value


def scrub_chunks(chunks: list, ctx, deadline: float | None = None) -> None:
    """Redact, in place, every text field of a file's draft chunks (``records.Chunk``) and of its ``FileContext``
    (imports, module doc, endpoints): the one choke point all stored and served text passes (module docstring).
    Raises ``RedactionTimeout`` past ``deadline``."""
    ctx.imports[:] = [_clean(line, deadline) for line in ctx.imports]  # the same list the call relations read
    ctx.module_doc = _clean(ctx.module_doc, deadline)
    for endpoint in ctx.endpoints:
        endpoint.path, endpoint.handler = _clean(endpoint.path, deadline), _clean(endpoint.handler, deadline)
    for chunk in chunks:
        for name in _CHUNK_TEXT_FIELDS:
            if name == "text" and _whole_lines_of(chunk, ctx):
                continue  # the file's text was redacted whole (a key block split across chunks included)
            value = getattr(chunk, name)
            cleaned = _clean(value, deadline)
            if cleaned is not value:
                setattr(chunk, name, cleaned)
        for name in _CHUNK_LIST_FIELDS:
            values = getattr(chunk, name)
            if values:
                setattr(chunk, name, [_clean(v, deadline) for v in values])
        if chunk.tags:
            chunk.tags = _clean_json(chunk.tags, deadline)


def _whole_lines_of(chunk, ctx) -> bool:
    """Whether the chunk's text is exactly lines ``start_line``..``end_line`` of the file's redacted text."""
    starts = ctx.line_starts
    if not (0 < chunk.start_line <= chunk.end_line <= len(starts)):
        return False
    begin = starts[chunk.start_line - 1]
    end = starts[chunk.end_line] - 1 if chunk.end_line < len(starts) else len(ctx.text)
    return end - begin == len(chunk.text) and ctx.text.startswith(chunk.text, begin)


def scrub_header(header: str) -> str:
    """A [META] header made from scrubbed fields, through ``redact`` once more: a secret that only shows when the
    facts are joined (a signature's default beside its name) goes too."""
    return _clean(header)


class LogFilter:
    """A ``logging`` filter that redacts every record's message (with its arguments) before a handler writes it:
    the daemon's and the hooks' log files hold no secret an error message carried."""

    def filter(self, record) -> bool:
        message = record.getMessage()
        cleaned = _clean(message)
        if cleaned is not message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            import logging

            record.exc_text = _clean(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = _clean(record.exc_text)
        return True
