"""Finalize: give draft chunks their identity, token counts, tags and [META] header.

Identity is content-addressed and positional: the same file content at the same path gives the same ids on every
run and machine. ``id`` = SHA-256 of (path, kind, lines, part index, content hash), 32 hex digits;
``span_hash`` = SHA-256 of ``path:start_line:end_line``; ``content_hash`` = SHA-256 of the text.
"""

from __future__ import annotations

import hashlib

from localidx import enrich, tokens
from localidx.chunk.model import Chunk, FileContext


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def finalize(chunks: list[Chunk], ctx: FileContext) -> list[Chunk]:
    """Fill ``id``, hashes, ``token_count``, ``parent_id``, ``tags`` and ``header`` of a file's drafts."""
    counts = tokens.count_many([c.text for c in chunks])
    for chunk, count in zip(chunks, counts):
        chunk.content_hash = _sha(chunk.text)
        chunk.span_hash = _sha(f"{chunk.path}:{chunk.start_line}:{chunk.end_line}")
        key = f"{chunk.path}\n{chunk.kind}\n{chunk.start_line}\n{chunk.end_line}\n{chunk.chunk_index}\n{chunk.content_hash}"
        chunk.id = _sha(key)[:32]
        chunk.token_count = count
    for chunk in chunks:
        if chunk.parent_index is not None:
            chunk.parent_id = chunks[chunk.parent_index].id
        if ctx.invalid_utf8:
            chunk.tags["invalid_utf8"] = True
        chunk.tags = enrich.tags(chunk, ctx)
        chunk.header = enrich.header(chunk, ctx, chunk.token_count)
    return chunks
