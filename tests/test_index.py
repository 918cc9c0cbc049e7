"""Indexing against real git repositories and a real LanceDB: incremental runs, renames, branches, deletes, the
writer lock, crash-and-resume with a real SIGKILL, and a reader that never sees a file half old and half new."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BILLING_MODULE, git
from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.store.index import open_index
from localidx.store.lock import WriteLock

MODULE = BILLING_MODULE


def settings_for(root: Path, **extra):
    return load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index"), **extra})


def index(root: Path, **kw):
    return run_index(root, True, settings_for(root), **kw)


def rows(root: Path) -> list[dict]:
    idx = open_index(root, True, settings_for(root), read_only=True)
    try:
        table = idx.store.snapshot()
        if table is None:
            return []
        cols = ["id", "path", "file_hash", "content_hash", "embed_key", "start_line", "end_line", "text"]
        out = table.search().select(cols + ["vector"]).limit(None).to_arrow().to_pylist()
        return out
    finally:
        idx.close()


@pytest.fixture
def repo(make_repo):
    return make_repo({
        "billing/invoice.py": MODULE,
        "billing/tax.py": "def vat(amount, rate=0.2):\n    return round(amount * rate, 2)\n",
        "docs/guide.md": "# Billing\n\nHow invoices are totalled.\n",
    })


def test_first_run_indexes_everything_and_second_run_embeds_nothing(repo):
    first = index(repo)
    assert first.files_processed == 3 and first.chunks_written > 5
    assert first.chunks_embedded == first.chunks_written - first.chunks_reused
    assert first.chunks_pending == 0
    all_rows = rows(repo)
    assert len(all_rows) == first.chunks_written
    assert all(r["vector"] is not None for r in all_rows)
    second = index(repo)
    assert (second.files_processed, second.chunks_written, second.chunks_embedded) == (0, 0, 0)
    assert second.files_unchanged == 3


_NOTHING_TO_DO = """
import json, sys
from pathlib import Path
from localidx.config import load_settings
from localidx.index.indexer import run_index
root = Path(sys.argv[1])
settings = load_settings(root, {"embed_model": "fake", "home": sys.argv[2]})
record = run_index(root, True, settings).to_dict()
print(json.dumps({"record": record, "lancedb": "lancedb" in sys.modules, "numpy": "numpy" in sys.modules}))
"""


def _run_apart(root: Path) -> dict:
    """``run_index`` in a process of its own, which says what it imported."""
    proc = subprocess.run([sys.executable, "-c", _NOTHING_TO_DO, str(root), str(root.parent / f"{root.name}-index")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_run_with_nothing_to_do_reads_the_catalog_and_never_opens_the_table(repo):
    """With nothing changed since a run that left nothing to do, the run is decided from the catalog and the file
    system alone (no LanceDB, no model) and its record is the one a full pass makes; any change to the work tree or
    to the table's files, or a pass that left vectors to embed, makes the next run a full one."""
    first = index(repo, embed=False)
    assert first.chunks_pending > 0
    embedding = _run_apart(repo)
    assert embedding["lancedb"] and embedding["record"]["chunks_embedded"] == first.chunks_pending
    quiet = _run_apart(repo)
    assert not quiet["lancedb"] and not quiet["numpy"]
    from localidx.index.indexer import open_for_writing, sync_work_tree
    from localidx.paths import index_paths

    settings = settings_for(repo)
    opened = open_for_writing(index_paths(repo, True, settings.home), settings)
    try:
        full = sync_work_tree(opened, repo, settings)  # the same run, the full way
    finally:
        opened.close()
    same = ("files_seen", "files_processed", "files_unchanged", "files_skipped", "skipped_by_reason",
            "chunks_written", "chunks_embedded", "chunks_pending", "model", "generation", "rebuilt", "failed_files")
    assert {k: quiet["record"][k] for k in same} == {k: full.to_dict()[k] for k in same}
    (repo / "billing" / "tax.py").write_text("def vat(amount, rate=0.25):\n    return round(amount * rate, 2)\n")
    edited = _run_apart(repo)
    assert edited["lancedb"] and edited["record"]["files_processed"] == 1
    assert not _run_apart(repo)["lancedb"]
    table = next((repo.parent / f"{repo.name}-index" / "lancedb").glob("chunks_*.lance"))
    next((table / "_versions").iterdir()).touch()  # the table's files changed: look at the table again
    assert _run_apart(repo)["lancedb"]


def test_edit_reindexes_one_file_and_embeds_only_new_text(repo):
    index(repo)
    before = {r["id"] for r in rows(repo)}
    path = repo / "billing/invoice.py"
    path.write_text(MODULE.replace('raise ValueError("insufficient funds")', 'raise ValueError("not enough money")'))
    stats = index(repo)
    assert stats.files_processed == 1
    assert 1 <= stats.chunks_embedded <= 2  # the edited method (and the class skeleton it sits under, unchanged)
    after = rows(repo)
    assert len(after) == len(before)
    assert any("not enough money" in r["text"] for r in after)
    assert not any("insufficient funds" in r["text"] for r in after)


def test_touch_without_change_costs_nothing(repo):
    index(repo)
    os.utime(repo / "billing/tax.py", None)
    stats = index(repo)
    assert stats.files_processed == 0 and stats.chunks_embedded == 0 and stats.files_unchanged == 3


def test_deleted_file_loses_its_rows(repo):
    index(repo)
    (repo / "billing/tax.py").unlink()
    stats = index(repo)
    assert stats.files_deleted == 1 and stats.chunks_deleted >= 1
    assert not [r for r in rows(repo) if r["path"] == "billing/tax.py"]


def test_rename_costs_no_embedding(repo):
    index(repo)
    git(repo, "mv", "billing/invoice.py", "billing/invoices.py")
    stats = index(repo)
    assert stats.files_processed == 1 and stats.files_deleted == 1
    assert stats.chunks_embedded == 0 and stats.chunks_reused == stats.chunks_written
    paths = {r["path"] for r in rows(repo)}
    assert "billing/invoices.py" in paths and "billing/invoice.py" not in paths


def test_branch_switch_costs_only_the_difference_and_coming_back_embeds_nothing(repo):
    index(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "billing/tax.py").write_text("def vat(amount, rate=0.25):\n    return round(amount * rate, 2)\n")
    (repo / "billing/refund.py").write_text("def refund(invoice):\n    return -invoice_total(invoice.lines)\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "feature")
    on_feature = index(repo)
    assert on_feature.files_processed == 2 and on_feature.files_unchanged == 2
    git(repo, "checkout", "-q", "main")
    back = index(repo)
    assert back.files_processed == 1 and back.files_deleted == 1
    assert back.chunks_embedded == 0
    git(repo, "checkout", "-q", "feature")
    assert index(repo).chunks_embedded == 0


def test_paths_with_quotes_and_spaces(make_repo):
    root = make_repo({"it's here/odd 'name'.py": "def odd():\n    return \"quote ' inside\"\n"})
    index(root)
    assert {r["path"] for r in rows(root)} == {"it's here/odd 'name'.py"}
    (root / "it's here/odd 'name'.py").write_text("def odd():\n    return 2\n")
    assert index(root).files_processed == 1
    (root / "it's here/odd 'name'.py").unlink()
    index(root)
    assert rows(root) == []


def test_a_json_key_escaping_a_lone_surrogate_is_indexed(make_repo):
    # JSON conformance suites hold keys like "\udfaa": json.loads makes them lone surrogates, which no table stores.
    root = make_repo({"cases/key_lone_surrogate.json": '{"\\uDFAA": 0, "other": 1}\n', "a.py": "def f():\n    return 1\n"})
    stats = index(root)
    assert stats.files_failed == 0 and stats.failed_files == []
    assert {r["path"] for r in rows(root)} == {"cases/key_lone_surrogate.json", "a.py"}


def test_no_embed_leaves_rows_searchable_and_the_next_run_embeds_them(repo):
    stats = index(repo, embed=False)
    assert stats.chunks_pending == stats.chunks_written and stats.chunks_embedded == 0
    assert all(r["vector"] is None for r in rows(repo))
    later = index(repo)
    assert later.chunks_embedded > 0 and later.chunks_pending == 0
    assert all(r["vector"] is not None for r in rows(repo))


def _cli(root: Path, *args: str, env_extra: dict | None = None, **kw) -> subprocess.Popen:
    env = dict(os.environ, LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(root.parent / f"{root.name}-index"),
               **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-m", "localidx", *args], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_second_writer_reports_the_running_one(repo):
    lock = open_index(repo, True, settings_for(repo)).paths.lock
    with WriteLock(lock):
        proc = _cli(repo, "index")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 75
    assert "another indexer is running" in err and str(os.getpid()) in err and "Traceback" not in err
    proc = _cli(repo, "index", "--wait", "5")
    proc.communicate(timeout=60)
    assert proc.returncode == 0


def _many_files(make_repo, count: int) -> Path:
    files = {}
    for i in range(count):
        body = "\n".join(f"    step_{j} = transform_{i}(step_{j - 1}, {j})" for j in range(1, 30))
        files[f"pkg/mod_{i:04d}.py"] = (f'"""Module {i}."""\n\n\ndef compute_{i}(step_0):\n{body}\n    return step_29\n\n\n'
                                        f"class Holder{i}:\n    value = {i}\n\n    def get(self):\n        return self.value\n")
    return make_repo(files, name="big")


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "the indexer finished before the moment to kill it"
        assert time.monotonic() < deadline, "timed out waiting for the indexer"
        time.sleep(0.02)


def _catalog_count(root: Path) -> int:
    idx = open_index(root, True, settings_for(root), read_only=True)
    try:
        return idx.catalog.count()
    finally:
        idx.close()


def _vectors_written(root: Path) -> int:
    idx = open_index(root, True, settings_for(root), read_only=True)
    try:
        table = idx.store.snapshot()
        return table.count_rows("vector IS NOT NULL") if table is not None else 0
    finally:
        idx.close()


def test_killed_run_resumes_without_duplicates_or_orphans(make_repo):
    root = _many_files(make_repo, 400)
    expected_paths = {f"pkg/mod_{i:04d}.py" for i in range(400)}
    # Kill 1: in the middle of writing rows (some files recorded, not all).
    proc = _cli(root, "index", "--quiet", "--no-embed", env_extra={"LOCALIDX_WRITE_BATCH_ROWS": "30"})
    _wait_for(lambda: _catalog_count(root) >= 40, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 40 <= _catalog_count(root) < 400
    (root / "pkg/mod_0001.py").write_text("def edited():\n    return 1\n")
    (root / "pkg/mod_0399.py").unlink()
    expected_paths.discard("pkg/mod_0399.py")
    # Kill 2: in the middle of filling vectors (slowed down so the moment can be caught).
    env = {"LOCALIDX_FAKE_EMBED_DELAY": "0.01"}
    proc = _cli(root, "index", "--quiet", env_extra=env)
    _wait_for(lambda: _vectors_written(root) >= 300, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    written = _vectors_written(root)
    assert 300 <= written < len(rows(root))
    final = _cli(root, "index", "--json")
    out, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    record = json.loads(out)
    assert record["chunks_pending"] == 0
    assert 0 < record["chunks_embedded"] <= len(rows(root)) - 300 + 3  # only what was left, not everything again
    got = rows(root)
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)), "duplicate rows"
    assert {r["path"] for r in got} == expected_paths, "orphaned or missing files"
    assert all(r["vector"] is not None for r in got)
    # The same tree indexed from scratch elsewhere gives exactly the same rows.
    fresh = run_index(root, True, load_settings(root, {"embed_model": "fake", "home": str(root.parent / "fresh")}))
    assert fresh.chunks_written == len(got)
    fresh_ids = {r["id"] for r in _rows_at(root, str(root.parent / "fresh"))}
    assert fresh_ids == set(ids)


def _rows_at(root: Path, home: str) -> list[dict]:
    idx = open_index(root, True, load_settings(root, {"embed_model": "fake", "home": home}), read_only=True)
    try:
        return idx.store.snapshot().search().select(["id"]).limit(None).to_arrow().to_pylist()
    finally:
        idx.close()


def test_a_reader_never_sees_a_file_half_old_and_half_new(make_repo):
    root = _many_files(make_repo, 60)
    index(root)
    # Rewrite every file so its chunks change in number and content, and watch from a reader while it is indexed.
    for i in range(60):
        body = "\n".join(f"    other_{j} = rework_{i}(other_{j - 1})" for j in range(1, 70))
        (root / f"pkg/mod_{i:04d}.py").write_text(f"def rework_{i}(other_0):\n{body}\n    return other_69\n")
    proc = _cli(root, "index", "--quiet")
    idx = open_index(root, True, settings_for(root), read_only=True)
    checked = 0
    while proc.poll() is None or checked == 0:
        table = idx.store.snapshot()
        snapshot = table.search().select(["path", "file_hash"]).limit(None).to_arrow().to_pylist()
        by_path: dict[str, set] = {}
        for r in snapshot:
            by_path.setdefault(r["path"], set()).add(r["file_hash"])
        assert all(len(h) == 1 for h in by_path.values()), "a file with rows from two versions"
        assert len(by_path) == 60, "a file missing from a snapshot"
        checked += 1
    idx.close()
    assert proc.returncode == 0, proc.stderr.read()
    assert checked >= 1


def test_changing_the_model_rebuilds_cleanly(repo, tmp_path):
    home = str(tmp_path / "home")
    fake = run_index(repo, True, load_settings(repo, {"embed_model": "fake", "home": home}))
    real = run_index(repo, True, load_settings(repo, {"home": home}))  # the default model, offline
    assert real.rebuilt and real.files_processed == 3 and real.chunks_embedded > 0
    idx = open_index(repo, True, load_settings(repo, {"home": home}), read_only=True)
    try:
        assert idx.store.table_name != open_index(repo, True, load_settings(repo, {"embed_model": "fake", "home": home}),
                                                  read_only=True).store.table_name
        tables = [t for t in idx.store._names() if t.startswith("chunks_")]
        assert tables == [idx.store.table_name], "the old model's table should be gone"
        vectors = idx.store.snapshot().search().select(["vector"]).limit(None).to_arrow().column("vector").to_pylist()
        assert {len(v) for v in vectors} == {idx.embedder.dim} != {64} and len(vectors) == fake.chunks_written
    finally:
        idx.close()


def test_a_new_meta_version_rebuilds_and_embeds_only_the_chunks_whose_text_changed(repo, monkeypatch):
    """An upgrade that changes [META] rebuilds the index in a new table, but a chunk whose embedded text is the same
    takes its vector from the cache: upgrading does not re-embed a whole repository."""
    import localidx.chunk.enrich as enrich

    first = index(repo)
    monkeypatch.setattr(enrich, "META_VERSION", enrich.META_VERSION + 1)
    same = index(repo)
    assert same.rebuilt and same.chunks_written == first.chunks_written
    assert same.chunks_embedded == 0 and same.chunks_reused == same.chunks_written
    again = index(repo, rebuild=True)  # and a rebuild by hand reads the same cache
    assert again.chunks_embedded == 0 and again.chunks_reused == first.chunks_written
