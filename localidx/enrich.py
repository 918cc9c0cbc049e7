"""[META] search text (minimal placeholder with the agreed API; the full keyword-table version replaces it)."""

from __future__ import annotations

import re

from localidx.chunk.model import Chunk, FileContext

META_VERSION = 1
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def split_identifier(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


def identifier_words(text: str, limit: int = 40) -> list[str]:
    seen: dict[str, None] = {}
    for ident in _IDENT.findall(text):
        for w in split_identifier(ident):
            seen.setdefault(w, None)
            if len(seen) >= limit:
                return list(seen)
    return list(seen)


def tags(chunk: Chunk, ctx: FileContext) -> dict:
    out = dict(chunk.tags)
    out["is_api_endpoint"] = "http_path" in out
    out["has_async"] = bool(re.search(r"\b(async|await)\b", chunk.text))
    out["is_test"] = "test" in chunk.path
    out["priority"] = 10 if out["is_api_endpoint"] or chunk.kind == "method" else 5 if chunk.kind == "class" else 0
    return out


def header(chunk: Chunk, ctx: FileContext, text_tokens: int) -> str:
    lines = [f"[META] File: {chunk.path}", f"[META] Language: {chunk.language}"]
    if "http_path" in chunk.tags:
        lines.append(f"[META] Endpoint: {chunk.tags.get('http_method')} {chunk.tags['http_path']}")
    if chunk.symbol:
        lines.append(f"[META] Symbol: {chunk.kind.capitalize()} {chunk.symbol}")
    return "\n".join(lines)


def search_text(chunk: Chunk, ctx: FileContext, text_tokens: int) -> str:
    return header(chunk, ctx, text_tokens) + "\n" + chunk.text
