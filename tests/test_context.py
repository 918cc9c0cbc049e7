"""The context pipeline on real indexed repositories: profiles, guard, query transforms, multi-query, rerank,
neighbour expansion, auto-merge, budget, the response, and the CLI / socket / --all-repos entry points."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, indexed_once, init_repo
from llm_stub import serve_llm, user_message
from localidx.config import load_settings
from localidx.errors import UsageError
from localidx.index.indexer import run_index
from localidx.retrieve.context import RESPONSE_KEYS, build_for_repository
from localidx.retrieve.merge import auto_merge, fit_pack
from localidx.store.index import open_index

TOKENS = '''"""Token helpers: signing and verification of session tokens."""
import hashlib


def verify_token(token, secret):
    """Check a token's signature against the shared secret and reject expired tokens."""
    digest = sign_payload(token.payload, secret)
    if token.expires_at is not None and token.expires_at < token.issued_at:
        raise ValueError("token expired before it was issued")
    return constant_time_compare(digest, token.signature)


def sign_payload(payload, secret):
    """Sign a payload with the secret: a hex SHA-256 digest over payload and secret."""
    material = (payload + ":" + secret).encode("utf-8")
    digest = hashlib.sha256(material).hexdigest()
    return digest.lower()


def constant_time_compare(left, right):
    """Compare two digests in time independent of where they differ."""
    if len(left) != len(right):
        return False
    result = 0
    for a, b in zip(left, right):
        result |= ord(a) ^ ord(b)
    return result == 0
'''

SESSION = '''"""Sessions kept in memory, opened with a verified token."""
from src.auth.tokens import verify_token


class SessionStore:
    """Holds open sessions by user name."""

    def __init__(self):
        self.sessions = {}
        self.closed = []
        self.opened_count = 0

    def open_session(self, user, token, secret):
        """Open a session for a user after checking the token signature."""
        if not verify_token(token, secret):
            raise PermissionError("the token signature does not match")
        self.sessions[user] = token
        self.opened_count += 1
        return user

    def close_session(self, user):
        """Close a user's session and remember that it was closed."""
        token = self.sessions.pop(user, None)
        if token is not None:
            self.closed.append(user)
        return token is not None

    def refresh_session(self, user, token):
        """Replace the token of an open session with a fresh one."""
        if user not in self.sessions:
            raise KeyError(f"no open session for {user}")
        self.sessions[user] = token
        return token
'''

TEST = '''from src.auth.tokens import verify_token


def test_verify_token_accepts_a_signed_token():
    token = make_signed_token("payload", secret="s3cret")
    assert verify_token(token, "s3cret")
    assert not verify_token(token, "other")


def test_verify_token_rejects_expired_tokens():
    token = make_signed_token("payload", secret="s3cret", expired=True)
    try:
        verify_token(token, "s3cret")
    except ValueError:
        pass
'''

VENDOR = '''def verify_token(token, secret):
    """Vendored copy: verify a token signature with a secret key."""
    expected = compute_signature(token.body, secret)
    return expected == token.signature and not token.revoked


def compute_signature(body, secret):
    return body[::-1] + secret
'''

BILLING = '''package billing

// ChargeInvoice charges the customer's card for an invoice total in cents.
func ChargeInvoice(invoice Invoice, card Card) (Receipt, error) {
	if invoice.TotalCents <= 0 {
		return Receipt{}, ErrEmptyInvoice
	}
	return card.Charge(invoice.TotalCents)
}
'''

FILES = {
    "src/__init__.py": "", "src/auth/__init__.py": "",
    "src/auth/tokens.py": TOKENS, "src/auth/session.py": SESSION, "tests/test_tokens.py": TEST,
    "vendor/jwt/verify.py": VENDOR, "billing/charge.go": BILLING,
    "README.md": "# Auth service\n\nSessions are opened with a signed token; `verify_token` checks the signature.\n",
}


def _make_indexed(base: Path, name: str, files: dict[str, str]) -> tuple[Path, object]:
    root = init_repo(base / name, files)
    settings = load_settings(root, {"embed_model": "fake", "home": str(base / f"{name}-home")})
    run_index(root, True, settings)
    return root, settings


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """One indexed repository for the read-only tests (the registry pointed away from the user's)."""
    with indexed_once(tmp_path_factory, "auth", FILES) as indexed:
        yield indexed


def pack(repo, question: str, **options) -> dict:
    _root, settings, index = repo
    return build_for_repository(index, question, settings=settings, **options)


def with_profile(root: Path, toml: str) -> None:
    (root / ".localidx.toml").write_text(toml, encoding="utf-8")


@pytest.fixture
def own_repo(tmp_path):
    """A fresh indexed repository a test may reconfigure."""

    def make(files: dict[str, str] = FILES, name: str = "own"):
        root, settings = _make_indexed(tmp_path, name, files)
        return root, settings

    return make


def _open(root: Path, settings):
    return open_index(root, True, load_settings(root, {"embed_model": "fake", "home": settings.home}), read_only=True)


def configured_pack(root: Path, settings, toml: str | None, question: str, **options) -> dict:
    """One pack from ``root`` after writing ``toml`` (profiles) to its .localidx.toml."""
    if toml is not None:
        with_profile(root, toml)
    index = _open(root, settings)
    try:
        return build_for_repository(index, question, settings=settings, **options)
    finally:
        index.close()


# -- the response and profiles ----------------------------------------------------------------------------------


def test_default_pack_has_the_documented_shape_and_cites_the_answer(repo):
    r = pack(repo, "how is a token signature verified against the secret?")
    assert set(RESPONSE_KEYS) <= set(r)
    assert r["appliedModules"][0] == "profile:balanced"
    for stage in ("guard", "search:hybrid", "rerank:code-aware", "neighbors:PARENT_SYMBOL", "auto-merge",
                  "context-budget"):
        assert stage in r["appliedModules"]
    assert r["rerankApplied"] is True and r["noResults"] is False and r["noResultsReason"] is None
    top = r["matches"][0]
    assert top["path"] == "src/auth/tokens.py"
    for key in ("path", "start_line", "end_line", "symbol", "score", "stale", "text", "uses", "used_by"):
        assert key in top
    assert top["stale"] is False
    assert "Question: how is a token signature verified" in r["augmentedPrompt"]
    assert f"[1] src/auth/tokens.py:{top['start_line']}-{top['end_line']}" in r["augmentedPrompt"]
    # The default template fills every placeholder.
    assert "{{" not in r["instructions"] and "auth repository" in r["instructions"]
    assert r["augmentedPrompt"] in r["instructions"]
    assert r["stats"]["tokens"] <= 3000


def test_every_profile_runs_and_names_itself(repo):
    seen = {}
    for name in ("conservative", "balanced", "aggressive", "legacy"):
        r = pack(repo, "verify token signature", profile=name)
        assert f"profile:{name}" in r["appliedModules"]
        seen[name] = r["appliedModules"]
    assert "rerank:code-aware" not in seen["legacy"] and "multi-query" not in seen["legacy"]
    assert not any(m.startswith("neighbors:") for m in seen["legacy"] + seen["conservative"])
    assert "neighbors:CALL_GRAPH" in seen["aggressive"]


def test_unknown_profile_is_a_usage_error_naming_the_known_ones(repo):
    with pytest.raises(UsageError, match="unknown profile 'fast'.*balanced"):
        pack(repo, "verify token", profile="fast")


def test_repository_profiles_override_and_add(own_repo):
    root, settings = own_repo()
    with_profile(root, '[profiles.balanced.postprocess]\nneighborStrategy = "LINEAR"\n\n'
                       '[profiles.tiny.postprocess]\nmaxContextTokens = 300\nautoMerge = false\n')
    index = _open(root, settings)
    try:
        r = build_for_repository(index, "verify token signature", settings=settings)
        assert "neighbors:LINEAR" in r["appliedModules"]
        r = build_for_repository(index, "verify token signature", profile="tiny", settings=settings)
        assert "profile:tiny" in r["appliedModules"] and "auto-merge" not in r["appliedModules"]
        assert r["stats"]["tokens"] <= 300
        assert "rerank:code-aware" in r["appliedModules"]  # the rest comes from balanced
    finally:
        index.close()


# -- the guard and the sanitizer ----------------------------------------------------------------------------------


def test_guard_clamps_request_limits_with_warnings_and_a_structured_log_line(repo, caplog):
    with caplog.at_level(logging.INFO, logger="localidx.retrieve.guard"):
        r = pack(repo, "verify token", top_k=500, max_tokens=256)
    assert "guard: topK 500 clamped to 40 (profile balanced)" in r["warnings"]
    logged = [json.loads(rec.getMessage()) for rec in caplog.records if rec.getMessage().startswith("{")]
    assert {"event": "guard.clamp", "profile": "balanced", "field": "topK", "requested": 500, "applied": 40} in logged
    assert r["stats"]["promptTokens"] <= 256 and r["stats"]["budget"] == 256
    # A budget is honoured up to 128k tokens; past that it is lowered, and under the smallest pack it is refused
    # (raising it would hand back more than was asked for).
    r = pack(repo, "verify token", max_tokens=99999)
    assert not any("maxContextTokens" in w for w in r["warnings"]) and r["stats"]["budget"] == 99999
    r = pack(repo, "verify token", max_tokens=500000)
    assert "guard: maxContextTokens 500000 clamped to 128000 (profile balanced)" in r["warnings"]
    with pytest.raises(UsageError, match="a token budget of 10 is too small"):
        pack(repo, "verify token", max_tokens=10)


def test_guard_clamps_profile_values_and_the_sanitizer_fixes_their_types(own_repo):
    root, settings = own_repo()
    toml = ('[profiles.wild.retrieval]\ntopK = "7"\nqueries = 9\nmaxQueries = 8\n\n'
            '[profiles.wild.postprocess]\nneighborLimit = 50\nneighborStrategy = "linear"\nmaxPerFile = "many"\n')
    r = configured_pack(root, settings, toml, "verify token", profile="wild")
    w = r["warnings"]
    assert "sanitize: topK '7' read as 7" in w
    assert "guard: maxQueries 8 clamped to 6 (profile wild)" in w
    assert "guard: queries 9 clamped to 6 (profile wild)" in w
    assert "guard: neighborLimit 50 clamped to 12 (profile wild)" in w
    assert "sanitize: neighborStrategy 'linear' normalised to 'LINEAR'" in w
    assert any(x.startswith("sanitize: maxPerFile 'many' is not a int") for x in w)
    assert "neighbors:LINEAR" in r["appliedModules"]


def test_every_key_of_the_package_profiles_reaches_the_pipeline_and_back():
    """A key of profiles.toml the Profile type does not map would be ignored without a word: each one must read
    into a field and write back under its own name."""
    import localidx
    from localidx.config import read_toml
    from localidx.retrieve.guard import check
    from localidx.retrieve.profiles import WIRE_NAMES, Profile, get_profile

    package = read_toml(Path(localidx.__file__).parent / "data" / "profiles.toml")
    written = {(section, key) for table in package.values() for section, part in table.items()
               if isinstance(part, dict) for key in part}
    assert written == set(WIRE_NAMES.values())
    name, table = get_profile("aggressive")
    profile = check(name, table, "verify token").profile
    assert (profile.top_k, profile.neighbor_strategy, profile.multi_query) == (30, "CALL_GRAPH", True)
    assert profile.to_wire() == {section: table[section] for section in ("retrieval", "postprocess", "generation")}
    assert Profile.from_wire(profile.to_wire()) == profile


def test_a_long_question_is_said_to_be_cut_and_not_to_have_had_control_characters(repo):
    r = pack(repo, "verify token " + "a" * 40_000)
    assert r["warnings"][0] == "sanitize: the question cut to 32768 characters (it had 40013)"
    # In the prompt, the question takes at most half of the budget: the rest is for the code.
    assert r["warnings"][1].startswith("the question was cut to its first ")
    assert "(the rest of the question was cut to fit the token budget)" in r["instructions"]
    assert r["stats"]["promptTokens"] <= 3000 and r["matches"]
    with_control = pack(repo, "verify\x00 token " + "a" * 40_000)
    assert "sanitize: control characters removed from the question" in with_control["warnings"]


def test_sanitizer_trims_the_question_and_drops_empty_turns(repo):
    r = pack(repo, "  verify\x00 token  ", conversation_context=["", "   "])
    assert r["rawQuery"] == "verify token"
    assert "sanitize: control characters removed from the question" in r["warnings"]
    assert "sanitize: surrounding whitespace trimmed from the question" in r["warnings"]
    assert "sanitize: empty conversation turn 1 dropped" in r["warnings"]
    with pytest.raises(UsageError, match="empty question"):
        pack(repo, " \t ")
    with pytest.raises(UsageError, match="unknown kind"):
        pack(repo, "verify token", kind="lambda")



def test_a_pasted_report_is_read_line_by_line_as_search_reads_it(repo):
    """The question keeps its lines: a report's title, traceback frames and log lines are read as lines, so the
    pack's files view is the one ``search --files`` gives (when the sanitizer joined the lines into one, a report
    became a single long title and its frames were lost)."""
    from localidx.retrieve.search import search_response

    _root, _settings, index = repo
    report = ("Logging in fails after the upgrade\n\n"
              "Every request with a bearer token is refused, even a fresh one; the billing page is fine.\n"
              "Traceback (most recent call last):\n"
              '  File "/srv/app/src/auth/session.py", line 12, in open_session\n'
              "    if not verify_token(token, secret):\n"
              '  File "/srv/app/src/auth/tokens.py", line 9, in verify_token\n'
              "    raise ValueError(\"token expired\")\n"
              "ValueError: token expired\n\n\n\n"
              "Expected: the session opens. Actual: 401 on every page.   \n")
    r = pack(repo, report)
    assert r["rawQuery"].splitlines()[:2] == ["Logging in fails after the upgrade", ""]
    assert '  File "/srv/app/src/auth/tokens.py", line 9, in verify_token' in r["rawQuery"].splitlines()
    assert "\n\n\n" not in r["rawQuery"] and not r["rawQuery"].endswith(" ")
    searched = search_response(index, report, files=True)["files"]
    assert [f["path"] for f in r["files"]][:3] == [f["path"] for f in searched][:3]
    assert r["files"][0]["path"] in ("src/auth/tokens.py", "src/auth/session.py")



def test_the_pack_names_the_ranked_files_its_excerpts_leave_out_within_the_budget(repo):
    """A small pack holds few files: the files the search ranked but no excerpt comes from are named, a line each,
    under the excerpts, and their tokens count in the budget, as everything the model receives does."""
    from localidx.text.tokens import count

    r = pack(repo, "verify token signature secret session billing charge", max_tokens=400, top_k=1)
    excerpted = {m["path"] for m in r["matches"]}
    others = [f["path"] for f in r["files"] if f["path"] not in excerpted]
    assert others, "the budget should leave some ranked file out of the excerpts"
    listed = r["augmentedPrompt"].split("Other files that match, best first (not excerpted):\n", 1)[1].splitlines()
    assert [line.split(" ")[1].rsplit(":", 1)[0] for line in listed] == others[:len(listed)] and listed
    assert count(r["instructions"]) == r["stats"]["promptTokens"] <= 400


# -- query transforms and multi-query -----------------------------------------------------------------------------


def test_a_follow_up_borrows_the_terms_of_the_earlier_turn(repo):
    r = pack(repo, "and who calls it?", conversation_context=["what does constant_time_compare do?"])
    assert "query.compression" in r["appliedModules"]
    assert "constant_time_compare" in r["query"]
    assert r["rawQuery"] == "and who calls it?"
    assert any("constant_time_compare" in m["text"] for m in r["matches"][:2])
    alone = pack(repo, "and who calls it?")
    assert "query.compression" not in alone["appliedModules"]


def test_a_question_in_another_language_runs_as_is_with_a_warning_without_an_llm(repo):
    r = pack(repo, "Wie wird die Signatur des Tokens geprüft und wo ist die Datei?")
    assert "query.translation" not in r["appliedModules"]
    assert any("does not look like English" in w for w in r["warnings"])


def test_with_an_llm_the_question_is_translated_and_the_follow_up_rewritten(repo):
    root, settings, index = repo

    def answer(request):
        system = request["body"]["messages"][0]["content"].lower()
        if "translate" in system:
            return "how is the token signature verified"
        if "standalone" in system:
            return "who calls constant_time_compare"
        return "verify token signature"

    with serve_llm(answer) as url:
        llm_settings = settings.replace(llm_base_url=url, llm_model="stub")
        r = build_for_repository(index, "Wie wird die Signatur des Tokens geprüft und wo ist die Datei?",
                                 settings=llm_settings)
        assert "query.translation" in r["appliedModules"]
        assert r["query"] == "how is the token signature verified"
        r = build_for_repository(index, "and who calls it?", settings=llm_settings,
                                 conversation_context=["what does constant_time_compare do?"])
        assert "query.compression:llm" in r["appliedModules"]
        assert r["query"] == "who calls constant_time_compare"
        assert url.requests


def test_multi_query_runs_identifier_sub_queries_and_labels_what_they_found(repo):
    question = "where does SessionStore.refresh_session replace tokens and how is sign_payload hashed"
    assert "multi-query" not in pack(repo, question)["appliedModules"]  # off in balanced: the eval saw no gain
    r = pack(repo, question, profile="aggressive")
    assert "multi-query" in r["appliedModules"]
    assert any("refresh_session" in q for q in r["subQueries"])
    assert any("sign_payload" in q for q in r["subQueries"])
    assert len(r["subQueries"]) <= 5  # aggressive: queries = 6, the question included
    labelled = [m for m in r["matches"] if m.get("generatedBySubQuery")]
    assert all(m["generatedBySubQuery"] in r["subQueries"] for m in labelled)
    ids = [m["id"] for m in r["matches"]]
    assert len(ids) == len(set(ids))


def test_multi_query_deduplicates_identical_chunks_by_content_hash(own_repo):
    copy = dict(FILES)
    copy["src/auth/tokens_copy.py"] = TOKENS
    root, settings = own_repo(copy)
    r = configured_pack(root, settings, None, "constant_time_compare digests", profile="aggressive")
    hashes = [m["content_hash"] for m in r["matches"] if not m.get("auto_merged")]
    assert len(hashes) == len(set(hashes))
    texts = [m["text"] for m in r["matches"] if "def constant_time_compare" in m["text"]]
    assert len(texts) == 1


# -- rerank ------------------------------------------------------------------------------------------------------


def test_rerank_puts_tests_and_vendored_code_behind_the_source(repo):
    r = pack(repo, "verify_token checks the token signature with the secret")
    paths = [m["path"] for m in r["matches"]]
    assert paths[0] == "src/auth/tokens.py"
    by_path = {m["path"]: m for m in r["matches"]}
    # Both define or call verify_token, so both are found; each sinks behind the source, saying why.
    assert "test code x0.5" in by_path["tests/test_tokens.py"]["reasons"]
    assert "path penalty x0.5" in by_path["vendor/jwt/verify.py"]["reasons"]
    assert paths.index("vendor/jwt/verify.py") > paths.index("src/auth/tokens.py")
    assert paths.index("tests/test_tokens.py") > paths.index("src/auth/tokens.py")


def test_a_question_about_tests_does_not_down_weight_them(repo):
    r = pack(repo, "which tests cover verify_token with an expired token")
    assert r["matches"][0]["path"] == "tests/test_tokens.py"
    test_matches = [m for m in r["matches"] if m["path"] == "tests/test_tokens.py"]
    # No test-code factor at all, whatever the profile sets it to.
    assert not any(reason.startswith("test code x") for m in test_matches for reason in m.get("reasons", []))


def test_rerank_names_the_language_the_question_asks_for(repo):
    r = pack(repo, "how is an invoice charged in the Go code")
    go = [m for m in r["matches"] if m["language"] == "go"]
    assert go and any("language go +0.05" in m["reasons"] for m in go)
    assert r["matches"][0]["language"] == "go"


def test_diversity_cap_moves_extra_matches_of_one_file_behind_the_head(own_repo):
    root, settings = own_repo()
    toml = '[profiles.capped.postprocess]\nmaxPerFile = 1\nneighborStrategy = "OFF"\nautoMerge = false\n'
    r = configured_pack(root, settings, toml, "session token user", profile="capped")
    capped = [m for m in r["matches"] if "diversity cap: moved behind the head" in m.get("reasons", [])]
    assert capped
    first_capped = r["matches"].index(capped[0])
    head_paths = [m["path"] for m in r["matches"][:first_capped]]
    assert len(head_paths) == len(set(head_paths))


# -- neighbour expansion -------------------------------------------------------------------------------------------


def _strategy_pack(root, settings, strategy: str, question: str) -> dict:
    return configured_pack(root, settings, f'[profiles.x.retrieval]\nmultiQuery = false\ntopK = 1\n\n'
                           f'[profiles.x.postprocess]\nneighborStrategy = "{strategy}"\nneighborHits = 1\n'
                           f'neighborLimit = 4\nautoMerge = false\n', question, profile="x")


def test_linear_adds_the_adjacent_chunks_of_the_hit(own_repo):
    root, settings = own_repo()
    r = _strategy_pack(root, settings, "LINEAR", "sign_payload hex SHA-256 digest over payload and secret")
    hit, *added = r["matches"]
    assert hit["symbol"] == "sign_payload"
    assert {m["symbol"] for m in added} == {"verify_token", "constant_time_compare"}
    assert all(m["neighborOfSpanHash"] == hit["span_hash"] and m["neighborStrategy"] == "LINEAR" for m in added)
    assert "neighbors:LINEAR" in r["appliedModules"]


def test_parent_symbol_adds_the_class_skeleton_and_sibling_methods(own_repo):
    root, settings = own_repo()
    r = _strategy_pack(root, settings, "PARENT_SYMBOL", "close_session remember that it was closed")
    hit, *added = r["matches"]
    assert hit["symbol"] == "SessionStore.close_session"
    symbols = [m["symbol"] for m in added]
    assert symbols[0] == "SessionStore"  # the enclosing class first
    assert {"SessionStore.open_session", "SessionStore.refresh_session"} <= set(symbols)
    assert all(m["neighborOfSpanHash"] == hit["span_hash"] for m in added)


def test_call_graph_adds_callees_and_callers_across_files(own_repo):
    root, settings = own_repo()
    r = _strategy_pack(root, settings, "CALL_GRAPH", "verify_token expired tokens shared secret")
    hit, *added = r["matches"]
    assert hit["symbol"] == "verify_token" and hit["path"] == "src/auth/tokens.py"
    symbols = {m["symbol"] for m in added}
    assert {"sign_payload", "constant_time_compare"} <= symbols  # callees, same file
    assert "SessionStore.open_session" in symbols  # a caller through the import
    assert "sign_payload" in hit["uses"] and "open_session" in hit["used_by"]


def _long_reload() -> str:
    steps = "".join(f"    server.step_{n} = config.get('step_{n}', {n}) + len(server.name) * {n}\n" for n in range(120))
    return ('''"""A server that restarts its watcher."""


def start_watcher(server):
    """Start the file watcher of a server."""
    server.watching = True
    return server


def reload_configuration(server, config):
    """Reload the configuration: stop, then start the watcher again."""
    start_watcher(server)
''' + steps + "    start_watcher(server)\n    return server\n")


def test_uses_and_used_by_name_each_place_once(own_repo):
    """A long function is split into parts; a match that merges them lists each callee once, not once per part."""
    root, settings = own_repo({"src/server.py": _long_reload()}, name="watcher")
    r = configured_pack(root, settings, '[profiles.x.retrieval]\nmultiQuery = false\ntopK = 8\n\n'
                        '[profiles.x.postprocess]\nneighborStrategy = "OFF"\nautoMerge = true\n',
                        "reload the configuration server step config start the watcher", profile="x")
    hits = [m for m in r["matches"] if "reload_configuration" in (m["symbols"] or [m["symbol"]])]
    assert hits and any(len(m.get("merged_chunk_ids") or []) > 1 for m in hits), r["matches"]
    for hit in hits:
        lines = hit["uses"].splitlines()
        assert len(lines) == len(set(lines)), hit["uses"]


def test_off_adds_nothing(own_repo):
    root, settings = own_repo()
    r = _strategy_pack(root, settings, "OFF", "sign_payload hex digest")
    assert len(r["matches"]) == 1
    assert not any(m.startswith("neighbors:") for m in r["appliedModules"])


# -- auto-merge and budget (pure) -----------------------------------------------------------------------------------


def _m(id_, start, end, text=None, path="a.py", score=1.0, kind="function"):
    return {"id": id_, "path": path, "start_line": start, "end_line": end, "kind": kind, "score": score,
            "symbol": id_, "text": text if text is not None else "\n".join(f"line {n}" for n in range(start, end + 1))}


def test_auto_merge_joins_adjacent_chunks_in_rank_order_with_metadata():
    matches = [_m("b", 5, 8, score=0.9), _m("x", 1, 3, path="other.py", score=0.8), _m("a", 1, 3, score=0.7),
               _m("c", 10, 12, score=0.6), _m("far", 40, 42, score=0.5)]
    out, stats = auto_merge(matches, budget=1200)
    assert [m["id"] for m in out] == ["b", "x", "far"]  # the window takes its seed's place
    window = out[0]
    assert window["auto_merged"] is True and window["merged_chunk_ids"] == ["a", "b", "c"]
    assert window["merged_chunk_count"] == 3 and window["chunk_span"] == {"start": 1, "end": 12}
    assert window["text"].splitlines()[0] == "line 1" and window["text"].splitlines()[-1] == "line 12"
    assert window["text"].splitlines()[4] == "line 5" and window["content_length"] == len(window["text"])
    assert stats["windowsBefore"] == 5 and stats["windowsAfter"] == 3
    assert "auto_merged" not in out[2]  # not adjacent to anything


def test_auto_merge_respects_the_window_budget_and_never_repeats_a_chunk():
    big = "\n".join(["word " * 60] * 3)
    matches = [_m("a", 1, 3, big), _m("b", 4, 6, big), _m("c", 7, 9, big)]
    out, _stats = auto_merge(matches, budget=400)
    ids = [i for m in out for i in m.get("merged_chunk_ids", [m["id"]])]
    assert sorted(ids) == ["a", "b", "c"]
    assert all(m.get("merged_chunk_count", 1) <= 2 for m in out)


def test_auto_merge_edge_cases():
    assert auto_merge([], 1200)[0] == []
    nested = [_m("class", 1, 30, kind="class"), _m("method", 5, 9, kind="method")]
    assert [m["id"] for m in auto_merge(nested, 1200)[0]] == ["class", "method"]
    bare = [{"id": "p", "path": "a.py", "score": 1.0, "text": "x"}, {"id": "q", "path": "a.py", "score": 0.5,
                                                                    "text": "y"}]
    assert [m["id"] for m in auto_merge(bare, 1200)[0]] == ["p", "q"]  # no line metadata: left alone
    overlapping = [_m("p1", 1, 10), _m("p2", 6, 15)]  # split parts with 5 overlap lines
    merged = auto_merge(overlapping, 1200)[0]
    assert len(merged) == 1 and merged[0]["text"].count("line 6\n") == 1


def _measure(matches, shown):
    """A pack's size as the renderer counts it, simplified: 10 tokens of frame, 5 per excerpt, its text's and
    relations' cl100k tokens, 2 per file line."""
    from localidx.text.tokens import count

    return 10 + sum(5 + count(m["text"]) + count(m.get("uses") or "") for m in matches) + 2 * shown


def test_the_budget_takes_hits_in_rank_order_then_files_then_relations_then_neighbours():
    hits = [_m("h1", 1, 20), _m("h2", 30, 59), _m("h3", 70, 74)]  # 84, 124 and 24 tokens with their frames
    hits[0]["uses"] = "- a\n- b"  # 5 tokens
    hits[0]["span_hash"] = "s1"
    neighbour = dict(_m("n1", 21, 28), neighborOfSpanHash="s1", neighborStrategy="LINEAR")  # 36
    # 10 + 84 + 124 + 24 = 242: all hits; then 3 file lines (6), h1's uses (5); the neighbour (36) not.
    kept, shown, stats = fit_pack(hits, [neighbour], 3, _measure, 255)
    assert [m["id"] for m in kept] == ["h1", "h2", "h3"] and shown == 3 and kept[0]["uses"] == "- a\n- b"
    assert stats == {"promptTokens": 253, "dropped": 1, "truncated": False}
    # Room for more: the neighbour comes right after its hit.
    kept, shown, stats = fit_pack(hits, [neighbour], 3, _measure, 400)
    assert [m["id"] for m in kept] == ["h1", "n1", "h2", "h3"] and stats["promptTokens"] == 289
    # A hit that does not fit is skipped; a smaller later one still comes in, before any file line.
    kept, shown, stats = fit_pack(hits, [neighbour], 3, _measure, 130)
    assert [m["id"] for m in kept] == ["h1", "h3"] and shown == 3 and stats["promptTokens"] == 129


def test_the_budget_cuts_the_best_hit_to_whole_lines_or_refuses():
    from localidx.text.tokens import count

    kept, _shown, stats = fit_pack([_m("l", 10, 400)], [], 0, _measure, 100)
    cut = kept[0]
    assert len(kept) == 1 and cut["truncated"] is True and stats["truncated"] is True and cut["cut_from"] == 400
    assert cut["text"].splitlines()[-1] == f"line {cut['end_line']}" and 10 < cut["end_line"] < 400
    assert stats["promptTokens"] <= 100 < 15 + count(cut["text"] + f"\nline {cut['end_line'] + 1}")
    with pytest.raises(UsageError, match="cannot hold the instructions, the question and one line"):
        fit_pack([_m("l", 10, 400)], [], 0, _measure, 15)
    assert fit_pack([], [], 0, _measure, 256) == ([], 0, {"promptTokens": 10, "dropped": 0, "truncated": False})


def test_a_single_chunk_over_the_budget_is_cut_and_said(own_repo):
    body = "\n".join(f"    total += compute_step({n}) * weight_{n}" for n in range(300))
    source = f"def enormous_accumulator(weights):\n    total = 0\n{body}\n    return total\n"
    root, settings = own_repo({"big.py": source})
    r = configured_pack(root, settings, None, "enormous_accumulator", max_tokens=256)
    assert len(r["matches"]) >= 1 and r["matches"][0]["truncated"] is True
    assert any("over the token budget of 256" in w for w in r["warnings"])
    assert r["stats"]["promptTokens"] <= 256
    end = r["matches"][0]["end_line"]
    assert (f"(excerpt cut after line {end} to fit the token budget; it runs to line {r['matches'][0]['cut_from']})"
            in r["augmentedPrompt"]) and r["matches"][0]["cut_from"] > end


def test_auto_merge_in_the_pipeline_reports_windows(own_repo):
    root, settings = own_repo()
    toml = ('[profiles.m.retrieval]\nmultiQuery = false\n\n[profiles.m.postprocess]\n'
            'neighborStrategy = "LINEAR"\nneighborHits = 2\nneighborLimit = 4\n')
    r = configured_pack(root, settings, toml, "sign_payload digest", profile="m")
    merged = [m for m in r["matches"] if m.get("auto_merged")]
    assert merged and r["stats"]["windowsAfter"] < r["stats"]["windowsBefore"]
    window = merged[0]
    assert window["chunk_span"]["start"] == window["start_line"] and window["merged_chunk_count"] >= 2
    assert f"{window['path']}:{window['start_line']}-{window['end_line']}" in r["augmentedPrompt"]


# -- no results, templates ----------------------------------------------------------------------------------------


def test_nothing_found_and_nothing_indexed_are_answers_not_errors(repo, tmp_path):
    r = pack(repo, "verify token", path_glob="does/not/exist/**")
    assert r["noResults"] is True and r["noResultsReason"] == "CONTEXT_NOT_FOUND" and r["contextMissing"] is True
    assert r["matches"] == [] and "nothing in auth matched" in r["augmentedPrompt"]
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "empty-home")})
    index = open_index(root, True, settings, read_only=True)
    try:
        r = build_for_repository(index, "verify token", settings=settings)
    finally:
        index.close()
    assert r["noResults"] is True and r["noResultsReason"] == "INDEX_NOT_READY"


def test_context_missing_names_identifiers_nothing_contains(repo):
    r = pack(repo, "where is RateLimiter.acquire_slot used with verify_token")
    assert r["contextMissing"] is True and r["missingTerms"] == ["RateLimiter.acquire_slot"]


def test_a_custom_template_fills_placeholders_and_removes_unknown_ones(own_repo):
    """(A template path in a repository's file is read once the user trusts the file.)"""
    from localidx.config import trust_repository

    root, settings = own_repo()
    (root / "prompt.md").write_text("Repo {{repoName}} ({{locale}}): {{rawQuery}}\n{{augmentedPrompt}}\n{{mood}}!")
    with_profile(root, '[profiles.balanced.generation]\ntemplate = "prompt.md"\n')
    untrusted = configured_pack(root, settings, None, "verify token", locale="de-DE")
    assert not untrusted["instructions"].startswith("Repo own")
    trust_repository(root)
    r = configured_pack(root, settings, None, "verify token", locale="de-DE")
    assert r["instructions"].startswith("Repo own (de-DE): verify token\nQuestion: verify token")
    assert r["instructions"].endswith("\n!")
    assert "instructions template: unknown placeholder {{mood}} removed" in r["warnings"]


# -- entry points: CLI, socket, all repositories ------------------------------------------------------------------


def _cli(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LOCALIDX_WATCH", "0")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    for name in ("LOCALIDX_LLM_BASE_URL", "LOCALIDX_LLM_MODEL", "LOCALIDX_SOCK"):
        monkeypatch.delenv(name, raising=False)


def test_cli_context_prints_the_augmented_prompt_and_json(make_repo, cli_env):
    root = make_repo(FILES)
    assert _cli(root, "index", "-q").returncode == 0
    plain = _cli(root, "context", "how is the token signature verified", "--top-k", "99")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("Question: how is the token signature verified")
    assert "src/auth/tokens.py:" in plain.stdout
    assert "warning: guard: topK 99 clamped to 40" in plain.stderr
    data = json.loads(_cli(root, "context", "how is the token signature verified", "--json").stdout)
    assert set(RESPONSE_KEYS) <= set(data) and data["matches"][0]["path"] == "src/auth/tokens.py"
    bad = _cli(root, "context", "verify", "--profile", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("localidx: error: unknown profile 'nope'")
    assert "Traceback" not in bad.stderr


def test_cli_context_in_an_unindexed_repository_says_so(make_repo, cli_env):
    root = make_repo(FILES)
    r = _cli(root, "context", "verify token")
    assert r.returncode == 2 and "run `localidx index`" in r.stderr and "Traceback" not in r.stderr


def test_ask_without_an_llm_prints_the_pack_and_how_to_configure_one(make_repo, cli_env):
    root = make_repo(FILES)
    _cli(root, "index", "-q")
    r = _cli(root, "ask", "how is the token signature verified")
    assert r.returncode == 0
    assert "Question: how is the token signature verified" in r.stdout
    assert "no LLM is configured" in r.stderr and "llm" in r.stderr.lower()


def test_ask_sends_the_pack_to_the_configured_llm_and_cites_sources(make_repo, cli_env):
    root = make_repo(FILES)
    _cli(root, "index", "-q")
    with serve_llm(lambda request: "verify_token compares digests [1].") as url:
        r = _cli(root, "ask", "how is the token signature verified",
                 env={"LOCALIDX_LLM_BASE_URL": url, "LOCALIDX_LLM_MODEL": "stub"})
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("verify_token compares digests [1].")
        assert "Sources:" in r.stdout and "src/auth/tokens.py:" in r.stdout
        sent = user_message(url.requests[-1])
        assert "Question: how is the token signature verified" in sent and "src/auth/tokens.py:" in sent


def test_the_socket_serves_the_same_pack_as_the_cli(make_repo, cli_env):
    root = make_repo(FILES)
    assert _cli(root, "index", "-q").returncode == 0
    in_process = json.loads(_cli(root, "context", "verify token signature", "--json").stdout)
    assert _cli(root, "daemon", "start").returncode == 0
    try:
        from localidx.interface.client import connect

        settings = load_settings(root)
        with connect(root, True, settings) as client:
            over_socket = client.request("context/build", {"query": "verify token signature"})
            with pytest.raises(UsageError, match="unknown profile"):
                client.request("context/build", {"query": "verify", "profile": "nope"})
        via_cli = json.loads(_cli(root, "context", "verify token signature", "--json").stdout)
    finally:
        _cli(root, "daemon", "stop")
    for other in (over_socket, via_cli):
        assert set(other) == set(in_process)
        assert [m["id"] for m in other["matches"]] == [m["id"] for m in in_process["matches"]]
        assert other["augmentedPrompt"] == in_process["augmentedPrompt"]


def test_all_repos_searches_every_registered_repository_and_labels_matches(make_repo, cli_env):
    first = make_repo(FILES, name="auth-service")
    second = make_repo({"ledger/post.py": "def post_ledger_entry(entry, journal):\n"
                                          "    \"\"\"Post a ledger entry to the journal.\"\"\"\n"
                                          "    journal.append(entry)\n    return len(journal)\n"},
                       name="ledger")
    for root in (first, second):
        assert _cli(root, "index", "-q").returncode == 0
        assert _cli(root, "repos", "share", ".").returncode == 0  # --all-repos reads shared repositories only
    data = json.loads(_cli(first, "search", "post ledger entry journal", "--all-repos", "--json").stdout)
    assert data["matches"][0]["repo"] == "ledger" and data["matches"][0]["path"] == "ledger/post.py"
    assert {m["repo"] for m in data["matches"]} <= {"auth-service", "ledger"}
    pack_ = json.loads(_cli(second, "context", "verify token signature", "--all-repos", "--json").stdout)
    assert pack_["matches"][0]["repo"] == "auth-service"
    assert "auth-service:src/auth/tokens.py:" in pack_["augmentedPrompt"]


# -- the budget as a user counts it -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def code_repo(tmp_path_factory):
    """localidx's own retrieval modules as a repository, indexed with the shipped static model (whose similarity
    floor tells nonsense from a question), through the real CLI without a daemon."""
    import shutil

    base = tmp_path_factory.mktemp("budget")
    root = base / "code"
    shutil.copytree(Path(__file__).resolve().parent.parent / "localidx" / "retrieve", root / "retrieve",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    env = {"LOCALIDX_EMBED_MODEL": "static-minilm", "LOCALIDX_HOME": str(base / "home"), "LOCALIDX_WATCH": "0",
           "LOCALIDX_REGISTRY": str(base / "registry.json"), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    proc = _cli(root, "index", "-q", "--no-daemon", env=env)
    assert proc.returncode == 0, proc.stderr
    return root, env


@pytest.mark.parametrize("budget", [500, 1000, 3000, 16000])
def test_the_printed_pack_is_within_max_tokens_counted_as_a_model_counts(code_repo, budget):
    # Before: 800 printed 1,475 tokens, 2,000 printed 3,561 (the stats said 1,946: the excerpts alone), 8,000 was
    # lowered to 4,000, and every budget under 1,600 warned that auto-merge was skipped.
    from localidx.text.tokens import count

    root, env = code_repo
    question = "how is the context pack cut to the token budget"
    proc = _cli(root, "context", question, "--max-tokens", str(budget), "--no-daemon", env=env)
    assert proc.returncode == 0, proc.stderr
    assert count(proc.stdout) <= budget and proc.stderr == ""
    data = json.loads(_cli(root, "context", question, "--max-tokens", str(budget), "--no-daemon", "--json",
                           env=env).stdout)
    assert count(data["instructions"]) == data["stats"]["promptTokens"] <= budget
    assert data["stats"]["budget"] == budget and data["matches"][0]["path"].startswith("retrieve/")
    assert count(data["augmentedPrompt"] + "\n") <= budget
    if budget == 3000:
        assert count(proc.stdout) > budget * 0.8  # filled: the best hits, then their context


def test_nonsense_gives_no_pack_and_exit_1_as_search_does(code_repo):
    # Before: `context nonsensequxzz` printed 12 matches and exited 0 where `search` said "no matches".
    root, env = code_repo
    search = _cli(root, "search", "nonsensequxzz", "--no-daemon", env=env)
    assert search.returncode == 1 and "no matches" in search.stderr
    proc = _cli(root, "context", "nonsensequxzz", "--no-daemon", env=env)
    assert proc.returncode == 1 and "no matches for this question" in proc.stderr
    proc = _cli(root, "context", "nonsensequxzz", "--no-daemon", "--json", env=env)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["noResults"] is True and data["matches"] == []
    assert data["noResultsReason"] == "CONTEXT_NOT_FOUND"


def test_a_budget_too_small_for_any_pack_is_one_line_and_exit_2(code_repo):
    root, env = code_repo
    proc = _cli(root, "context", "token budget", "--max-tokens", "50", "--no-daemon", env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "localidx: error: a token budget of 50 is too small: a context pack needs at least 200 tokens (the "
        "instructions, the question and some code)"]


def test_a_split_function_never_joins_a_window_of_other_code():
    # Before: `class ClientSession` came in a window that started 234 lines into the function above it, whose last
    # part touched the class's first line.
    tail = dict(_m("run_part3", 100, 340), title="function run (part 3/3)", symbol="run")
    cls = dict(_m("ClientSession", 341, 360, kind="class"), title="class ClientSession", symbol="ClientSession")
    assert [m["id"] for m in auto_merge([cls, tail], 4000)[0]] == ["ClientSession", "run_part3"]
    parts = [dict(_m("p2", 50, 99), title="function run (part 2/3)", symbol="run"), tail]
    merged = auto_merge(parts, 4000)[0]
    assert len(merged) == 1 and merged[0]["merged_chunk_ids"] == ["p2", "run_part3"]  # one function's parts join
    whole = [dict(_m("f", 1, 10)), dict(_m("g", 12, 20))]
    assert len(auto_merge(whole, 4000)[0]) == 1  # whole functions a blank line apart still do
