"""retrieve/evaluate: query-set loading and file-level metrics, checked against figures worked out by hand
(tests/fixtures/eval/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.errors import UsageError
from localidx.index.indexer import run_index
from localidx.retrieve.evaluate import evaluate, load_queries, ranked_files, score_query
from localidx.store.index import open_index

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


# -- benchmarks/eval/shortq/scoring.py: the glue around a peer benchmark's own metric code -------------------------

def _shortq_scoring():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "eval" / "shortq" / "scoring.py"
    spec = importlib.util.spec_from_file_location("shortq_scoring", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A stand-in for the peer's files with their import lines (``benchmarks.data``, ``semble.types``): a hit needs the
# same path and overlapping lines, and the figure is the share of targets found (not NDCG), so the test can tell
# that the folder's code decided the score.
_PEER_DATA = '''
from dataclasses import dataclass

@dataclass(frozen=True)
class Target:
    path: str
    start_line: int | None = None
    end_line: int | None = None
'''
_PEER_METRICS = '''
from benchmarks.data import Target
from semble.types import SearchResult

def ndcg_at_k(relevant_ranks, n_relevant, k):
    return len([r for r in relevant_ranks if r <= k]) / n_relevant

def target_rank(results: list[SearchResult], target: Target):
    for rank, result in enumerate(results, 1):
        c = result.chunk
        if c.file_path == target.path and (target.start_line is None
                                           or not (c.end_line < target.start_line or c.start_line > target.end_line)):
            return rank
    return None

def file_rank(file_paths, target_path):
    return file_paths.index(target_path) + 1 if target_path in file_paths else None
'''


def test_shortq_scores_with_the_given_folders_code_and_leaves_the_name_benchmarks_alone(tmp_path):
    import sys

    (tmp_path / "data.py").write_text(_PEER_DATA)
    (tmp_path / "metrics.py").write_text(_PEER_METRICS)
    before = sys.modules.get("benchmarks")
    scoring = _shortq_scoring()
    up = scoring.load_upstream(tmp_path)
    assert sys.modules.get("benchmarks") is before
    ranked = [["a.py", 1, 10], ["b.py", 5, 9], ["c.py", 1, 3]]
    figure, ranks = scoring.score(up, ranked, [{"path": "b.py", "start_line": 9, "end_line": 20},
                                               {"path": "c.py", "start_line": 4, "end_line": 5}])
    assert (figure, ranks) == (0.5, [2, None])
    assert scoring.score(up, ranked, [{"path": "c.py"}, {"path": "c.py", "start_line": 50, "end_line": 60}],
                         files=True) == (1.0, [3])
    with pytest.raises(SystemExit, match="no metrics.py"):
        scoring.load_upstream(tmp_path / "absent")


def test_shortq_figures_are_means_over_repositories_and_pairs_match_on_question_ids():
    scoring = _shortq_scoring()

    def row(repo, i, value, category="symbol", language="go"):
        return {"id": f"s/{repo}/{i}", "repo": repo, "language": language, "category": category, "ndcg10": value}

    a = [row("big", 0, 1.0), row("big", 1, 1.0), row("big", 2, 1.0, "semantic"), row("small", 0, 0.0, language="c")]
    figures = scoring.aggregate(a)
    assert figures["overall"] == 0.5  # (1.0 + 0.0) / 2 repositories, not 3 / 4 questions
    assert figures["by_category"] == {"semantic": 1.0, "symbol": 0.5}
    assert figures["by_language"] == {"c": 0.0, "go": 1.0}
    b = [dict(r, ndcg10=0.5) for r in reversed(a)] + [row("other", 0, 1.0)]
    paired = scoring.paired(a, b)
    assert paired["overall"]["diff"] == pytest.approx(0.0)  # (+0.5 + -0.5) / 2
    assert (paired["overall"]["n"], paired["overall"]["wins"], paired["overall"]["losses"]) == (4, 3, 1)
    assert paired["by_language"]["go"]["diff"] == pytest.approx(0.5)
    assert paired["by_language"]["go"]["ci_q"] == pytest.approx((0.5, 0.5))


def _shortq_module(name, monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks" / "eval" / "shortq"))
    return importlib.import_module(name)


def test_generated_set_split_is_one_repository_per_language_in_each_half(monkeypatch):
    devset = _shortq_module("devset", monkeypatch)
    halves = devset.split_of()
    by_language: dict[str, list[str]] = {}
    for name, revision, language in devset.REPOS:
        assert len(revision) == 40
        by_language.setdefault(language, []).append(halves[name])
    assert len(by_language) >= 8
    assert all(sorted(v) == ["heldout", "tuning"] for v in by_language.values())
    assert (halves["pallets/jinja"], halves["python-attrs/attrs"]) == ("tuning", "heldout")  # as the README says


def test_generated_questions_are_first_sentences_without_the_name(monkeypatch):
    ctags = _shortq_module("ctags", monkeypatch)
    doc = "Returns the {@link Charset} for e.g. a file name.\n\nMore detail.\n@param name the name"
    assert ctags.first_sentence(doc) == "Returns the Charset for e.g. a file name"
    assert ctags.without_name("NewClient returns a client; see pkg.NewClient() too", ["NewClient"]) == \
        "returns a client; see too"
    lines = ["/**", " * Parses the query.", " */", "@Override", "public Query parse() {"]
    assert ctags.comment_above(lines, 5, "Q.java") == (1, "\nParses the query.\n")
    assert ctags.comment_above(["int x; /* a field */", "int y;"], 2, "a.c") is None
    assert ctags.header_comment(["// Copyright 2020 X", "", "// Package foo reads bar files.", "package foo"],
                                "foo.go") == (3, "Package foo reads bar files.")
