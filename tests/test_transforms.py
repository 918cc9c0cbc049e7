"""retrieve/transforms: what the context pipeline reads out of a question before it searches.

What a user would notice: an identifier is recognised in any spelling (and then earns the rerank's symbol bonus), a
question that names a language or tests changes the ranking, a question in another language is flagged for
translation, a follow-up ("and who calls it?") searches for what the earlier turn named, and multi-query's extra
queries are the specific ones first. The pipeline's use of each is tested on a real index in tests/test_context.py.
"""

from __future__ import annotations

import pytest

from localidx.retrieve.transforms import analyze, is_test_path, path_role, standalone, sub_queries


def test_identifiers_are_found_in_every_spelling_and_backticks():
    a = analyze("how does `Store.save` handle session_id and verifyToken()?")
    assert a.identifiers == ["Store.save", "session_id", "verifyToken"]
    assert analyze("how is the session saved?").identifiers == []  # plain words are not identifiers


def test_quoted_phrases_and_keywords_without_stopwords():
    a = analyze('find "rate limit exceeded" errors in the client')
    assert a.phrases == ["rate limit exceeded"]
    assert a.keywords == ["find", "rate", "limit", "exceeded", "errors", "client"]
    assert "the" not in a.keywords and "in" not in a.keywords


@pytest.mark.parametrize("question, languages", [
    ("where is the pool sized in rust?", {"rust"}),
    ("in go code where is the server started", {"go"}),
    ("let me go over the server start", set()),  # "go" the verb names no language
])
def test_a_named_language_is_recognised(question, languages):
    assert analyze(question).languages == languages


def test_questions_about_tests_and_docs_are_told_apart():
    assert analyze("which tests cover the parser?").about_tests is True
    assert analyze("how does the parser read a file?").about_tests is False
    assert analyze("what does the README say about install").about_docs is True


@pytest.mark.parametrize("question, language", [
    ("comment fonctionne la vérification du jeton dans le code?", "fr"),
    ("トークンはどこで検証されますか", "non-latin"),
])
def test_a_question_in_another_language_is_flagged_for_translation(question, language):
    a = analyze(question)
    assert (a.english, a.foreign_language) == (False, language)
    assert analyze("how is the token verified?").english is True


def test_a_follow_up_carries_the_terms_of_the_earlier_turn():
    question, carried = standalone("and who calls it?", ["what does constant_time_compare do?"])
    assert carried == ["constant_time_compare"]
    assert question == "and who calls it? (constant_time_compare)"
    # The most recent turn with terms of its own is what "it" refers to.
    assert standalone("and who calls it?", ["what does sign_payload do?", "and verify_token?"])[1] == ["verify_token"]


def test_a_question_that_stands_alone_is_left_as_it_is():
    own = "how is the session token verified against the secret?"
    assert standalone(own, ["what does constant_time_compare do?"]) == (own, [])
    assert standalone("and who calls it?", []) == ("and who calls it?", [])


def test_sub_queries_are_most_specific_first_and_capped():
    question = 'where does verifyToken check "token expiry" for the session store?'
    a = analyze(question)
    assert sub_queries(question, a, 5) == [
        "verifyToken verify token", "token expiry", "verifytoken check token expiry session store"]
    assert sub_queries(question, a, 1) == ["verifyToken verify token"]
    assert sub_queries(question, a, 0) == []
    # Nothing to add to a question that is one word: no sub-query repeats it.
    assert sub_queries("tokens", analyze("tokens"), 3) == []


@pytest.mark.parametrize("path, test, role", [
    ("tests/test_auth.py", True, "test"),
    ("src/auth_test.go", True, "test"),
    ("spec/models/user_spec.rb", True, "test"),
    ("src/contest.py", False, ""),  # "test" inside a word is not a test file
    ("src/auth.py", False, ""),
    ("docs/guide.md", False, "doc"),
    ("examples/demo.py", False, "example"),
    ("dist/app.js", False, "generated"),
])
def test_paths_are_classified_by_role(path, test, role):
    assert is_test_path(path) is test
    assert path_role(path) == role
