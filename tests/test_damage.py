"""A damaged index never traps the user: each kind of damage is found, said in one line, and repaired by a plain
`localidx index`, through the real CLI on a real git repository and a real LanceDB. Also: a rebuild is built beside
the index it replaces, and one failing file costs that file only."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import lancedb
import pytest

from conftest import BILLING_MODULE
from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.store.index import open_index

FILES = {f"pkg/mod_{i:02d}.py": f'"""Module {i}."""\n\n\ndef compute_{i}(value):\n    """Scale value {i}."""\n'
         f"    return value * {i}\n\n\nclass Holder{i}:\n    def get(self):\n        return {i}\n" for i in range(12)}
FILES["billing/invoice.py"] = BILLING_MODULE


def env_for(root: Path, **extra) -> dict:
    return dict(os.environ, LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(root.parent / "home"), **extra)


def cli(root: Path, *args: str, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env_for(root, **extra),
                          capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode not in (0, 3), (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return lines[0]


def status(root: Path) -> dict:
    proc = cli(root, "status", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == (2 if report["state"] == "DAMAGED" else 0), proc.stderr  # a script acts on DAMAGED
    return report


def index_json(root: Path, *args: str) -> dict:
    proc = cli(root, "index", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def searched_paths(root: Path, query: str = "invoice total", k: int = 5) -> list[str]:
    proc = cli(root, "search", query, "-k", str(k), "--json")
    assert proc.returncode == 0, proc.stderr
    return [m["path"] for m in json.loads(proc.stdout)["matches"]]


@pytest.fixture
def indexed(make_repo) -> tuple[Path, dict]:
    root = make_repo(FILES)
    first = index_json(root)
    assert first["files_processed"] == 13 and first["chunks_pending"] == 0
    return root, first


def state_dir(root: Path) -> Path:
    return root.parent / "home"


def data_files(root: Path, prefix: str) -> list[Path]:
    return sorted((state_dir(root) / "lancedb").glob(f"{prefix}*.lance/data/*.lance"))


def test_deleted_lancedb_files_are_rebuilt_from_the_files(indexed):
    # Before: `index` reported everything unchanged forever, and `status` said EMPTY.
    root, first = indexed
    import shutil

    shutil.rmtree(state_dir(root) / "lancedb")
    report = status(root)
    assert report["state"] == "DAMAGED" and "chunk table is missing" in report["damage"][0]
    repaired = index_json(root)
    assert repaired["chunks_written"] == first["chunks_written"] and repaired["rebuilt"]
    assert any("missing" in line for line in repaired["repairs"])
    assert status(root)["state"] == "READY"
    assert searched_paths(root)[0] == "billing/invoice.py"


def test_a_truncated_data_file_is_reported_in_one_line_and_repaired_from_the_cache(indexed):
    # Before: status, search, context and index all ended in raw `lance error` tracebacks (exit 3).
    root, first = indexed
    for path in data_files(root, "chunks_"):
        os.truncate(path, 100)
    report = status(root)
    assert report["state"] == "DAMAGED" and "cannot be read" in report["damage"][0]
    for command in (["search", "invoice total"], ["context", "how is an invoice totalled"]):
        line = one_line_error(cli(root, *command))
        assert "damaged" in line and "`localidx index`" in line, line
    repaired = index_json(root)
    # Rebuilt from the files; every vector came back from the cache, nothing was embedded again.
    assert repaired["chunks_written"] == first["chunks_written"]
    assert repaired["chunks_embedded"] == 0 and repaired["chunks_reused"] == first["chunks_written"]
    assert status(root)["state"] == "READY"
    assert searched_paths(root)[0] == "billing/invoice.py"


def test_a_corrupt_catalog_is_moved_aside_and_rebuilt(indexed):
    # Before: `index` and even `index --rebuild` failed with "file is not a database".
    root, first = indexed
    catalog = next((state_dir(root) / "worktrees").glob("*/catalog.sqlite"))
    for suffix in ("-wal", "-shm"):
        Path(f"{catalog}{suffix}").unlink(missing_ok=True)
    catalog.write_bytes(b"this is not a database" * 100)
    report = status(root)
    assert report["state"] == "DAMAGED" and "catalog" in report["damage"][0]
    assert "damaged" in one_line_error(cli(root, "search", "invoice total"))
    repaired = index_json(root, "--rebuild")
    assert repaired["chunks_written"] == first["chunks_written"] and repaired["chunks_embedded"] == 0
    assert list(catalog.parent.glob("catalog*.damaged")), "the damaged catalog is kept aside for inspection"
    assert status(root)["state"] == "READY"
    assert searched_paths(root)[0] == "billing/invoice.py"


def test_lost_rows_of_some_files_are_indexed_again_and_only_those(indexed):
    root, _first = indexed
    idx = open_index(root, True, load_settings(root, {"embed_model": "fake", "home": str(state_dir(root))}))
    try:
        table = lancedb.connect(str(state_dir(root) / "lancedb")).open_table(idx.store.table_name)
        table.delete("path = 'billing/invoice.py'")
    finally:
        idx.close()
    report = status(root)
    assert report["state"] == "DAMAGED" and "lost rows" in report["damage"][0]
    repaired = index_json(root)
    assert repaired["files_processed"] == 1 and repaired["files_unchanged"] == 12 and not repaired["rebuilt"]
    assert searched_paths(root)[0] == "billing/invoice.py"
    assert status(root)["state"] == "READY"


def test_rows_no_catalog_record_vouches_for_are_removed(indexed):
    root, first = indexed
    idx = open_index(root, True, load_settings(root, {"embed_model": "fake", "home": str(state_dir(root))}))
    try:
        table = lancedb.connect(str(state_dir(root) / "lancedb")).open_table(idx.store.table_name)
        row = table.search().where("path = 'pkg/mod_01.py'").limit(1).to_arrow().to_pylist()[0]
        row.update(id="f" * 32, path="ghost/gone.py")
        table.add([row])
    finally:
        idx.close()
    assert "ghost/gone.py" in searched_paths(root, "compute_1 scale value", k=20)
    assert status(root)["state"] == "DAMAGED"
    repaired = index_json(root)
    assert any("rows the catalog does not record" in line for line in repaired["repairs"])
    assert "ghost/gone.py" not in searched_paths(root, "compute_1 scale value", k=20)
    assert status(root)["state"] == "READY"


def test_an_unreadable_vector_cache_is_emptied_and_vectors_embedded_again(indexed):
    root, first = indexed
    cache = state_dir(root) / "vectors.sqlite"
    os.truncate(cache, cache.stat().st_size // 2)
    (root / "pkg/mod_00.py").write_text("def fresh():\n    return 'new text the cache never saw'\n")
    repaired = index_json(root)
    assert any("vector cache" in line for line in repaired["repairs"])
    assert repaired["chunks_pending"] == 0 and repaired["chunks_embedded"] >= 1
    assert status(root)["state"] == "READY"


def _many(make_repo, count: int = 300) -> Path:
    files = {}
    for i in range(count):
        body = "\n".join(f"    step_{j} = transform_{i}(step_{j - 1}, {j})" for j in range(1, 30))
        files[f"pkg/mod_{i:04d}.py"] = f"def compute_{i}(step_0):\n{body}\n    return step_29\n"
    return make_repo(files, name="big")


def _next_generation_files(root: Path) -> int:
    found = list((state_dir(root) / "worktrees").glob("*/catalog-g1.sqlite"))
    if not found:
        return 0
    try:
        db = sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True, timeout=1)
        try:
            return db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def test_a_rebuild_is_built_beside_the_index_and_a_killed_one_changes_nothing(make_repo):
    # Before: `index --rebuild` dropped the table first: searches failed while it ran, and a rebuild killed early
    # left an EMPTY index.
    root = _many(make_repo)
    first = index_json(root)
    expected = {f"pkg/mod_{i:04d}.py" for i in range(300)}
    proc = subprocess.Popen([sys.executable, "-m", "localidx", "index", "--rebuild", "--quiet"], cwd=root,
                            env=env_for(root, LOCALIDX_WRITE_BATCH_ROWS="20"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    settings = load_settings(root, {"embed_model": "fake", "home": str(state_dir(root))})
    deadline = time.monotonic() + 120
    seen = 0
    while _next_generation_files(root) < 100:
        assert proc.poll() is None, "the rebuild finished before it could be stopped"
        assert time.monotonic() < deadline
        # A reader that opens the index now (as a new `localidx search` would) sees the whole old index.
        idx = open_index(root, True, settings, read_only=True)
        try:
            paths = set(idx.store.snapshot().search().select(["path"]).limit(None).to_arrow()
                        .column("path").to_pylist())
        finally:
            idx.close()
        assert paths == expected
        seen += 1
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert seen >= 1
    report = status(root)
    assert report["state"] == "READY" and report["chunks"] == first["chunks_written"]
    assert searched_paths(root, "compute_7 transform_7")[0] == "pkg/mod_0007.py"
    # The next plain run keeps the index it has and throws the half-built one away.
    again = index_json(root)
    assert not again["rebuilt"] and again["files_unchanged"] == 300
    # A whole rebuild switches to the new generation; vectors come from the cache.
    rebuilt = index_json(root, "--rebuild")
    assert rebuilt["rebuilt"] and rebuilt["chunks_written"] == first["chunks_written"]
    assert rebuilt["chunks_embedded"] == 0 and rebuilt["generation"] >= 1
    assert status(root)["state"] == "READY"


def test_a_reader_whose_generation_a_rebuild_dropped_reads_the_new_one_and_marks_no_damage(make_repo, monkeypatch):
    """Found by searching with no daemon while `index --rebuild` ran in another terminal: a search that had opened
    the old generation, which an asked-for rebuild drops as soon as it switches, said "not indexed yet", or, caught
    mid-read, called the index damaged and left the marker that makes the next `localidx index` rebuild it all."""
    from localidx.errors import IndexDamaged, IndexSwitched
    from localidx.interface.backend import Backend
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search
    from localidx.store import index as index_module

    root = make_repo(FILES)
    index_json(root)
    settings = load_settings(root, {"embed_model": "fake", "home": str(state_dir(root))})
    stale = open_index(root, True, settings, read_only=True)
    pinned_before = stale.store.snapshot()
    assert index_json(root, "--rebuild")["generation"] == stale.generation + 1  # another process's rebuild
    try:
        with pytest.raises(IndexSwitched, match="rebuilt while this command read it"):
            search(stale, "invoice total")
        with pytest.raises(IndexSwitched):
            build_for_repository(stale, "invoice total", settings=settings)
        try:  # a table pinned before the switch, read after it: its files are gone
            search(stale, "invoice total", table=pinned_before)
        except IndexSwitched:
            pass
        except IndexDamaged as exc:
            pytest.fail(f"a rebuild's switch read as damage: {exc}")
    finally:
        stale.close()
    assert index_module.damage_marked(stale.paths) is None

    real_open, opened = index_module.open_index, []

    def rebuilt_after_the_first_open(*args, **kwargs):
        index = real_open(*args, **kwargs)
        if not opened:  # between this reader's open and its read, another terminal rebuilds
            index_json(root, "--rebuild")
        opened.append(index.generation)
        return index

    monkeypatch.setattr(index_module, "open_index", rebuilt_after_the_first_open)
    for ask in (lambda b: b.search("invoice total", k=3)["matches"],
                lambda b: b.context("invoice total", max_tokens=800)["matches"]):
        opened.clear()
        found = ask(Backend(root, True, settings, "never"))
        assert found and found[0]["path"] == "billing/invoice.py"
        assert len(opened) == 2 and opened[1] == opened[0] + 1
    assert index_module.damage_marked(stale.paths) is None
    assert status(root)["state"] == "READY"


def test_one_file_that_cannot_be_written_costs_that_file_only(make_repo, monkeypatch):
    root = make_repo({"good.py": "def fine():\n    return 1\n", "bad.py": "def broken():\n    return 2\n",
                      "also_good.py": "def also():\n    return 3\n"})
    settings = load_settings(root, {"embed_model": "fake", "home": str(root.parent / "home"), "workers": 1})
    from localidx.store.lance import ChunkStore

    real = ChunkStore.replace_files

    def refuse_bad(self, paths, rows):
        if "bad.py" in paths:
            raise ValueError("simulated write failure")
        return real(self, paths, rows)

    monkeypatch.setattr(ChunkStore, "replace_files", refuse_bad)
    stats = run_index(root, True, settings)
    assert stats.files_processed == 2 and stats.files_failed == 1
    assert stats.failed_files == [{"path": "bad.py", "stage": "write", "reason": "write failed: ValueError: "
                                   "simulated write failure"}]
    idx = open_index(root, True, settings, read_only=True)
    try:
        assert set(idx.catalog.files()) == {"good.py", "also_good.py"}
        assert [p["path"] for p in idx.catalog.problems()] == ["bad.py"]
    finally:
        idx.close()
    monkeypatch.setattr(ChunkStore, "replace_files", real)
    again = run_index(root, True, settings)  # not recorded, so tried again; now it works and the problem is gone
    assert again.files_processed == 1 and not again.failed_files
    idx = open_index(root, True, settings, read_only=True)
    try:
        assert set(idx.catalog.files()) == {"good.py", "bad.py", "also_good.py"} and not idx.catalog.problems()
    finally:
        idx.close()


def test_a_chunker_or_relations_failure_leaves_the_file_as_windows_with_an_error_chunk(make_repo, monkeypatch):
    root = make_repo({"good.py": "def fine():\n    return 1\n", "odd.py": "def odd():\n    return 'odd'\n"})
    settings = load_settings(root, {"embed_model": "fake", "home": str(root.parent / "home"), "workers": 1})
    import localidx.store.relations as relations

    real = relations.file_relations

    def fail_odd(path, chunks, imports):
        if path == "odd.py" and any(c.kind == "function" for c in chunks):
            raise RuntimeError("simulated relations bug")
        return real(path, chunks, imports)

    monkeypatch.setattr(relations, "file_relations", fail_odd)
    stats = run_index(root, True, settings)
    assert stats.files_processed == 2 and not stats.files_failed
    assert [f["stage"] for f in stats.failed_files] == ["relations"]
    idx = open_index(root, True, settings, read_only=True)
    try:
        rows = idx.store.snapshot().search().where("path = 'odd.py'").select(["kind", "text"]).limit(None) \
            .to_arrow().to_pylist()
    finally:
        idx.close()
    assert sorted(r["kind"] for r in rows) == ["error", "window"]
    assert any("return 'odd'" in r["text"] for r in rows)


def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(make_repo):
    # Found on real repositories: a file name git lists that is not UTF-8 cannot be stored; before, the run stopped
    # with an internal error.
    root = make_repo({"ok.py": "def ok():\n    return 1\n"})
    with open(os.fsencode(str(root)) + b"/bad\xff.py", "wb") as fh:
        fh.write(b"def bad():\n    return 2\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    record = index_json(root)
    assert record["files_processed"] == 1 and record["skipped_by_reason"] == {"undecodable-name": 1}
    report = status(root)
    assert report["state"] == "READY" and report["skipped_by_reason"] == {"undecodable-name": 1}


def test_progress_summary_and_status_count_files_the_same_way(make_repo):
    # Before: `120 files, 120 to chunk` then `113 chunked, 17 skipped`; status said 12 skipped, its last run 14.
    import re

    root = make_repo({"a.py": "def a():\n    return 1\n", "b.py": "def b():\n    return 2\n",
                      "blob.dat": b"\x00\x01binary\x00", "package-lock.json": "{}\n", ".env": "TOKEN=x\n",
                      "docs/guide.md": "# Guide\n\nRead me.\n"})
    proc = cli(root, "index")
    assert proc.returncode == 0, proc.stderr
    scan = re.search(r"^(\d+) files \((\d+) skipped by name or rule\): (\d+) new or changed to read", proc.stderr,
                     re.MULTILINE)
    summary = re.search(r"(\d+) files chunked, (\d+) unchanged, (\d+) skipped", proc.stdout)
    assert scan and summary, (proc.stderr, proc.stdout)
    seen, by_rule, to_read = map(int, scan.groups())
    chunked, unchanged, skipped = map(int, summary.groups())
    assert seen == 6 and by_rule == 2 and to_read == 4
    assert chunked + unchanged + skipped == seen and (chunked, skipped) == (3, 3)
    report = status(root)
    assert report["files_skipped"] == report["last_run"]["files_skipped"] == 3
    assert report["skipped_by_reason"] == report["last_run"]["skipped_by_reason"] == {
        "binary": 1, "lock-file": 1, "secret-file": 1}
    again = index_json(root)
    assert (again["files_unchanged"], again["files_skipped"], again["files_seen"]) == (3, 3, 6)


def test_a_text_the_model_fails_on_costs_its_vector_only_and_is_not_retried(make_repo, monkeypatch):
    root = make_repo({"good.py": "def fine():\n    return 1\n", "weird.py": "def weird():\n    return 'POISON'\n",
                      "more.py": "def more():\n    return 3\n"})
    settings = load_settings(root, {"embed_model": "fake", "home": str(root.parent / "home"), "workers": 1})
    from localidx.embed.fake import FakeEmbedder

    real = FakeEmbedder.embed
    calls = []

    def refuse_poison(self, texts):
        calls.append(len(texts))
        if any("POISON" in t for t in texts):
            raise TypeError("simulated tokenizer failure")
        return real(self, texts)

    monkeypatch.setattr(FakeEmbedder, "embed", refuse_poison)
    stats = run_index(root, True, settings)
    assert stats.files_processed == 3 and stats.files_failed == 0
    assert [(f["path"], f["stage"]) for f in stats.failed_files] == [("weird.py", "embed")]
    assert stats.chunks_pending == 0  # the failed text is recorded, not pending forever
    idx = open_index(root, True, settings, read_only=True)
    try:
        rows = idx.store.snapshot().search().select(["path", "vector"]).limit(None).to_arrow().to_pylist()
        assert {r["path"] for r in rows if r["vector"] is None} == {"weird.py"}
        assert [p["stage"] for p in idx.catalog.problems()] == ["embed"]
    finally:
        idx.close()
    calls.clear()
    again = run_index(root, True, settings)
    assert calls == [] and again.chunks_embedded == 0, "a text the model failed on is not tried on every run"
    assert status_in_process(root, settings)["state"] == "READY"


def status_in_process(root: Path, settings) -> dict:
    from localidx.index.status import index_status

    return index_status(root, True, settings)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_a_full_disk_is_said_as_such_and_nothing_is_marked_damaged(make_repo, tmp_path):
    """An index on a full disk: one line naming the place and the free space, exit 2, no damage marker (so no
    rebuild beside the old index is tried on the same full disk); with room again the next run just indexes."""
    files = {f"m{i}.py": f'def f{i}(x):\n    """Compute {i}."""\n    return x * {i} + {i}\n' for i in range(200)}
    root = make_repo(files)
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(disk)], check=True)
    try:
        env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(disk / "home")}

        def lx(*args):
            return subprocess.run([sys.executable, "-m", "localidx", *args, "--no-daemon"], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=300)

        full = lx("index", "-q")
        assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr
        line = full.stderr.strip().splitlines()[-1]
        assert line.startswith(f"localidx: error: no space left on device at {disk / 'home'} ("), line
        assert "damaged" not in line.replace("not damaged", "") and "lance error" not in line
        assert "DAMAGED" not in lx("status").stdout
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = lx("index", "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(lx("status", "--json").stdout)["state"] == "READY"
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
