"""retrieve/evaluate: query-set loading and file-level metrics, checked against figures worked out by hand
(tests/fixtures/eval/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.errors import UsageError
from localidx.indexer import run_index
from localidx.store.index import open_index
from localidx.retrieve.evaluate import evaluate, load_queries, ranked_files, score_query

FIXTURE = Path(__file__).parent / "fixtures" / "eval"


@pytest.fixture
def fruit_index(make_repo, tmp_path):
    files = {str(p.relative_to(FIXTURE / "repo")): p.read_text() for p in (FIXTURE / "repo").rglob("*.txt")}
    root = make_repo(files)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    run_index(root, True, settings)
    index = open_index(root, True, settings, read_only=True)
    yield index
    index.close()


def test_load_queries_reads_jsonl_and_skips_blank_lines():
    queries = load_queries(FIXTURE / "queries.jsonl")
    assert [q["query"] for q in queries] == ["apple harvest", "banana", "cherry blossom", "date elderberry"]
    assert queries[1]["gold"] == ["notes/b.txt", "notes/a.txt"]


def test_load_queries_names_the_bad_line(tmp_path):
    with pytest.raises(UsageError, match=r"bad\.jsonl:2: not valid JSON"):
        load_queries(FIXTURE / "bad.jsonl")
    missing_gold = tmp_path / "q.jsonl"
    missing_gold.write_text('{"query": "x", "gold": ["a"]}\n{"query": "y"}\n')
    with pytest.raises(UsageError, match=r"q\.jsonl:2: \"gold\""):
        load_queries(missing_gold)
    with pytest.raises(UsageError, match="cannot read"):
        load_queries(tmp_path / "absent.jsonl")


def test_files_rank_by_first_appearance():
    assert ranked_files(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_score_query_counts_only_the_first_k_files():
    record = score_query(["x", "y", "gold1", "z", "w", "gold2"], ["gold1", "gold2"], k=10)
    assert record["rank"] == 3 and record["rr"] == pytest.approx(1 / 3)
    assert (record["hit@1"], record["hit@5"], record["hit@10"]) == (False, True, True)
    assert record["gold_found@5"] == 0.5
    assert score_query(["x", "y", "gold1"], ["gold1"], k=2)["rank"] is None


def test_evaluate_matches_hand_computed_figures(fruit_index):
    report = evaluate(fruit_index, load_queries(FIXTURE / "queries.jsonl"), mode="bm25")
    assert report["queries"] == 4
    assert report["recall@1"] == 0.5
    assert report["recall@5"] == 0.75
    assert report["recall@10"] == 0.75
    assert report["gold_recall@5"] == 0.625
    assert report["mrr"] == 0.625
    assert [r["rank"] for r in report["per_query"]] == [1, 1, None, 2]
    assert report["per_query"][3]["files"] == ["notes/d.txt", "notes/e.txt"]


def test_evaluate_runs_every_search_setup(fruit_index):
    queries = load_queries(FIXTURE / "queries.jsonl")
    for mode, fusion, weight in [("vector", None, None), ("hybrid", "rrf", None), ("hybrid", "linear", 0.3)]:
        report = evaluate(fruit_index, queries, mode=mode, fusion=fusion, vector_weight=weight, k=3)
        assert report["queries"] == 4
        assert 0.0 <= report["recall@1"] <= report["recall@5"] <= report["recall@10"] <= 1.0
        assert all(len(r["files"]) <= 3 for r in report["per_query"])
