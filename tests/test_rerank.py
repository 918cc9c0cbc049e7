"""retrieve/rerank: the code-aware rerank of the head of a match list, under the package's real profiles.

What a user would notice: the code beats its tests unless the question is about tests, vendored and generated copies
sink, the chunk that defines the identifier the question names rises, one file cannot fill the whole head, only the
head is reordered, and every move is explained in the match's ``reasons``. The pipeline around it is tested on a
real index in tests/test_context.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from localidx.retrieve.guard import check
from localidx.retrieve.profiles import get_profile
from localidx.retrieve.rerank import head_size, rerank
from localidx.retrieve.transforms import analyze


@pytest.fixture(scope="module")
def balanced():
    name, table = get_profile("balanced")
    return check(name, table, "question").profile


def match(path: str, score: float, symbol: str = "", kind: str = "function", language: str = "python") -> dict:
    return {"id": f"{path}#{symbol}", "path": path, "score": score, "symbol": symbol, "kind": kind,
            "language": language}


def order(matches: list[dict]) -> list[str]:
    return [m["id"] for m in matches]


def test_code_beats_its_tests_unless_the_question_is_about_tests(balanced):
    found = [match("tests/test_auth.py", 0.9, "test_verify"), match("src/auth.py", 0.7, "verify")]
    out = rerank([dict(m) for m in found], balanced, analyze("how is a token verified"))
    assert order(out) == ["src/auth.py#verify", "tests/test_auth.py#test_verify"]
    assert out[1]["rerank_score"] == pytest.approx(0.9 * 0.5 + 0.03)
    assert "test code x0.5" in out[1]["reasons"]
    about_tests = rerank([dict(m) for m in found], balanced, analyze("which tests check token verification"))
    assert order(about_tests)[0] == "tests/test_auth.py#test_verify"


def test_vendored_copies_sink_unless_allowed(balanced):
    found = [match("vendor/lib/auth.py", 0.9, "verify"), match("src/auth.py", 0.6, "verify")]
    out = rerank([dict(m) for m in found], balanced, analyze("token check"))
    assert order(out)[0] == "src/auth.py#verify"
    assert "path penalty x0.5" in out[1]["reasons"]
    allowed = dataclasses.replace(balanced, allow_prefixes=("vendor/lib/",))
    assert order(rerank([dict(m) for m in found], allowed, analyze("token check")))[0] == "vendor/lib/auth.py#verify"


def test_the_chunk_that_defines_a_named_identifier_rises(balanced):
    found = [match("src/session.py", 0.8, "open_session"), match("src/tokens.py", 0.7, "tokens.verify_token")]
    out = rerank([dict(m) for m in found], balanced, analyze("where is verify_token called"))
    assert order(out)[0] == "src/tokens.py#tokens.verify_token"
    assert "defines a named identifier +0.15" in out[0]["reasons"]
    # Case counts: ``ProgressBar`` names the class, not a ``progressbar`` function.
    assert order(rerank([dict(m) for m in found], balanced, analyze("where is Verify_Token called")))[0] == \
        "src/session.py#open_session"


def test_kind_and_language_bonuses_break_near_ties(balanced):
    found = [match("docs/auth.md", 0.70, "Auth", kind="heading", language="markdown"),
             match("src/auth.rs", 0.68, "verify", language="rust")]
    out = rerank([dict(m) for m in found], balanced, analyze("token verification in rust"))
    assert order(out)[0] == "src/auth.rs#verify"
    assert out[0]["rerank_score"] == pytest.approx(0.68 + 0.03 + 0.05)
    no_bonus = dataclasses.replace(balanced, kind_bonus={}, language_bonus=0.0)
    assert order(rerank([dict(m) for m in found], no_bonus, analyze("token verification in rust")))[0] == \
        "docs/auth.md#Auth"


def test_one_file_cannot_fill_the_head(balanced):
    found = [match("src/big.py", 0.9 - i / 100, f"f{i}") for i in range(5)] + [match("src/other.py", 0.5, "g")]
    out = rerank([dict(m) for m in found], balanced, analyze("anything here"))
    assert order(out) == ["src/big.py#f0", "src/big.py#f1", "src/big.py#f2", "src/other.py#g",
                          "src/big.py#f3", "src/big.py#f4"]  # maxPerFile 3: the rest move behind, in order
    assert "diversity cap: moved behind the head" in out[4]["reasons"]
    one_each = dataclasses.replace(balanced, max_per_file=1)
    assert order(rerank([dict(m) for m in found], one_each, analyze("anything here")))[:2] == \
        ["src/big.py#f0", "src/other.py#g"]


def test_only_the_head_is_reordered(balanced):
    small = dataclasses.replace(balanced, rerank_top_n=2, head_multiplier=1.0)
    assert head_size(small) == 2 and head_size(balanced) == 18  # ceil(12 * 1.5)
    found = [match("tests/test_a.py", 0.9, "t"), match("src/a.py", 0.8, "a"),
             match("tests/test_b.py", 0.7, "u"), match("src/b.py", 0.1, "b")]
    out = rerank([dict(m) for m in found], small, analyze("how does a work"))
    assert order(out) == ["src/a.py#a", "tests/test_a.py#t", "tests/test_b.py#u", "src/b.py#b"]
    assert "rerank_score" not in out[2] and "rerank_score" not in out[3]  # the tail is untouched
