"""Finalize: give draft chunks their identity, token counts, tags and [META] header.

Identity is content-addressed and positional: the same file content at the same path gives the same ids on every
run and machine. ``id`` = SHA-256 of (path, kind, lines, part index, content hash), 32 hex digits;
``span_hash`` = SHA-256 of ``path:start_line:end_line``; ``content_hash`` = SHA-256 of the text.

Ids are unique within a file: drafts with the same identity are one chunk. They occur where several symbols share
their lines (minified or generated code with many functions on one long line: every symbol's chunk is that whole
line), and they are kept once, holding every symbol in ``symbols``. The store keys rows and call relations by id, so
a repeated id would make a file impossible to write.
"""

from __future__ import annotations

import hashlib

import localidx.chunk.enrich as enrich
from localidx.records import Chunk, FileContext
from localidx.safety.redact import scrub_chunks, scrub_header
from localidx.text import tokens


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def finalize(chunks: list[Chunk], ctx: FileContext, deadline: float | None = None) -> list[Chunk]:
    """Fill ``id``, hashes, ``token_count``, ``parent_id``, ``tags`` and ``header`` of a file's drafts, after every
    text field has passed the redaction choke point (``redact.scrub_chunks``; ``secret_scan.RedactionTimeout`` past
    ``deadline``, the file's redaction deadline)."""
    scrub_chunks(chunks, ctx, deadline)
    counts = tokens.count_many([c.text for c in chunks])
    for chunk, count in zip(chunks, counts):
        chunk.content_hash = _sha(chunk.text)
        chunk.span_hash = _sha(f"{chunk.path}:{chunk.start_line}:{chunk.end_line}")
        key = f"{chunk.path}\n{chunk.kind}\n{chunk.start_line}\n{chunk.end_line}\n{chunk.chunk_index}\n{chunk.content_hash}"
        chunk.id = _sha(key)[:32]
        chunk.token_count = count
    for chunk in chunks:
        if chunk.parent_index is not None:
            chunk.parent_id = chunks[chunk.parent_index].id  # a twin's id is its kept copy's id
    chunks = _without_twins(chunks)
    for chunk in chunks:
        if ctx.invalid_utf8:
            chunk.tags["invalid_utf8"] = True
        chunk.tags, header = enrich.tags_and_header(chunk, ctx, chunk.token_count)
        chunk.header = scrub_header(header)
    return chunks


def _without_twins(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks with each id once: a later twin's symbols and calls go to the first (see the module docstring)."""
    first: dict[str, Chunk] = {}
    kept: list[Chunk] = []
    for chunk in chunks:
        lead = first.get(chunk.id)
        if lead is None:
            first[chunk.id] = chunk
            kept.append(chunk)
            continue
        if not lead.symbols and lead.symbol:
            lead.symbols = [lead.symbol]
        names = chunk.symbols or ([chunk.symbol] if chunk.symbol else [])
        lead.symbols = list(dict.fromkeys([*lead.symbols, *names]))
        lead.calls = list(dict.fromkeys([*lead.calls, *chunk.calls]))
    return kept
