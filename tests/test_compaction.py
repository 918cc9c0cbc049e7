"""store/compact through the indexer: a real git repository switched between two branches, indexed after each
switch the way the hooks do (``run_index``), on a real LanceDB with the fake embedder.

What a user would notice: the index does not grow with every branch switch (it stays near the size of an index
built fresh at the branch now checked out), searches still find what the branch holds, and a search that pinned a
version before a switch keeps reading it while the switch is indexed and compacted.
"""

from __future__ import annotations

import gc

import pytest

from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.paths import index_paths
from localidx.store import compact
from localidx.store.index import open_index
from localidx.store.lance import release_pinned
from tests.conftest import git, init_repo, write_files
from tests.test_daemon import run_dir  # noqa: F401 - a fixture

FILES = 100


def module(branch: str, n: int) -> str:
    return "\n\n".join(f"def {branch}_function_{n}_{i}(value):\n    '''{branch} helper {i} of module {n}.'''\n"
                       f"    return value * {i} + {n}\n" for i in range(6))


def table_dir(root, settings):
    paths = index_paths(root, True, settings.home)
    [table] = [p for p in paths.lancedb.glob("chunks_*.lance")]
    return table


@pytest.fixture
def two_branches(tmp_path):
    root = init_repo(tmp_path / "repo", {f"pkg/m{n}.py": module("main", n) for n in range(FILES)})
    git(root, "checkout", "-q", "-b", "other")
    write_files(root, {f"pkg/m{n}.py": module("other", n) for n in range(FILES)})
    git(root, "commit", "-q", "-am", "every file changed")
    return root


@pytest.mark.parametrize("pylance", [True, False], ids=["with-pylance", "without-pylance"])
def test_the_index_stays_near_a_fresh_ones_size_through_branch_switches(two_branches, tmp_path, monkeypatch, pylance):
    # Without pylance (a plain install: it comes with localidx[cluster]) old versions go with the rewrites only.
    monkeypatch.setattr(compact, "USE_PYLANCE", pylance)  # a daemon's writer made in this process sets it False
    root = two_branches
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    sizes = []
    for switch in range(6):
        git(root, "checkout", "-q", "main" if switch % 2 == 0 else "other")
        run_index(root, True, settings)
        sizes.append(compact.footprint(table_dir(root, settings)))
    fresh_settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "fresh")})
    run_index(root, True, fresh_settings)
    fresh = compact.footprint(table_dir(root, fresh_settings))
    last = sizes[-1]
    assert last.bytes <= 1.3 * fresh.bytes, (last, fresh)
    assert last.versions == 1 and last.deletion_files == 0  # nobody reads: every old version went
    assert max(s.bytes for s in sizes) <= 1.5 * max(sizes[0].bytes, sizes[1].bytes)  # no growth along the way
    index = open_index(root, True, settings, read_only=True)
    try:
        rows = index.store.snapshot().to_arrow()
        assert len(set(rows.column("path").to_pylist())) == FILES
        assert all(s.startswith("other_function") for s in rows.column("symbol").to_pylist() if s)
    finally:
        index.close()


def test_a_search_pinned_before_a_switch_reads_its_version_through_the_compaction(two_branches, tmp_path):
    root = two_branches
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    git(root, "checkout", "-q", "main")
    run_index(root, True, settings)
    reader = open_index(root, True, settings, read_only=True)
    try:
        table = reader.store.snapshot()
        git(root, "checkout", "-q", "other")
        run_index(root, True, settings)  # rewrites the fragments and deletes the versions nobody is on
        assert compact.footprint(table_dir(root, settings)).versions == 2  # the latest and the pinned one
        symbols = table.to_arrow().column("symbol").to_pylist()
        assert len(symbols) >= FILES and all(s.startswith("main_function") for s in symbols if s)
        del table
        release_pinned()
        gc.collect()
    finally:
        reader.close()
    git(root, "checkout", "-q", "main")
    run_index(root, True, settings)
    assert compact.footprint(table_dir(root, settings)).versions == 1  # the reader is done: its version went


def test_deleted_rows_are_rewritten_away_only_past_the_threshold(two_branches, tmp_path, monkeypatch):
    # A one-file edit deletes a few rows: they stay until enough pile up (a rewrite costs a second at 4k rows);
    # the threshold is what decides.
    root = two_branches
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    run_index(root, True, settings)
    (root / "pkg" / "m0.py").write_text(module("edited", 0), encoding="utf-8")
    run_index(root, True, settings)
    edited = compact.footprint(table_dir(root, settings))
    assert edited.deletion_files == 1 and edited.versions == 1
    monkeypatch.setattr(compact, "REWRITE_DELETED_SHARE", 0.0)
    (root / "pkg" / "m1.py").write_text(module("edited", 1), encoding="utf-8")
    run_index(root, True, settings)
    assert compact.footprint(table_dir(root, settings)).deletion_files == 0


def test_a_daemon_keeps_the_version_its_readers_are_on_and_compacts_it_away_when_idle(two_branches, tmp_path,
                                                                                       monkeypatch, run_dir):
    from tests.conftest import daemon_environment
    from tests.test_daemon import Daemons, hello_daemon, search_over_socket, wait_for

    root = two_branches
    git(root, "checkout", "-q", "main")
    daemon_environment(monkeypatch, tmp_path / "home")
    d = Daemons(root)
    try:
        d.start(env={"LOCALIDX_DAEMON_RELEASE_S": "5"})
        d.ready()
        settings = load_settings(root, {})
        assert search_over_socket(d, "main helper")  # the daemon pins the latest version
        git(root, "checkout", "-q", "other")
        proc = d.cli("index", "--quiet")  # through the daemon: its writer runs the pass
        assert proc.returncode == 0, proc.stderr
        assert compact.footprint(table_dir(root, settings)).versions >= 2  # the latest, and the one it pinned
        wait_for(lambda: hello_daemon(d)["memory"]["released"], 60, "the idle release")
        after = compact.footprint(table_dir(root, settings))
        assert after.versions == 1 and after.deletion_files == 0
        found = search_over_socket(d, "other helper")
        assert found and all(m["symbol"].startswith("other_function") for m in found)
    finally:
        d.teardown()
