"""retrieve/search: hybrid search over a real LanceDB index of a real git repository (fake embedder unless marked).

What a user would notice: words find identifiers in any spelling, both arms feed the ranking, filters hold (also for
paths with quotes and spaces), stale results are flagged, and bad input is one clear error, never a traceback.
"""

from __future__ import annotations

import itertools
import json
import os
import string
from pathlib import Path

import numpy as np
import pytest

from localidx.config import load_settings
from localidx.errors import UsageError
from localidx.index.indexer import run_index
from localidx.retrieve import IndexNotReady, search
from localidx.store.index import open_index

QUOTED_DIR = "lib/it's here"

FILES = {
    "src/auth.py": (
        "class Session:\n"
        "    \"\"\"A signed-in user's session.\"\"\"\n\n"
        "    def __init__(self, user):\n"
        "        self.user = user\n\n\n"
        "def verify_token(token, secret):\n"
        "    \"\"\"Check the signature of a session token against the secret.\"\"\"\n"
        "    return token.signature == secret\n"
    ),
    "web/client.js": "export function verifyToken(jwt) {\n  return jwt.split('.').length === 3;\n}\n",
    "docs/guide.md": "# Guide\n\nRotate the signing key every month.\n",
    f"{QUOTED_DIR}/odd file.py": "def quirky_helper():\n    return 'quirk'\n",
    "pkg/a_b.py": "def underscore_marker():\n    return 1\n",
    "pkg/axb.py": "def underscore_marker():\n    return 2\n",
}


def _settings(root: Path, home: Path, model: str = "fake"):
    return load_settings(root, {"embed_model": model, "home": str(home)})


@pytest.fixture
def indexed(make_repo, tmp_path):
    """(root, settings, open) for FILES indexed with the fake embedder; ``open()`` gives a fresh read-only Index."""
    root = make_repo(FILES)
    settings = _settings(root, tmp_path / "home")
    run_index(root, True, settings)
    opened = []

    def open_():
        index = open_index(root, True, settings, read_only=True)
        opened.append(index)
        return index

    yield root, settings, open_
    for index in opened:
        index.close()


def _paths(matches) -> list[str]:
    return [m.path for m in matches]


def _colliding_word(word: str) -> str:
    """A nonsense word the fake embedder maps to exactly the vector of ``word``: vector-similar, yet no shared text."""
    from localidx.embed.fake import FakeEmbedder

    fake = FakeEmbedder()
    target = fake.embed_query(word)
    for letters in itertools.product(string.ascii_lowercase, repeat=5):
        candidate = "zq" + "".join(letters)
        if np.allclose(fake.embed_query(candidate), target):
            return candidate
    raise AssertionError("no collision found")


# -- finding things -------------------------------------------------------------------------------------------


def test_words_find_identifiers_in_either_spelling(indexed):
    _root, _settings_, open_ = indexed
    matches = search(open_(), "verify token", k=5)
    top = {(m.path, m.symbol) for m in matches[:3]}
    assert ("src/auth.py", "verify_token") in top
    assert ("web/client.js", "verifyToken") in top
    for m in matches[:2]:
        # Found by both arms under the same chunk id: the fusion keys match.
        assert m.vector_score is not None and m.bm25_score is not None


@pytest.mark.parametrize("query, expected", [
    ("verifyToken", "src/auth.py"),  # camelCase query -> "verify token" -> the snake_case definition
    ("verify_token", "web/client.js"),  # snake_case query -> the camelCase definition
])
def test_identifier_queries_find_the_other_spelling(indexed, query, expected):
    _root, _settings_, open_ = indexed
    assert expected in _paths(search(open_(), query, k=5, mode="bm25"))


TOKEN_FILES = {"src/auth.py", "web/client.js"}


@pytest.mark.parametrize("query, found", [
    ('"verify token"', {"src/auth.py"}), ("verify:token", {"src/auth.py"}), ("(verify) AND token*", {"src/auth.py"}),
    ("verify\\token", {"src/auth.py"}), ("token~2 ^3", TOKEN_FILES), ("über token", TOKEN_FILES),
    ("it's", None), ("-- OR NOT", None),
])
def test_any_user_text_is_a_valid_query(indexed, query, found):
    """Full-text syntax in user text (quotes, operators, wildcards, escapes, fuzziness) is read as plain words: it
    neither fails nor stops the words from finding their chunk."""
    _root, _settings_, open_ = indexed
    index = open_()
    bm25, hybrid = search(index, query, mode="bm25"), search(index, query, mode="hybrid")
    if found:
        assert bm25[0].path in found and bm25[0].bm25_score is not None
        assert hybrid[0].path in found
    else:  # only stopwords and punctuation: no word for BM25, and the vector arm still answers
        assert hybrid and all(m.bm25_score is None and m.vector_score is not None for m in hybrid)


@pytest.mark.parametrize("query", ['"', "?!", "-- --"])
def test_a_query_with_nothing_to_search_for_is_a_usage_error(indexed, query):
    _root, _settings_, open_ = indexed
    index = open_()
    for mode in ("bm25", "hybrid", "vector"):
        with pytest.raises(UsageError, match="nothing to search for"):
            search(index, query, mode=mode)


def test_vector_only_hit_is_kept(indexed, make_repo, tmp_path):
    # "quota" appears nowhere; a nonsense word with the same fake vector does. BM25 cannot find that file, the vector
    # arm can: it must survive fusion, reported with a vector score and no BM25 score.
    twin = _colliding_word("quota")
    # Repeated, so that the twin dominates the chunk's vector over the words of its [META] header.
    root = make_repo({**FILES, "ops/limits.py": f"def check():\n    return '{' '.join([twin] * 4)}'\n"}, name="repo2")
    settings = _settings(root, tmp_path / "home2")
    run_index(root, True, settings)
    index = open_index(root, True, settings, read_only=True)
    try:
        matches = search(index, "quota session", k=10)
        by_path = {m.path: m for m in matches}
        assert "ops/limits.py" in by_path
        limits = by_path["ops/limits.py"]
        assert limits.bm25_score is None and limits.vector_score is not None
        vector_only = [m for m in matches if m.bm25_score is None]
        assert vector_only[0].path == "ops/limits.py"  # the closest of the chunks BM25 cannot see
        session = next(m for m in matches if m.symbol == "Session")
        assert session.bm25_score is not None and session.vector_score is not None
    finally:
        index.close()


def test_bm25_only_hit_can_rank_first(indexed):
    # A file added and written without vectors yet (embedding deferred): only BM25 knows it.
    root, settings, open_ = indexed
    (root / "fresh").mkdir()
    (root / "fresh" / "new_module.py").write_text("def tune_xylophone(mallet):\n    return mallet\n")
    run_index(root, True, settings, embed=False)
    index = open_()
    fresh = next(m for m in search(index, "xylophone mallet", k=10) if m.path == "fresh/new_module.py")
    assert fresh.vector_score is None and fresh.bm25_score == 1.0
    best = search(index, "xylophone mallet", k=10, fusion="linear", vector_weight=0.3)[0]
    assert best.path == "fresh/new_module.py"
    assert best.vector_score is None and best.bm25_score == 1.0


def test_rows_without_vectors_answer_in_hybrid_mode(make_repo, tmp_path):
    root = make_repo(FILES)
    settings = _settings(root, tmp_path / "home")
    stats = run_index(root, True, settings, embed=False)
    assert stats.chunks_pending > 0
    index = open_index(root, True, settings, read_only=True)
    try:
        matches = search(index, "verify token")
        assert "src/auth.py" in _paths(matches)
        assert all(m.vector_score is None and m.bm25_score is not None for m in matches)
        assert search(index, "verify token", mode="vector") == []
    finally:
        index.close()


def test_modes_restrict_to_one_arm(indexed):
    _root, _settings_, open_ = indexed
    index = open_()
    bm25 = search(index, "signing key", mode="bm25")
    assert bm25 and all(m.vector_score is None and m.bm25_score is not None for m in bm25)
    vector = search(index, "signing key", mode="vector")
    assert vector and all(m.bm25_score is None and m.vector_score is not None for m in vector)
    assert vector[0].score == 1.0


@pytest.mark.parametrize("query", ["verify the session token of a user", "signing key",
                                   "Traceback (most recent call last):\n  File \"src/auth.py\", line 10, in "
                                   "verify_token\nAttributeError: 'str' object has no attribute 'signature'"])
def test_the_vector_arm_on_its_own_thread_ranks_as_one_arm_after_the_other(indexed, monkeypatch, query):
    """The vector arm runs beside the BM25 arm; the ranking (ids, scores, each arm's score) is the one of running
    them in turn, for a question and for a pasted report (two BM25 arms and the frames)."""
    import importlib
    from concurrent.futures import Future

    module = importlib.import_module("localidx.retrieve.search")  # the package exports a function of that name

    _root, _settings_, open_ = indexed
    index = open_()
    both = search(index, query, k=20)
    assert any(m.vector_score is not None for m in both) and any(m.bm25_score is not None for m in both)

    class InTurn:
        def submit(self, fn, *args):
            done = Future()
            done.set_result(fn(*args))
            return done

    monkeypatch.setattr(module, "_arm_pool", lambda: InTurn())
    in_turn = search(index, query, k=20)
    assert [m.to_dict() for m in both] == [m.to_dict() for m in in_turn]


@pytest.mark.parametrize("query", ["verify token", "Traceback (most recent call last):\n  File \"src/auth.py\", line 10, "
                                   "in verify_token\nTypeError: verify_token() missing 1 required positional argument\n"
                                   + "when I log in with a bearer token the session never opens. " * 20])
def test_a_hybrid_query_is_embedded_once_with_its_plans_vector_text(indexed, query):
    """The vector arm embeds the query itself, once, with the text its plan says (a report's analysed text, not
    the report), and the ranking is the one the index's own embedder gives."""
    from dataclasses import replace

    from localidx.retrieve.search import plan_query

    _root, _settings_, open_ = indexed
    index = open_()
    calls: list[str] = []

    class Counting:
        model_id, dim = index.embedder.model_id, index.embedder.dim

        def embed_query(self, text):
            calls.append(text)
            return index.embedder.embed_query(text)

        def embed(self, texts):
            return index.embedder.embed(texts)

    plain = search(index, query, k=3)
    counted = search(replace(index, embedder=Counting()), query, k=3)
    assert [m.id for m in counted] == [m.id for m in plain]
    assert calls == [plan_query(query).vector_text]


@pytest.mark.parametrize("fusion", ["linear", "rrf"])
def test_results_are_unique_and_sorted(indexed, fusion):
    _root, _settings_, open_ = indexed
    matches = search(open_(), "verify token session user", k=20, fusion=fusion)
    assert len(matches) >= 5  # enough to have an order to check
    assert len({m.id for m in matches}) == len(matches)
    scores = [m.score for m in matches]
    assert scores == sorted(scores, reverse=True)
    json.dumps([m.to_dict() for m in matches])  # JSON-ready, tags decoded to a dict
    assert all("priority" in m.tags for m in matches)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_the_first_matches_do_not_depend_on_k(indexed, mode):
    """-k only says how many to show: a chunk ranked 3rd with -k 3 is 3rd with -k 30 (every arm reads the same
    candidates whatever k is), with the same score."""
    _root, _settings_, open_ = indexed
    index = open_()
    query = "verify the session token of a user"
    wide = search(index, query, k=30, mode=mode)
    for k in (1, 3, 5):
        assert [(m.id, m.score) for m in search(index, query, k=k, mode=mode)] == \
            [(m.id, m.score) for m in wide[:k]]


def test_k_is_clamped(indexed):
    _root, _settings_, open_ = indexed
    index = open_()
    assert len(search(index, "verify token", k=0)) == 1
    assert len(search(index, "verify token", k=1000)) <= 100


# -- filters --------------------------------------------------------------------------------------------------


def test_language_and_kind_filters(indexed):
    _root, _settings_, open_ = indexed
    index = open_()
    js = search(index, "verify token", language="javascript")
    assert js and {m.language for m in js} == {"javascript"}
    classes = search(index, "session user", kind="class")
    assert classes and {m.kind for m in classes} == {"class"}
    assert search(index, "verify token", language="it's") == []  # a quote in a value is data, not SQL


@pytest.mark.parametrize("glob, expected", [
    ("*.py", {"src/auth.py", f"{QUOTED_DIR}/odd file.py", "pkg/a_b.py", "pkg/axb.py"}),
    ("src/", {"src/auth.py"}),
    ("src/**", {"src/auth.py"}),
    (f"{QUOTED_DIR}/*.py", {f"{QUOTED_DIR}/odd file.py"}),
    ("odd file.py", {f"{QUOTED_DIR}/odd file.py"}),  # no slash: matches at any depth
    ("it's here", {f"{QUOTED_DIR}/odd file.py"}),  # a directory name: everything under it
    ("pkg/a_b.py", {"pkg/a_b.py"}),  # "_" is literal, not LIKE's any-character
    ("**/a?b.py", {"pkg/a_b.py", "pkg/axb.py"}),
    ("./src/auth.py", {"src/auth.py"}),
    ("/", set(FILES)),
])
def test_path_glob_filter(indexed, glob, expected):
    _root, _settings_, open_ = indexed
    query = "verify token session quirky helper underscore marker signing"
    assert set(_paths(search(open_(), query, k=50, path_glob=glob))) == expected


# -- staleness ------------------------------------------------------------------------------------------------


def test_stale_flag_follows_the_files_on_disk(indexed):
    root, settings, open_ = indexed
    assert not any(m.stale for m in search(open_(), "verify token", k=20))

    os.utime(root / "web" / "client.js")  # a new stat, the same content: hashed, still fresh
    (root / "src" / "auth.py").write_text(FILES["src/auth.py"] + "\n# edited\n")
    matches = search(open_(), "verify token", k=20)
    assert {m.path for m in matches if m.stale} == {"src/auth.py"}

    run_index(root, True, settings)
    assert not any(m.stale for m in search(open_(), "verify token", k=20))

    (root / "web" / "client.js").unlink()
    matches = search(open_(), "verify token", k=20)
    assert {m.path for m in matches if m.stale} == {"web/client.js"}


# -- errors ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"query": ""}, "empty query"),
    ({"query": "  \n\t"}, "empty query"),
    ({"query": "x", "mode": "fuzzy"}, "unknown search mode"),
    ({"query": "x", "fusion": "max"}, "unknown fusion"),
    ({"query": "x", "vector_weight": 1.5}, "vector weight"),
])
def test_bad_arguments_are_usage_errors(indexed, kwargs, message):
    _root, _settings_, open_ = indexed
    with pytest.raises(UsageError, match=message):
        search(open_(), **kwargs)


def test_unindexed_work_tree_says_how_to_fix_it(make_repo, tmp_path):
    root = make_repo({"a.py": "x = 1\n"})
    index = open_index(root, True, _settings(root, tmp_path / "home"), read_only=True)
    try:
        with pytest.raises(IndexNotReady, match="localidx index"):
            search(index, "anything")
    finally:
        index.close()


def test_full_text_failure_is_one_line_or_a_fallback(indexed, monkeypatch):
    import lancedb.query

    def broken(*_args, **_kwargs):
        raise RuntimeError("inverted index is corrupt\nwith details on a second line")

    monkeypatch.setattr(lancedb.query, "MatchQuery", broken)
    _root, _settings_, open_ = indexed
    index = open_()
    matches = search(index, "verify token")
    assert matches and all(m.bm25_score is None for m in matches)
    with pytest.raises(UsageError) as raised:
        search(index, "verify token", mode="bm25")
    assert "\n" not in str(raised.value) and "inverted index is corrupt" in str(raised.value)


# -- the real model -------------------------------------------------------------------------------------------


@pytest.mark.real_model
def test_real_transformer_loads_offline_and_finds_by_meaning(make_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LOCALIDX_CACHE_DIR", str(tmp_path / "cache"))  # assemble the model from scratch, offline
    root = make_repo({
        "mailer.py": (
            "import smtplib\n\n\n"
            "def send_email(recipient, subject, body):\n"
            "    \"\"\"Deliver a message to the recipient's mailbox over SMTP.\"\"\"\n"
            "    with smtplib.SMTP('localhost') as server:\n"
            "        server.sendmail('noreply@example.com', [recipient], f'Subject: {subject}\\n\\n{body}')\n"
        ),
        "images.py": (
            "from PIL import Image\n\n\n"
            "def make_thumbnail(path, size=(128, 128)):\n"
            "    \"\"\"Shrink a picture to a small preview.\"\"\"\n"
            "    image = Image.open(path)\n"
            "    image.thumbnail(size)\n"
            "    return image\n"
        ),
        "ledger.py": (
            "import csv\n\n\n"
            "def total_spent(path):\n"
            "    \"\"\"Sum the amounts column of a bank statement export.\"\"\"\n"
            "    with open(path, newline='') as fh:\n"
            "        return sum(float(row['amount']) for row in csv.DictReader(fh))\n"
        ),
    })
    settings = load_settings(root, {"home": str(tmp_path / "home"),
                                    "embed_model": "sentence-transformers/all-MiniLM-L6-v2"})  # by name, not default
    stats = run_index(root, True, settings)
    assert stats.chunks_pending == 0 and stats.model.startswith("all-MiniLM-L6-v2")
    index = open_index(root, True, settings, read_only=True)
    try:
        assert search(index, "notify a customer by e-mail", mode="vector")[0].path == "mailer.py"
        assert search(index, "resize a photo", mode="vector")[0].path == "images.py"
        assert search(index, "how much money did I spend", k=3)[0].path == "ledger.py"
    finally:
        index.close()


def test_a_report_is_answered_without_static_vectors_and_with_the_transformers():
    """Static vectors lowered pasted reports below BM25 alone: with that model a report's vector weight is 0 (the
    vector arm is not run); the transformer keeps its report weight; a mix of models keeps the common one."""
    from types import SimpleNamespace

    from localidx.embed.names import STATIC_MODEL, TRANSFORMER_MODEL
    from localidx.retrieve.search import REPORT_VECTOR_WEIGHT, report_vector_weight

    def source(model):
        return ("", SimpleNamespace(settings=SimpleNamespace(embed_model=model)), None)

    assert report_vector_weight([source(STATIC_MODEL)]) == 0.0
    assert report_vector_weight([source(TRANSFORMER_MODEL)]) == REPORT_VECTOR_WEIGHT
    assert report_vector_weight([source(STATIC_MODEL), source(TRANSFORMER_MODEL)]) == REPORT_VECTOR_WEIGHT


def test_a_name_is_looked_up_alike_with_and_without_a_filter(make_repo, tmp_path):
    """Without a filter a name query finds its definitions through the table version's symbol map, with one through
    the table's own filter: both find the same definitions, in the same order (merged siblings, a method of a class,
    names in other spellings, a name that only occurs inside another)."""
    files = {
        "pkg/small.py": "def alpha_one():\n    return 1\n\n\ndef alpha_two():\n    return 2\n",
        "pkg/shapes.py": "class Shape:\n    def area(self):\n        return 0\n\n\nclass Square(Shape):\n"
                         "    def area(self):\n        return 4\n",
        "pkg/other.py": "def AlphaOne():\n    return 'camel'\n\n\ndef shape_area_total(shapes):\n"
                        "    return sum(s.area() for s in shapes)\n",
    }
    root = make_repo(files)
    settings = _settings(root, tmp_path / "home")
    run_index(root, True, settings)
    index = open_index(root, True, settings, read_only=True)
    try:
        for query in ("alpha_one", "AlphaOne", "area", "Square.area", "class Shape", "alpha_two", "total"):
            unfiltered = search(index, query, k=10)
            filtered = search(index, query, k=10, language="python")  # every file is python: the same rows
            assert [(m.path, m.start_line, m.definition) for m in unfiltered] == \
                [(m.path, m.start_line, m.definition) for m in filtered], query
        assert any(m.definition for m in search(index, "area", k=10))
    finally:
        index.close()
