"""``chunks/show``: how files of the work tree are chunked, as ``localidx chunks --json`` (``localidx.index.preview``).

Read-only: the files are read and chunked with the daemon's settings by its already loaded chunker, on this
connection's thread; nothing is written, so it never waits for the writer.
"""

from __future__ import annotations


def handle(daemon, params: dict) -> dict:
    """``{files: [{path, language, skipped, chunks}]}`` for ``params["paths"]`` (``chunk_paths``)."""
    from localidx.index.preview import chunk_paths

    return chunk_paths(daemon.root, params["paths"], daemon.settings, max_tokens=params.get("max_tokens"))
