"""store/vectors: the content-addressed vector cache as a SQLite file in the state dir, through real indexing of real
git repositories and work trees: vectors are reused across work trees, a damaged file costs re-embedding and never
the run, writers in several processes at once all land, and a cache table left by an older version is carried over."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from conftest import BILLING_MODULE, git
from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.store.lance import ChunkStore, cache_schema
from localidx.store.vectors import VectorCache

FILES = {
    "billing/invoice.py": BILLING_MODULE,
    "billing/tax.py": "def vat(amount, rate=0.2):\n    return round(amount * rate, 2)\n",
    "docs/guide.md": "# Billing\n\nHow invoices are totalled.\n",
}


def index(root: Path, home: Path):
    return run_index(root, True, load_settings(root, {"embed_model": "fake", "home": str(home)}))


def test_a_second_work_tree_sharing_the_state_dir_embeds_nothing(make_repo, tmp_path):
    root = make_repo(FILES)
    home = tmp_path / "state"
    first = index(root, home)
    assert first.chunks_embedded > 0
    # One file in the state dir holds the cache; no LanceDB cache table is written any more.
    assert (home / "vectors.sqlite").is_file()
    assert not list((home / "lancedb").glob("vectors_*"))
    other = tmp_path / "other-tree"
    git(root, "worktree", "add", "-q", str(other), "-b", "other")
    second = index(other, home)
    assert second.files_processed == 3
    assert second.chunks_embedded == 0 and second.chunks_reused == second.chunks_written == first.chunks_written


def test_a_damaged_cache_file_is_moved_aside_and_indexing_succeeds(make_repo, tmp_path, caplog):
    root = make_repo(FILES)
    home = tmp_path / "state"
    first = index(root, home)
    cache = home / "vectors.sqlite"
    cache.write_bytes(b"this is not a database at all\n" * 200)
    (root / "billing/tax.py").write_text("def vat(amount, rate=0.25):\n    return round(amount * rate, 3)\n")
    with caplog.at_level(logging.INFO):
        again = index(root, home)
    assert any("vector cache" in line for line in again.repairs)
    assert again.files_failed == 0 and again.chunks_pending == 0 and again.chunks_embedded >= 1
    assert (home / "vectors.sqlite.damaged").is_file()
    assert not any(r.exc_info for r in caplog.records)
    # The new file works: a rebuild takes the vectors embedded since from it.
    rebuilt = run_index(root, True, load_settings(root, {"embed_model": "fake", "home": str(home)}), rebuild=True)
    assert rebuilt.chunks_pending == 0 and rebuilt.chunks_reused >= again.chunks_embedded >= 1
    assert first.chunks_written == rebuilt.chunks_written


def test_a_truncated_cache_is_read_as_empty_and_started_afresh(tmp_path, caplog):
    path = tmp_path / "vectors.sqlite"
    cache = VectorCache(path, 8)
    keys = [f"key-{i}" for i in range(2000)]
    cache.put(keys, np.random.default_rng(0).standard_normal((2000, 8)).astype(np.float32))
    cache.close()
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 3)
    again = VectorCache(path, 8)
    with caplog.at_level(logging.WARNING):
        assert again.get(keys[:10]) == {}
        again.put(keys[:1], np.ones((1, 8), dtype=np.float32))
    assert list(again.get(keys[:3])) == ["key-0"]
    assert len([r for r in caplog.records if "damaged" in r.getMessage()]) == 1


WRITER = """
import sys
import numpy as np
from localidx.store.vectors import VectorCache

cache = VectorCache(sys.argv[1], 16)
me = int(sys.argv[2])
for batch in range(20):
    keys = [f"shared-{batch}-{i}" for i in range(50)] + [f"w{me}-{batch}-{i}" for i in range(150)]
    cache.put(keys, np.full((len(keys), 16), me, dtype=np.float32))
    assert len(cache.get(keys)) == len(keys)
print("ok")
"""


def test_writers_in_several_processes_at_once_all_land(tmp_path):
    path = tmp_path / "vectors.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    assert all(out.strip() == "ok" and "could not" not in err for out, err in results)
    assert VectorCache(path, 16).count() == 20 * 50 + 4 * 20 * 150


def test_a_cache_table_left_by_an_older_version_is_carried_over_once(tmp_path):
    db = tmp_path / "lancedb"
    old = lancedb.connect(str(db)).create_table("vectors_fake_model_d4", schema=cache_schema(4))
    old.add(pa.Table.from_pylist([{"key": "k1", "vector": [1.0, 2.0, 3.0, 4.0]}], schema=cache_schema(4)))
    store = ChunkStore(db, "worktree-a", "fake-model", 4)
    assert store.cache_get(["k1"])["k1"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert "vectors_fake_model_d4" not in store._names()
    assert ChunkStore(db, "worktree-b", "fake-model", 4).cache_count() == 1


def test_a_cache_file_of_another_layout_is_started_afresh(tmp_path):
    path = tmp_path / "vectors.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vec BLOB)")
    cache = VectorCache(path, 4)
    cache.put(["k"], np.ones((1, 4), dtype=np.float32))
    assert list(cache.get(["k"])) == ["k"] and (tmp_path / "vectors.sqlite.damaged").is_file()
