"""store/lance: the chunk tables and the vector cache on a real LanceDB in a temp dir.

What a user would notice: after an update a file's rows are all new or all old, never a mix, and a query that
started before the update keeps reading what it started on; a path with a quote in it is no problem; rows still
waiting for a vector are embedded most important first; identical text is embedded once; changing the model builds
a separate table instead of mixing vectors; a read-only open of a missing index writes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import localidx.store.lance as lance_store
from localidx.store.lance import FTS_COLUMN, ChunkStore, chunk_schema, embed_key, glob_to_like, sql_in

DIM = 4
QUOTED = "lib/it's here/odd file.py"


def row(path: str, name: str, vector=None, priority: int = 0, text: str = "") -> dict:
    """A chunk row with every column of the schema."""
    out = {field.name: None for field in chunk_schema(DIM)}
    text = text or f"def {name}(): pass"
    out.update(id=f"{path}#{name}", path=path, kind="function", symbol=name, text=text, search_text=text,
               bm25_text=text, start_line=1, end_line=1, priority=priority, embed_key=f"key-{path}-{name}",
               calls=[], symbols=[name], vector=vector)
    return out


def ids(table) -> set[str]:
    return set(table.to_arrow().column("id").to_pylist())


@pytest.fixture
def store(tmp_path):
    return ChunkStore(tmp_path / "db", "worktree-a", "fake-model", DIM)


def test_an_update_replaces_a_files_rows_in_one_commit_and_leaves_other_files_alone(store):
    store.replace_files(["a.py", "b.py"], [row("a.py", "old_one"), row("a.py", "old_two"), row("b.py", "keep")])
    before = store.version()
    store.replace_files(["a.py"], [row("a.py", "old_one", text="def old_one(): return 2"), row("a.py", "new")])
    assert store.version() == before + 1
    assert ids(store.table()) == {"a.py#old_one", "a.py#new", "b.py#keep"}
    [changed] = store.rows_by_id(["a.py#old_one"], ["text"])
    assert changed["text"] == "def old_one(): return 2"


def test_a_pinned_snapshot_keeps_reading_what_it_started_on(store):
    assert store.snapshot() is None  # nothing indexed yet
    store.replace_files(["a.py"], [row("a.py", "one")])
    reader = store.snapshot()
    store.replace_files(["a.py"], [row("a.py", "two")])
    store.delete_paths(["a.py"])
    assert ids(reader) == {"a.py#one"}
    assert ids(store.snapshot()) == set()


def test_a_query_pinned_on_a_long_standing_version_survives_the_compaction_after_the_next_write(store):
    # The version a query pins is the latest, however old: compaction must not take its files away while the query
    # reads, and once the query is done the version goes at the next compaction.
    import gc

    from lancedb.query import MatchQuery  # not at the top: a test here imports this module and counts LanceDB's modules

    store.replace_files(["a.py", "b.py"], [row("a.py", "one"), row("b.py", "two")])
    store.ensure_indexes()
    reader = store.snapshot()
    pinned = reader.version
    store.replace_files(["a.py"], [row("a.py", "three")])
    store.ensure_indexes()
    done = store.compact()
    assert done["rewritten"] and done["versions_dropped"] >= 1  # the versions nobody is on went at once
    assert ids(reader) == {"a.py#one", "b.py#two"}
    found = reader.search(MatchQuery("one", FTS_COLUMN), query_type="fts").select(["id"]).limit(5).to_list()
    assert [r["id"] for r in found] == ["a.py#one"]  # its full-text index too
    assert pinned in [v["version"] for v in store.table().list_versions()]
    del reader, found
    lance_store.release_pinned()
    gc.collect()
    store.replace_files(["b.py"], [row("b.py", "four")])
    store.compact()
    versions = [v["version"] for v in store.table().list_versions()]
    assert versions == [store.version()]
    assert ids(store.snapshot()) == {"a.py#three", "b.py#four"}


def test_a_reader_in_another_process_keeps_its_version_through_a_compaction(store, tmp_path):
    # A one-shot search is another process: its lease is a lock the writer sees, not an object in memory.
    store.replace_files(["a.py"], [row("a.py", "one")])
    reader = subprocess.Popen(
        [sys.executable, "-c", f"""
import sys
from pathlib import Path
from localidx.store.lance import ChunkStore
store = ChunkStore(Path({str(tmp_path / 'db')!r}), "worktree-a", "fake-model", {DIM}, read_only=True)
table = store.snapshot()
print(table.version, flush=True)
sys.stdin.readline()
print(sorted(table.to_arrow().column("id").to_pylist()), flush=True)
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pinned = int(reader.stdout.readline())
        store.replace_files(["a.py"], [row("a.py", "two")])
        store.compact()
        assert pinned in [v["version"] for v in store.table().list_versions()]
        out, _ = reader.communicate("go\n", timeout=60)
        assert out.strip() == "['a.py#one']"
    finally:
        if reader.poll() is None:
            reader.kill()
    store.replace_files(["a.py"], [row("a.py", "three")])
    store.compact()  # the reader has exited: its lock went with it
    assert [v["version"] for v in store.table().list_versions()] == [store.version()]


def test_a_path_with_a_quote_and_spaces_is_written_read_and_deleted(store):
    store.replace_files([QUOTED, "b.py"], [row(QUOTED, "quirky"), row("b.py", "plain")])
    assert store.indexed_paths() == {QUOTED, "b.py"}
    assert [r["path"] for r in store.rows_by_id([f"{QUOTED}#quirky"], ["path"])] == [QUOTED]
    store.replace_files([QUOTED], [row(QUOTED, "renamed")])
    assert ids(store.table()) == {f"{QUOTED}#renamed", "b.py#plain"}
    store.delete_paths([QUOTED])
    assert store.indexed_paths() == {"b.py"}
    assert sql_in("path", []) == "false"  # no paths: a filter that matches nothing, not a syntax error


def test_rows_without_a_vector_wait_most_important_first_until_they_get_one(store):
    store.replace_files(["a.py"], [row("a.py", "low", priority=1), row("a.py", "high", priority=9),
                                   row("a.py", "done", priority=5, vector=[1.0, 0.0, 0.0, 0.0])])
    assert [(i, p) for i, p, _key in store.pending_vectors()] == [("a.py#high", 9), ("a.py#low", 1)]
    store.set_vectors(["a.py#high"], np.array([[0.0, 1.0, 0.0, 0.0]], dtype=np.float32))
    assert [i for i, _p, _key in store.pending_vectors()] == ["a.py#low"]
    store.set_texts([{"id": "a.py#done", "search_text": "x", "bm25_text": "x", "embed_key": "k2"}])
    assert {i for i, _p, _key in store.pending_vectors()} == {"a.py#low", "a.py#done"}  # new text: embed again


def test_the_vector_cache_answers_by_key_and_keeps_the_first_vector(store):
    assert store.cache_get(["k1"]) == {}
    store.cache_put(["k1", "k2"], np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32))
    store.cache_put(["k1"], np.array([[0, 0, 0, 1]], dtype=np.float32))  # same key: same text, kept as it was
    found = store.cache_get(["k1", "k2", "missing"])
    assert set(found) == {"k1", "k2"}
    assert found["k1"].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_the_cache_key_is_the_model_and_the_text():
    assert embed_key("m1", "def f(): pass") == embed_key("m1", "def f(): pass")
    assert embed_key("m1", "def f(): pass") != embed_key("m2", "def f(): pass")
    assert embed_key("m1", "def f(): pass") != embed_key("m1", "def g(): pass")


def test_another_model_is_another_table_and_old_tables_of_this_work_tree_are_dropped(tmp_path):
    db = tmp_path / "db"
    old = ChunkStore(db, "worktree-a", "old-model", DIM)
    other_tree = ChunkStore(db, "worktree-b", "old-model", DIM)
    for s in (old, other_tree):
        s.replace_files(["a.py"], [row("a.py", "f")])
    new = ChunkStore(db, "worktree-a", "new-model", DIM, generation=1)
    assert new.table_name != old.table_name and not new.exists()
    new.replace_files(["a.py"], [row("a.py", "f")])
    assert new.drop_other_tables() == [old.table_name]
    assert not old.exists() and other_tree.exists() and new.exists()


def test_a_read_only_store_of_a_missing_index_reads_empty_and_writes_nothing(tmp_path):
    store = ChunkStore(tmp_path / "nowhere", "worktree-a", "fake-model", DIM, read_only=True)
    assert store.snapshot() is None and not store.exists() and store.version() == 0
    assert store.indexed_paths() == set() and store.pending_vectors() == [] and store.cache_get(["k"]) == {}
    assert not (tmp_path / "nowhere").exists()


def test_path_globs_become_escaped_like_patterns():
    assert glob_to_like("src/**/*.py") == "src/%/%.py"
    assert glob_to_like("a_b%?.py") == "a\\_b\\%_.py"  # _ and % are literal in a glob


def test_lancedb_is_imported_without_the_namespace_api_and_it_still_loads_when_asked(tmp_path):
    """A local table is written, indexed and searched (BM25 and vectors) without LanceDB's REST namespace API, which
    was most of what ``import lancedb`` cost; code that later reads the namespace client's names gets them all."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_store_lance import DIM, row
from localidx.store.lance import ChunkStore
store = ChunkStore(__import__("pathlib").Path({str(tmp_path / "db")!r}), "worktree-a", "fake-model", DIM)
store.replace_files(["a.py", "b.py"], [row("a.py", "verify_token", [1.0, 0, 0, 0]), row("b.py", "charge", [0, 1.0, 0, 0])])
store.ensure_indexes()
table = store.snapshot()
assert table.search("verify_token", query_type="fts").limit(1).to_list()[0]["path"] == "a.py"
assert table.search([1.0, 0, 0, 0]).limit(1).to_list()[0]["path"] == "a.py"
assert "lancedb" in sys.modules and "lance_namespace_urllib3_client.api" not in sys.modules
from lance_namespace_urllib3_client import ApiClient, Configuration, TableApi
import lance_namespace_urllib3_client as client
assert client.TableApi is TableApi and "lance_namespace_urllib3_client.api.table_api" in sys.modules
assert type(client).__name__ == "module" and client.__version__
import lancedb.namespace
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
