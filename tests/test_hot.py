"""store/hot: the in-memory copy of a table version answers searches as LanceDB does, and never from a stale version.

Over a real LanceDB index of a real git repository (every language fixture, the fake embedder): the copy's BM25 and
vector arms against LanceDB's, full searches with and without the copy, a write and a rebuild in this process, and a
write through a real daemon, whose next queries must see it.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.retrieve import arms
from localidx.store import hot
from localidx.store.index import open_index, pinned

from test_daemon import Daemons, hello_daemon, run_dir, wait_for  # noqa: F401 - run_dir is a fixture
from conftest import daemon_environment

search_module = importlib.import_module("localidx.retrieve.search")
FIXTURES = Path(__file__).parent / "fixtures" / "languages"
QUERIES = [
    "parse the configuration file", "http request handler", "add an item to the list", "added items", "user name",
    "the and of", "render template", "error when reading", "Stack push pop", "convert to string", "main entry point",
    "hash map lookup", "running tasks in parallel", "café crème", "x", "sum of numbers", "class with a constructor",
    "interface method", "close the connection", "getUserName", "tokens parsing parser parsed", "write output",
]


@pytest.fixture
def fixture_repo(make_repo, tmp_path, monkeypatch):
    """(root, settings) of a repository holding every language fixture, indexed with the fake embedder."""
    monkeypatch.delenv("LOCALIDX_HOT")  # conftest turns the copy off for every other test
    monkeypatch.setattr(hot, "_copies", {})
    monkeypatch.setattr(hot, "_asked", {})
    monkeypatch.setattr(hot, "_building", set())
    files = {f"{sample.parent.name}/{sample.name}": sample.read_text(encoding="utf-8")
             for sample in sorted(FIXTURES.glob("*/sample.*")) if not sample.name.endswith(".json")}
    root = make_repo(files)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    run_index(root, True, settings)
    return root, settings


def _queries(root: Path) -> list[str]:
    """The fixed questions and, from the fixtures, identifiers and runs of words as a user would paste them."""
    found = list(QUERIES)
    for sample in sorted(root.glob("*/sample.*"))[:26]:
        words = re.findall(r"[A-Za-z_]\w+", sample.read_text(encoding="utf-8"))
        found += [words[len(words) // 3], " ".join(words[len(words) // 2:len(words) // 2 + 4])]
    return found


def _same_ranking(mine: list[dict], lance: list[dict], score: str, query: str) -> None:
    """The same scores in the same order, each row with LanceDB's score for it, and the same rows but where rows
    tie with the last one kept (which of equal rows come first is neither's promise)."""
    assert [r[score] for r in mine] == pytest.approx([r[score] for r in lance], rel=1e-3, abs=1e-5), query
    theirs = {r["id"]: r[score] for r in lance}
    for row in mine:
        if row["id"] in theirs:
            assert row[score] == pytest.approx(theirs[row["id"]], rel=1e-3, abs=1e-5), query
    if mine:
        edge = mine[-1][score]
        inside = lambda rows: {r["id"] for r in rows if abs(r[score] - edge) > 1e-5}  # noqa: E731
        assert inside(mine) == inside(lance), query


def _without_copy(monkeypatch, action):
    monkeypatch.setenv("LOCALIDX_HOT", "0")
    try:
        return action()
    finally:
        monkeypatch.delenv("LOCALIDX_HOT")


def test_the_copys_arms_answer_as_lancedbs(fixture_repo, monkeypatch):
    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    table = pinned(index)
    copy = hot.wait(table)
    assert copy is not None and copy.size > 100
    compared = 0
    for query in _queries(root):
        lance = _without_copy(monkeypatch, lambda: arms.bm25_arm(table, query, None, 200, required=False))
        _same_ranking(arms.bm25_arm(table, query, None, 200, required=False), lance, "_score", query)
        vector = index.embedder.embed_query(query)
        lance = _without_copy(monkeypatch, lambda: arms.vector_arm(table, vector, None, 50))
        _same_ranking(arms.vector_arm(table, vector, None, 50), lance, "_distance", query)
        compared += 1
    assert compared == len(_queries(root))


def test_searches_with_the_copy_rank_as_without_it(fixture_repo, monkeypatch):
    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    assert hot.wait(pinned(index)) is not None
    exact = total = 0
    for query in _queries(root):
        for mode in ("hybrid", "bm25", "vector"):
            lance = _without_copy(monkeypatch, lambda: search_module.search(index, query, k=10, mode=mode))
            mine = search_module.search(index, query, k=10, mode=mode)
            # float sums in another order may swap two matches whose scores differ in the seventh digit
            _same_ranking([{"id": m.id, "score": m.score} for m in mine],
                          [{"id": m.id, "score": m.score} for m in lance], "score", f"{query} ({mode})")
            exact += [m.id for m in mine] == [m.id for m in lance]
            total += 1
    assert exact >= 0.9 * total


def test_a_process_loads_a_version_on_its_second_query_and_the_daemon_on_its_first(fixture_repo, monkeypatch):
    root, settings = fixture_repo
    table = pinned(open_index(root, True, settings, read_only=True))
    assert hot.copy_for(table) is None and not hot._building  # a one-shot command pays for no load
    assert hot.copy_for(table) is None  # the second query starts it, and reads LanceDB meanwhile
    assert wait_for(lambda: hot.ready(table), 60, "the copy")
    monkeypatch.setattr(hot, "_copies", {})
    monkeypatch.setattr(hot, "_asked", {})
    monkeypatch.setattr(hot, "_eager", True)
    hot.copy_for(table)
    assert wait_for(lambda: hot.ready(table), 60, "the daemon's copy")


def _edit_and_reindex(root: Path, settings, old: str, new: str) -> None:
    target = root / "python" / "sample.py"
    target.write_text(target.read_text(encoding="utf-8") + f"\n\ndef {new}_handler():\n    return '{new}'\n",
                      encoding="utf-8")
    run_index(root, True, settings)


def test_a_write_is_seen_by_the_next_query_and_a_rebuild_swaps_the_copy(fixture_repo):
    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    before = pinned(index)
    assert hot.wait(before) is not None
    assert not search_module.search(index, "zanzibarquux", k=5, mode="bm25")
    _edit_and_reindex(root, settings, "", "zanzibarquux")
    index = open_index(root, True, settings, read_only=True)
    after = pinned(index)
    assert hot.table_key(after) != hot.table_key(before)
    # the next query reads the new version (from LanceDB while its copy loads), then from its copy
    assert search_module.search(index, "zanzibarquux", k=5, mode="bm25")[0].symbol.startswith("zanzibarquux")
    copy = hot.wait(after)
    assert copy is not None and copy.key == hot.table_key(after)
    assert search_module.search(index, "zanzibarquux", k=5, mode="bm25")[0].symbol.startswith("zanzibarquux")
    assert search_module.search(index, "zanzibarquux", k=5, mode="hybrid")[0].symbol.startswith("zanzibarquux")
    # a rebuild is a new generation: a new table, a new copy, the same answers
    run_index(root, True, settings, rebuild=True)
    index = open_index(root, True, settings, read_only=True)
    rebuilt = pinned(index)
    assert hot.table_key(rebuilt)[0] != hot.table_key(after)[0]
    assert hot.wait(rebuilt) is not None
    assert search_module.search(index, "zanzibarquux", k=5, mode="bm25")[0].symbol.startswith("zanzibarquux")


def test_a_write_through_the_daemon_is_seen_by_its_next_queries(make_repo, tmp_path, monkeypatch, run_dir):
    daemon_environment(monkeypatch, tmp_path / "home")
    monkeypatch.delenv("LOCALIDX_HOT")  # the daemon inherits the environment
    root = make_repo({"auth.py": "def verify_token(token, secret):\n    return token == secret\n"})
    d = Daemons(root)
    try:
        d.start()
        d.ready()

        def answer(query: str) -> list[dict]:
            with d.raw() as raw:
                return raw.ask("search/query", {"query": query, "mode": "bm25", "k": 5})["result"]["matches"]

        assert answer("verify token")
        loaded = wait_for(lambda: hello_daemon(d)["memory"]["in_memory"], 60, "the daemon's copy")
        (root / "auth.py").write_text("def rotate_keys(keyring):\n    return keyring[::-1]\n", encoding="utf-8")
        with d.raw() as raw:
            raw.ask("index/reindex", {"paths": ["auth.py"], "wait": True})
        # every query from now on, from LanceDB or from the new version's copy, sees the write
        assert answer("rotate keys") and not answer("verify token")
        def newer_copy() -> bool:
            answer("rotate keys")  # a query on the new version starts loading it
            return hello_daemon(d)["memory"]["in_memory"].get("version", 0) > loaded["version"]

        wait_for(newer_copy, 60, "the new version's copy")
        assert answer("rotate keys")[0]["path"] == "auth.py"
        assert not answer("verify token")
    finally:
        d.cli("daemon", "stop")
        d.teardown()


def test_a_table_with_an_ann_index_keeps_its_vector_search_in_lancedb(fixture_repo, monkeypatch):
    """From ``ANN_MIN_ROWS`` rows LanceDB's ANN index answers the vector arm faster than a scan of every vector: the
    copy then holds the BM25 postings only, and the vector arm asks LanceDB."""
    from types import SimpleNamespace

    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    table = pinned(index)

    class WithAnn:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def list_indices(self):
            return [*self.inner.list_indices(), SimpleNamespace(columns=["vector"])]

    key = hot.table_key(table)
    postings_only = hot.build(WithAnn(table), key)
    full = hot.build(table, key)
    assert full.with_vectors and not postings_only.with_vectors and postings_only.vectors.nbytes == 0
    vector = index.embedder.embed_query("parse the configuration file")
    assert postings_only.vector(vector, 10) is None
    assert postings_only.bm25("parse the configuration file", 50) == full.bm25("parse the configuration file", 50)
    lance = _without_copy(monkeypatch, lambda: arms.vector_arm(table, vector, None, 50))
    monkeypatch.setitem(hot._copies, key, postings_only)
    assert arms.vector_arm(table, vector, None, 50) == lance
    # nor the text (the shown rows' text is taken from LanceDB): the same answers, text included
    assert not postings_only.holds("text") and full.holds("text")
    for query in ("parse the configuration file", "getUserName", "class Stack"):
        mine = search_module.search_response(index, query, k=5)["matches"]
        theirs = _without_copy(monkeypatch, lambda: search_module.search_response(index, query, k=5))["matches"]
        assert [(m["id"], m["text"]) for m in mine] == [(m["id"], m["text"]) for m in theirs], query


def test_the_copy_holds_every_column_a_result_shows_as_lancedb_has_it(fixture_repo):
    """Every row of the copy, with every column a match is built from, equals LanceDB's row (text, hashes, tags,
    merged symbols, null and empty values alike)."""
    root, settings = fixture_repo
    table = pinned(open_index(root, True, settings, read_only=True))
    copy = hot.wait(table)
    row_ids = copy.row_ids.tolist()
    lance = table.take_row_ids(row_ids).select(list(hot.COLUMNS)).with_row_id().to_list()
    mine = copy.rows(row_ids, (*hot.COLUMNS, "_rowid"))
    assert len(mine) == len(lance) == copy.size
    assert {r["_rowid"]: r for r in mine} == {r["_rowid"]: r for r in lance}
    assert any(r["symbols"] for r in mine) and any(r["parent_id"] for r in mine)
    assert copy.rows([max(row_ids) + 1]) == []  # a row id the version does not hold


def test_answers_from_the_copy_are_the_answers_from_lancedb_field_by_field(fixture_repo, monkeypatch):
    """What a user is shown (``search_response``: path, lines, text, symbol, tags, staleness...) is the same with
    the copy as without it, for questions and for name queries."""
    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    assert hot.wait(pinned(index)) is not None
    scores = ("score", "vector_score", "bm25_score", "similarity")
    compared = 0
    for query in _queries(root):
        lance = _without_copy(monkeypatch, lambda: search_module.search_response(index, query, k=10))["matches"]
        mine = search_module.search_response(index, query, k=10)["matches"]
        if [m["id"] for m in mine] != [m["id"] for m in lance]:
            continue  # two scores that differ in the seventh digit (see above)
        for m, l in zip(mine, lance):
            assert {k: v for k, v in m.items() if k not in scores} == {k: v for k, v in l.items() if k not in scores}
            for name in scores:
                assert (m[name] is None) == (l[name] is None), query
                assert m[name] == pytest.approx(l[name], rel=1e-3, abs=1e-5) if m[name] is not None else True
        compared += 1
    assert compared >= 0.9 * len(_queries(root))


def test_a_warm_search_reads_nothing_of_lancedb(fixture_repo, monkeypatch):
    """With the version's copy loaded, a question, a name query and a files view are answered without a read of
    the table: no full-text or vector search, no take by row id, no scan."""
    root, settings = fixture_repo
    index = open_index(root, True, settings, read_only=True)
    table = pinned(index)
    assert hot.wait(table) is not None

    def refused(*_args, **_kwargs):
        raise AssertionError("a warm search read LanceDB")

    monkeypatch.setattr(type(table), "search", refused)
    monkeypatch.setattr(type(table), "take_row_ids", refused)
    for query in ("parse the configuration file", "getUserName", "class Stack", "how does push add an item"):
        assert search_module.search_response(index, query, k=10)["matches"], query
    assert search_module.search_response(index, "render template", files=True, k=5)["files"]
