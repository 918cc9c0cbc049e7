"""store/catalog: the per-file catalog in a real SQLite file in a temp dir.

What a user would notice: what was indexed is still known after the process ends (the next run redoes nothing), a
write that fails halfway records nothing, an index of another model or schema is not trusted, a run that died is
known at the next start (``dirty``), failures are listed per file until the file is indexed again, and a read-only
look (``status``, queries) never creates or changes anything. A damaged file is one clear error.
"""

from __future__ import annotations

import sqlite3

import pytest

from localidx.errors import IndexDamaged
from localidx.store.catalog import CATALOG_VERSION, Catalog, FileRecord


def record(path: str, file_hash: str = "h1", chunk_ids=("c1",), skipped: str = "") -> FileRecord:
    return FileRecord(path=path, file_hash=file_hash, mtime_ns=1, size=10, language="python",
                      chunk_ids=list(chunk_ids), indexed_at=0.0, skipped=skipped)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "state" / "catalog.sqlite"


def test_records_outlive_the_process_that_wrote_them(path):
    catalog = Catalog(path)
    catalog.bind("chunks_t1")
    catalog.put([record("a.py", chunk_ids=("c1", "c2")), record("logo.png", chunk_ids=(), skipped="binary")])
    catalog.set_last_run({"files_processed": 2})
    catalog.close()
    again = Catalog(path)
    assert again.get("a.py").chunk_ids == ["c1", "c2"] and again.get("a.py").file_hash == "h1"
    assert again.paths() == ["a.py"] and again.count() == 1  # a skipped file is known but has no rows
    assert again.last_run() == {"files_processed": 2}
    assert again.get("missing.py") is None


def test_a_write_that_fails_halfway_records_nothing(path):
    catalog = Catalog(path)
    with pytest.raises(RuntimeError):
        with catalog.transaction() as db:
            db.execute("INSERT INTO files VALUES ('a.py', 'h', 1, 1, 'python', '[]', 0, '')")
            raise RuntimeError("the writer died mid-batch")
    assert catalog.files() == {}


def test_binding_to_another_table_forgets_what_was_indexed_for_the_old_one(path):
    catalog = Catalog(path)
    assert catalog.bind("chunks_model_a") is False  # a new catalog: nothing was forgotten
    catalog.put([record("a.py")])
    catalog.set_problems(["a.py"], [("a.py", "embed", "model failed", "k1")])
    catalog.set_last_run({"run": 1})
    assert catalog.bind("chunks_model_a") is False and catalog.count() == 1  # the same table: kept
    assert catalog.bind("chunks_model_b") is True
    assert catalog.files() == {} and catalog.problems() == []
    assert catalog.last_run() == {"run": 1}  # the history of runs is kept
    catalog.put([record("a.py")])
    assert catalog.bind("chunks_model_b", force=True) is True and catalog.count() == 0  # a rebuild


def test_a_run_that_died_is_known_at_the_next_start(path):
    catalog = Catalog(path)
    catalog.set_dirty(True)
    catalog.close()  # the process is killed before it could clear the mark
    assert Catalog(path).dirty is True
    catalog = Catalog(path)
    catalog.set_dirty(False)
    assert catalog.dirty is False


def test_a_files_problems_are_replaced_when_it_is_indexed_again(path):
    catalog = Catalog(path)
    catalog.put([record("a.py"), record("b.py")])
    catalog.set_problems(["a.py", "b.py"], [("a.py", "chunk", "parser timed out", ""),
                                            ("b.py", "embed", "model failed", "k9")])
    assert [p["path"] for p in catalog.problems()] == ["a.py", "b.py"]
    assert catalog.failed_keys("embed") == {"k9"}
    catalog.set_problems(["a.py"], [])  # indexed again, cleanly
    assert catalog.problems() == [{"path": "b.py", "stage": "embed", "reason": "model failed"}]
    catalog.remove(["b.py"])  # the file is gone: so are its rows and its problems
    assert catalog.problems() == [] and catalog.get("b.py") is None


def test_a_new_stat_for_unchanged_content_is_remembered(path):
    catalog = Catalog(path)
    catalog.put([record("a.py")])
    catalog.touch("a.py", mtime_ns=99, size=10)
    assert (catalog.get("a.py").mtime_ns, catalog.get("a.py").file_hash) == (99, "h1")


def test_a_read_only_look_creates_and_changes_nothing(path):
    missing = Catalog(path, create=False)
    assert missing.files() == {} and missing.count() == 0 and missing.problems() == []
    assert not path.exists()
    writable = Catalog(path)
    writable.put([record("a.py")])
    writable.close()
    reader = Catalog(path, create=False)
    assert reader.count() == 1
    with pytest.raises(sqlite3.OperationalError):
        reader.put([record("b.py")])


def test_a_catalog_of_another_version_is_emptied_and_so_rebuilt(path):
    catalog = Catalog(path)
    catalog.put([record("a.py")])
    catalog.connection.execute(f"PRAGMA user_version = {CATALOG_VERSION + 1}")
    catalog.close()
    assert Catalog(path, create=False).count() == 0  # read-only: read as empty, left as it is
    assert Catalog(path).count() == 0


def test_a_damaged_catalog_is_one_clear_error(path):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database, it was torn by a crash" * 100)
    with pytest.raises(IndexDamaged, match="damaged"):
        Catalog(path)
    with pytest.raises(IndexDamaged, match="run `localidx index` to repair it"):
        Catalog(path, create=False)
