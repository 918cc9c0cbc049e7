"""How files are chunked, as ``localidx chunks`` shows them: the library side of the ``chunks/show`` method.

Place in the flow: beside the index, not in it: the files are read and chunked as the indexer would (the work
tree's settings, the same chunker) and nothing is written. The CLI calls ``chunk_paths`` through
``localidx.interface.backend``,
so the work tree's daemon answers when one runs (its chunker is already loaded) and the command does it itself
otherwise; either way the answer is this function's.
"""

from __future__ import annotations

from pathlib import Path

from localidx.errors import UsageError


def chunk_paths(root: Path, paths: list[str], settings, max_tokens: int | None = None) -> dict:
    """``{files: [{path, language, skipped, chunks: [Chunk.to_dict(), ...]}]}`` for the work tree's files at
    ``paths`` (relative to ``root``, forward slashes), in their order. ``max_tokens`` chunks with that limit instead
    of the settings' (as the CLI's ``--max-tokens``). UsageError for a path outside the work tree or a file that
    cannot be read."""
    from localidx.chunk import chunk_file
    from localidx.discover.files import TooLarge, read_source

    if max_tokens is not None:
        from localidx.config import load_settings

        settings = load_settings(root, {"max_tokens": max_tokens})
    top = Path(root).resolve()
    files = []
    for rel in paths:
        path = top / rel
        if Path(rel).is_absolute() or not path.resolve().is_relative_to(top):
            raise UsageError(f"{rel} is outside the repository at {root}")
        try:
            data = read_source(path, settings.max_file_bytes)
        except TooLarge:
            files.append({"path": rel, "language": "", "skipped": "too-large", "chunks": []})
            continue
        result = chunk_file(rel, data, settings)
        files.append({"path": rel, "language": result.language, "skipped": result.skipped,
                      "chunks": [] if result.skipped else [c.to_dict() for c in result.chunks]})
    return {"files": files}
