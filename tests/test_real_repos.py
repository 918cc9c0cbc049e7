"""Bugs found on real public repositories, each as a small fixture under ``tests/fixtures/real/`` and a test that
fails without its fix. The soak run (``benchmarks/soak.py``) is where they are found; these tests keep them fixed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from localidx.chunk import chunk_file
from localidx.config import load_settings
from localidx.indexer import open_index, run_index

FIXTURES = Path(__file__).parent / "fixtures" / "real"


def settings_for(root: Path, **extra):
    return load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index"), **extra})


def test_functions_sharing_one_line_are_one_chunk_and_the_file_indexes(make_repo):
    # sphinx-doc/sphinx at 752d3285d250 (and 12 of 16 sphinx commits from 2020-2023): a bundled underscore.js defines
    # many functions on one long line. Each function's chunk was that whole line, with the same id, and indexing
    # stopped with "UNIQUE constraint failed: rel_chunks.cid" (exit 3, nothing usable).
    source = (FIXTURES / "one_line_library.js").read_bytes()
    result = chunk_file("lib/one_line_library.js", source, load_settings())
    ids = Counter(c.id for c in result.chunks)
    assert max(ids.values()) == 1
    line_chunk = next(c for c in result.chunks if c.start_line == 2)
    assert line_chunk.symbols == ["sumOver", "sumUnder", "sumAll"]

    repo = make_repo({"lib/one_line_library.js": source, "app.py": "def main():\n    return 1\n"})
    stats = run_index(repo, True, settings_for(repo))
    assert stats.files_processed == 2 and not stats.errors
    idx = open_index(repo, True, settings_for(repo), read_only=True)
    try:
        rows = idx.store.snapshot().search().select(["id", "path"]).limit(None).to_arrow().to_pylist()
    finally:
        idx.close()
    assert {r["path"] for r in rows} == {"lib/one_line_library.js", "app.py"}
    assert len({r["id"] for r in rows}) == len(rows)
