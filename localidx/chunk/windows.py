"""Line windows: the fallback for text no grammar reads, and for regions a parser could not chunk.

Windows hold at most ``settings.window_lines`` lines and ``settings.max_tokens`` tokens, prefer to start at a
paragraph (after a blank line) and overlap by ``settings.overlap_lines``.
"""

from __future__ import annotations

from localidx.chunk.split import split_lines
from localidx.config import Settings
from localidx.records import Chunk


def chunk_windows(path: str, language: str, lines: list[str], settings: Settings, start: int = 1,
                  end: int | None = None, kind: str = "window") -> list[Chunk]:
    """Window chunks over lines ``start``..``end`` (1-based, inclusive) of ``lines``; blank edges are trimmed."""
    end = len(lines) if end is None else end
    while start <= end and not lines[start - 1].strip():
        start += 1
    while end >= start and not lines[end - 1].strip():
        end -= 1
    if start > end:
        return []
    region = lines[start - 1 : end]
    preferred = {i for i in range(1, len(region)) if not region[i - 1].strip()}
    parts = split_lines(region, settings.max_tokens, settings.overlap_lines, preferred, max_lines=settings.window_lines)
    chunks = []
    for k, part in enumerate(parts):
        first, last = start + part.start, start + part.end - 1
        chunks.append(Chunk(path=path, language=language, kind=kind, start_line=first, end_line=last, text=part.text,
                            title=f"{path}:{first}-{last}", chunk_index=k, overlap_lines=part.overlap))
    return chunks
