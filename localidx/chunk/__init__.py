"""Chunk: one file's bytes -> finalized chunks.

``chunk_file`` is the single entry point (used by ``localidx chunks``, the dry run and the indexer). It decides which
chunker reads a file — symbols for grammar-backed code, headings for Markdown, keys for config files, line windows
for any other text — after redacting secrets from the whole text (line count kept), and it checks the result: if any
non-blank line is in no chunk, or a chunker fails, the region gets a sentinel ``error`` chunk (level -99, the reason
as text) plus line windows, so nothing is ever dropped silently.

The step's modules, in the order a file passes them: ``parse`` (bytes -> tree -> Symbol records, through the
language's queries), the chunkers (``code``, ``docs``, ``config``, ``summary``, ``windows``, ``split``), ``finalize``
(identity, token counts, the redaction choke point) and ``enrich`` (the [META] header and the search text).

Layer: above ``discover`` (what a file is, decoded), ``languages``, ``safety`` and the bottom; below ``store`` (which
stores its records), ``index``, ``cluster``, ``retrieve`` and ``interface``, which may import it.
"""

from __future__ import annotations

import logging
import operator
from itertools import accumulate
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from localidx.records import LEVEL_ERROR, Chunk, FileContext

log = logging.getLogger(__name__)

MARKDOWN_EXTENSIONS = frozenset(("md", "markdown", "mdown", "mkd", "mdx"))
IMPORT_ONLY = "import-only"  # the reason an empty or import-only __init__.py has no chunks
CHUNKING_FAILED = "chunking-failed"  # the reason a file no chunker, not even line windows, could cut


def language_label(path: str) -> str:
    """The ``language`` a file's chunks carry, decided as ``chunk_file`` decides it: the grammar's name, "markdown",
    a config language, else the text type (``text`` when nothing names it)."""
    from localidx.chunk.config import config_language
    from localidx.languages import language_for_path, text_type

    spec = language_for_path(path)
    if spec is not None:
        return spec.name
    if PurePosixPath(path).suffix[1:].lower() in MARKDOWN_EXTENSIONS:
        return "markdown"
    return config_language(path) or text_type(path)


def known_languages() -> list[str]:
    """Every ``language`` a chunk can carry, sorted."""
    from localidx.chunk.config import CONFIG_LANGUAGES
    from localidx.languages import LANGUAGES, TEXT, text_labels

    return sorted({*LANGUAGES, "markdown", *CONFIG_LANGUAGES.values(), *text_labels(), TEXT})


def resolve_language(value: str) -> str:
    """The chunk ``language`` a ``--lang`` value means: a name in any case (``TypeScript``), an alias from
    ``languages.toml`` (``golang``, ``c++``) or a file extension with or without its dot (``ts``, ``.rs``). Raises
    UsageError naming the known languages for anything else, so a typo is not silently "no matches"."""
    from localidx.errors import UsageError
    from localidx.languages import alias_of

    wanted = value.strip().lower()
    known = known_languages()
    if wanted in known:
        return wanted
    named = alias_of(wanted)
    if named is not None:
        return named
    bare = wanted.lstrip(".")
    if bare and "/" not in bare:
        label = language_label(f"file.{bare}")
        if label != "text":
            return label
    from localidx.chunk.config import CONFIG_LANGUAGES
    from localidx.languages import LANGUAGES

    named = sorted({*LANGUAGES, "markdown", *CONFIG_LANGUAGES.values()})
    raise UsageError(f"unknown language {value!r}: use one of {', '.join(named)}, a file extension (sql, html, ...) "
                     "or text")


@dataclass
class FileChunks:
    path: str
    language: str = ""
    chunks: list[Chunk] = field(default_factory=list)
    skipped: str | None = None  # a discover.SKIP_REASONS value when the file is not chunked
    invalid_utf8: bool = False
    redactions: int = 0
    errors: list[str] = field(default_factory=list)  # reasons of the sentinel chunks
    symbols: int = 0
    size: int = 0
    imports: list[str] = field(default_factory=list)  # import statements' text (call relations read them)


def _line_starts(lines) -> list[int]:
    """Where each of ``lines`` starts in the text they were split from at single-character line breaks."""
    return list(map(operator.add, accumulate(map(len, lines), initial=0), range(len(lines))))


def _line_offsets(data: bytes) -> list[int]:
    """The byte offset of each line of ``data``, then ``len(data)``."""
    offsets = _line_starts(data.split(b"\n"))
    offsets.append(len(data))
    return offsets


def _split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their line breaks (a CR before a LF is part of the break)."""
    lines = text.split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def _uncovered(chunks: list[Chunk], lines: list[str]) -> list[tuple[int, int]]:
    """Runs of non-blank lines in no chunk's range (blank lines inside a run do not end it)."""
    count = len(lines)
    covered = bytearray(count + 2)
    for chunk in chunks:
        covered[chunk.start_line : chunk.end_line + 1] = b"\x01" * (chunk.end_line - chunk.start_line + 1)
    covered[count + 1] = 1
    gaps: list[tuple[int, int]] = []
    n = covered.find(0, 1)
    while 0 < n <= count:
        end = covered.find(1, n)  # lines n..end-1 are in no chunk
        blank = [not line.strip() for line in lines[n - 1 : end - 1]]
        if not all(blank):
            gaps.append((n + blank.index(False), end - 1 - blank[::-1].index(False)))
        n = covered.find(0, end)
    return gaps


def error_chunk(path: str, language: str, start: int, end: int, reason: str) -> Chunk:
    """A sentinel chunk saying that lines ``start``..``end`` could not be chunked, and why."""
    return Chunk(path=path, language=language, kind="error", start_line=start, end_line=end, level=LEVEL_ERROR,
                 text=f"localidx could not chunk {path}:{start}-{end}: {reason}", title=f"error: {reason}")


def _import_only(lines: list[str], imports: list[tuple[int, int, str]]) -> bool:
    in_import = bytearray(len(lines) + 2)
    for start, end, _text in imports:
        in_import[start : end + 1] = b"\x01" * (end - start + 1)
    return all(in_import[n] or not line.strip() or line.lstrip().startswith("#") for n, line in enumerate(lines, 1))


def chunk_file(path: str, data: bytes, settings) -> FileChunks:
    """Chunk one file. ``path`` is repo-relative (forward slashes); ``data`` its bytes. Never raises: a chunker that
    fails costs the file its symbol chunks (``unparsed_file``), never the run."""
    from localidx.safety.secret_scan import RedactionTimeout

    try:
        return _chunk_file(path, data, settings)
    except RedactionTimeout:
        reason = f"redaction took over {settings.parse_timeout_s:g} s"
        log.warning("%s: %s", path, reason)
        return _unredacted_file(path, data, reason)
    except Exception as exc:  # noqa: BLE001 - a bug in a chunker must cost one file, not the run
        reason = f"chunking failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        log.warning("%s: %s", path, reason)
        return unparsed_file(path, data, settings, reason)


def _unredacted_file(path: str, data: bytes, reason: str) -> FileChunks:
    """A file whose redaction ran out of time: an error chunk with ``reason`` and none of its text, which cannot be
    said to hold no secret (so no line windows either)."""
    from localidx.chunk.finalize import finalize
    from localidx.languages import language_for_path, text_type

    spec = language_for_path(path)
    language = spec.name if spec is not None else text_type(path)
    chunk = error_chunk(path, language, 1, data.count(b"\n") + 1, reason)
    chunk.start_byte, chunk.end_byte = 0, len(data)
    return FileChunks(path=path, language=language, size=len(data), errors=[reason],
                      chunks=finalize([chunk], FileContext(path=path, language=language)))


def unparsed_file(path: str, data: bytes, settings, reason: str) -> FileChunks:
    """A file chunked without its parser or chunker: an error chunk with ``reason`` and line windows of the whole
    text (redacted), so it stays searchable; skipped as ``chunking-failed`` if even that fails."""
    from localidx.chunk.finalize import finalize
    from localidx.chunk.windows import chunk_windows
    from localidx.discover import decode_source
    from localidx.languages import language_for_path, text_type
    from localidx.safety.redact import redact

    result = FileChunks(path=path, size=len(data), errors=[reason])
    try:
        red_text, redactions = redact(decode_source(data).text)
        result.redactions = len(redactions)
        lines = _split_lines(red_text)
        spec = language_for_path(path)
        result.language = spec.name if spec is not None else text_type(path)
        chunks = [error_chunk(path, result.language, 1, max(1, len(lines)), reason)]
        chunks += chunk_windows(path, result.language, lines, settings)
        offsets = _line_offsets(data)
        for chunk in chunks:
            chunk.start_byte, chunk.end_byte = offsets[chunk.start_line - 1], offsets[min(chunk.end_line,
                                                                                          len(offsets) - 1)]
        result.chunks = finalize(chunks, FileContext(path=path, language=result.language))
    except Exception as exc:  # noqa: BLE001
        log.warning("%s: cannot even be cut into windows: %s: %s", path, type(exc).__name__, exc)
        result.chunks = []
        result.skipped = CHUNKING_FAILED
    return result


def _chunk_file(path: str, data: bytes, settings) -> FileChunks:
    from localidx.chunk.config import chunk_config, config_language
    from localidx.chunk.docs import check_docs, chunk_markdown
    from localidx.chunk.finalize import finalize
    from localidx.chunk.windows import chunk_windows
    from localidx.discover import check_content, decode_source
    from localidx.languages import language_for_path, text_type
    from localidx.safety.redact import redact, redact_env
    from localidx.safety.secret_scan import deadline_after

    result = FileChunks(path=path, size=len(data))
    reason = check_content(path, data, settings)
    if reason:
        result.skipped = reason
        return result
    source = decode_source(data)
    text = source.text
    result.invalid_utf8 = source.invalid_utf8
    spec = language_for_path(path)
    config_lang = config_language(path)
    is_markdown = PurePosixPath(path).suffix[1:].lower() in MARKDOWN_EXTENSIONS
    # The parse timeout bounds each redaction pass too: the file's text here, every field at the choke point.
    red_text, redactions = (redact_env if config_lang == "dotenv" else redact)(
        text, deadline_after(settings.parse_timeout_s))
    result.redactions = len(redactions)
    lines = _split_lines(red_text)
    ctx = FileContext(path=path, language="", invalid_utf8=result.invalid_utf8)
    chunks: list[Chunk] = []
    if spec is not None:
        ctx.language = result.language = spec.name
        # The parser reads the bytes of the text (past a byte-order mark), so a mark cannot change a symbol.
        chunks = _chunk_source(path, spec, data[source.start:], lines, settings, ctx, result)
        if result.skipped:
            return result
    elif is_markdown:
        ctx.language = result.language = "markdown"
        chunks = chunk_markdown(path, red_text, settings)
        problem = check_docs(chunks, red_text)
        if problem:
            result.errors.append(problem)
            chunks = [error_chunk(path, "markdown", 1, len(lines), problem)]
            chunks += chunk_windows(path, "markdown", lines, settings)
    elif config_lang is not None:
        ctx.language = result.language = config_lang
        chunks = chunk_config(path, red_text, config_lang, settings)
    else:
        ctx.language = result.language = text_type(path)
        chunks = chunk_windows(path, ctx.language, lines, settings)
    for start, end in _uncovered(chunks, lines):
        reason = f"lines {start}-{end} were in no chunk"
        log.warning("%s: %s", path, reason)
        result.errors.append(reason)
        chunks.append(error_chunk(path, ctx.language, start, end, reason))
        chunks.extend(chunk_windows(path, ctx.language, lines, settings, start=start, end=end))
    offsets = _line_offsets(data)
    for chunk in chunks:
        # Byte spans of the original file: redaction and UTF-8 repair keep lines, not bytes.
        chunk.start_byte, chunk.end_byte = offsets[chunk.start_line - 1], offsets[min(chunk.end_line, len(offsets) - 1)]
    ctx.text = "\n".join(lines)
    ctx.line_starts = _line_starts(lines)
    result.chunks = finalize(chunks, ctx, deadline_after(settings.parse_timeout_s))
    return result


def _chunk_source(path, spec, data, lines, settings, ctx, result) -> list[Chunk]:
    from localidx.chunk.code import chunk_code
    from localidx.chunk.parse import ParseError, parse
    from localidx.chunk.summary import summary_chunk, wants_summary
    from localidx.chunk.windows import chunk_windows

    try:
        parsed = parse(spec, data, timeout_s=settings.parse_timeout_s)
    except ParseError as exc:
        result.errors.append(str(exc))
        return [error_chunk(path, spec.name, 1, max(1, len(lines)), str(exc))] + chunk_windows(
            path, spec.name, lines, settings
        )
    result.symbols = len(parsed.symbols)
    ctx.imports = [text for _s, _e, text in parsed.imports]
    result.imports = ctx.imports
    ctx.module_doc = parsed.module_doc
    ctx.endpoints = parsed.endpoints
    if PurePosixPath(path).name == "__init__.py" and _import_only(lines, parsed.imports):
        result.skipped = IMPORT_ONLY
        return []
    chunks = chunk_code(path, parsed, lines, settings)
    if chunks and wants_summary(path, parsed, settings):
        chunks.insert(0, summary_chunk(path, parsed, len(lines), settings.max_tokens))
        for chunk in chunks[1:]:
            if chunk.parent_index is not None:
                chunk.parent_index += 1
    return chunks
