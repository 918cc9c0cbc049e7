"""The [META] header and tags a user's search depends on (``localidx.chunk.enrich``)."""

from __future__ import annotations

import pytest

from localidx.chunk import enrich
from localidx.text import tokens
from localidx.records import Chunk, Endpoint, FileContext


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("verifyToken", ["verify", "token"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("verify_token", ["verify", "token"]),
        ("VERIFY_TOKEN", ["verify", "token"]),
        ("parse2D", ["parse", "2d"]),
        ("base64Encode", ["base64", "encode"]),
        ("getHTTPResponse", ["get", "http", "response"]),
        ("IOError", ["io", "error"]),
        ("parseURLs", ["parse", "urls"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        ("__init__", ["init"]),
        ("x", ["x"]),
    ],
)
def test_split_identifier(name: str, words: list[str]):
    assert enrich.split_identifier(name) == words


def test_identifier_words_are_distinct_in_order_without_keywords():
    text = "def verify_token(self, token):\n    return self.verifyToken(token) and not expired_token(token)\n"
    assert enrich.identifier_words(text) == ["verify", "token", "expired"]
    assert enrich.identifier_words(text, limit=2) == ["verify", "token"]


REVOKE_TEXT = '''    @app.route("/auth/verify", methods=["POST"])
    def revoke(self, token: str) -> None:
        """Put a token on the revocation list."""
        self.sessions.revoke(token)
'''


def _revoke_chunk(**changes) -> Chunk:
    fields = dict(
        path="app/auth/handler.py",
        language="python",
        kind="method",
        start_line=40,
        end_line=43,
        text=REVOKE_TEXT,
        symbol="AuthHandler.revoke",
        name="revoke",
        parent="AuthHandler",
        signature="def revoke(self, token: str) -> None",
        doc="Put a token on the revocation list.\nRevoked tokens fail verification until they expire.",
        decorators=['@app.route("/auth/verify", methods=["POST"])'],
        tags={"parent_kind": "class", "http_method": "POST", "http_path": "/auth/verify"},
    )
    fields.update(changes)
    return Chunk(**fields)


def _ctx(path: str = "app/auth/handler.py", **changes) -> FileContext:
    return FileContext(path=path, language="python", **changes)


def test_header_has_the_documented_lines():
    header = enrich.header(_revoke_chunk(), _ctx(), text_tokens=1000)
    assert header.splitlines() == [
        "[META] File: app/auth/handler.py",
        "[META] Language: python",
        "[META] Role: Authentication, API",
        "[META] Endpoint: POST /auth/verify",
        "[META] Symbol: Method revoke (in class AuthHandler)",
        "[META] Signature: def revoke(self, token: str) -> None",
        "[META] Doc: Put a token on the revocation list.",
        "[META] Contains: authentication, session",
    ]


def test_search_text_is_header_then_text():
    chunk, ctx = _revoke_chunk(), _ctx()
    assert enrich.search_text(chunk, ctx, 1000) == enrich.header(chunk, ctx, 1000) + "\n" + REVOKE_TEXT


def test_multi_word_names_get_their_words_and_merged_chunks_list_symbols():
    chunk = _revoke_chunk(name="verifyToken", symbol="AuthHandler.verifyToken", tags={})
    assert "[META] Symbol: Method verifyToken [verify token] (in AuthHandler)" in enrich.header(chunk, _ctx(), 1000)
    merged = _revoke_chunk(kind="function", symbols=["is_bearer", "digest", "parse_token"], parent="", tags={})
    assert "[META] Symbols: is_bearer, digest, parse_token" in enrich.header(merged, _ctx(), 1000)


def test_docs_chunks_are_labelled_by_section():
    chunk = Chunk(path="docs/install.md", language="markdown", kind="content", start_line=5, end_line=9,
                  text="Run pip install localidx.", title="Linux", parent="Install > Linux")
    header = enrich.header(chunk, FileContext(path="docs/install.md", language="markdown"), 1000)
    assert "[META] Section: Install > Linux" in header
    assert "[META] Role: Documentation" in header


def test_roles_come_from_imports_and_decorators_not_imported_names():
    assert enrich.roles("svc/users.py", ["from fastapi import APIRouter"], [], "") == ["API"]
    assert enrich.roles("svc/store.py", ["from sqlalchemy.orm import Session"], [], "") == ["Database"]
    assert enrich.roles("svc/ids.py", ["import pytest"], [], "") == ["Test"]
    assert enrich.roles("svc/flags.py", ["from enum import Flag"], [], "") == []
    assert enrich.roles("Web/Orders.cs", [], ['[HttpGet("orders/{id}")]'], "") == ["API"]
    assert enrich.roles("src/main.go", ['import "net/http"'], [], "") == ["API"]


def test_contains_needs_one_strong_or_two_weak_words():
    assert enrich.contains("cache.get(key)", [], "") == ["caching"]
    assert enrich.contains("print(user)", [], "") == []
    assert enrich.contains("user.token", [], "") == ["authentication"]
    assert enrich.contains("x = 1", ["import json"], "load") == ["serialization"]


def test_header_stays_under_a_fifth_of_a_300_token_chunk():
    body = "\n".join(f"    total_{i} = ledger.balance(account_{i}) + pending_{i}" for i in range(18))
    text = f"def reconcile_accounts(ledger, accounts):\n{body}\n    return total_0\n"
    text_tokens = tokens.count(text)
    assert 250 <= text_tokens <= 400
    long_doc = ("Reconcile every account in the ledger against the pending transfers and the settlement feed, "
                "flagging mismatches for review by the finance team before the nightly close. ") * 4
    chunk = Chunk(path="services/billing/reconciliation/ledger_reconciliation_service.py", language="python",
                  kind="function", start_line=1, end_line=21, text=text, symbol="reconcile_accounts",
                  name="reconcile_accounts", signature="def reconcile_accounts(ledger: Ledger, accounts: list["
                  "Account], *, strict: bool = True, tolerance: Decimal = Decimal('0.01')) -> ReconciliationReport",
                  doc=long_doc)
    ctx = _ctx(chunk.path, imports=["import json", "import logging", "from decimal import Decimal"])
    header = enrich.header(chunk, ctx, text_tokens)
    header_tokens = tokens.count(header)
    assert header_tokens / (header_tokens + text_tokens) < 0.20
    assert header.startswith("[META] File: services/billing/reconciliation/ledger_reconciliation_service.py")
    assert "Symbol: Function reconcile_accounts [reconcile accounts]" in header
    assert long_doc.strip() not in header  # something had to give


def test_tiny_chunk_keeps_the_file_and_symbol_line_as_a_floor():
    chunk = _revoke_chunk(text="pass", tags={"parent_kind": "class"})
    header = enrich.header(chunk, _ctx(), text_tokens=1)
    assert header == "[META] File: app/auth/handler.py | Symbol: Method revoke (in class AuthHandler)"
    endpoint = enrich.header(_revoke_chunk(text="pass"), _ctx(), text_tokens=1)
    assert endpoint == ("[META] File: app/auth/handler.py | Endpoint: POST /auth/verify"
                        " | Symbol: Method revoke (in class AuthHandler)")


def test_tags_for_a_test_file_and_an_async_function():
    test_chunk = Chunk(path="tests/test_auth.py", language="python", kind="function", start_line=1, end_line=3,
                       text="def test_revoke():\n    assert revoke('x') is None\n", name="test_revoke",
                       symbol="test_revoke")
    tags = enrich.tags(test_chunk, _ctx("tests/test_auth.py"))
    assert tags["is_test"] is True and tags["has_async"] is False and tags["is_api_endpoint"] is False
    assert tags["priority"] == 0
    for path in ("pkg/auth_test.go", "web/src/cart.spec.ts", "src/test/java/ShopTest.java", "spec/cart_spec.rb"):
        assert enrich.tags(Chunk(path=path, language="x", kind="function", start_line=1, end_line=1, text=""),
                           _ctx(path))["is_test"] is True

    async_chunk = Chunk(path="app/jobs.py", language="python", kind="function", start_line=1, end_line=2,
                        text="async def refresh(cache):\n    await cache.reload()\n", name="refresh", symbol="refresh")
    tags = enrich.tags(async_chunk, _ctx("app/jobs.py"))
    assert tags["has_async"] is True and tags["is_test"] is False


def test_tags_keep_the_chunkers_endpoint_and_rank_endpoints_and_classes():
    tags = enrich.tags(_revoke_chunk(kind="function", parent=""), _ctx())
    assert (tags["http_method"], tags["http_path"], tags["is_api_endpoint"]) == ("POST", "/auth/verify", True)
    assert tags["priority"] == 10
    struct = Chunk(path="ledger.rs", language="rust", kind="struct", start_line=1, end_line=3, text="struct L {}",
                   name="describe")
    assert enrich.tags(struct, _ctx("ledger.rs"))["priority"] == 5
    assert enrich.tags(struct, _ctx("ledger.rs"))["is_test"] is False


def test_summary_chunks_list_the_files_endpoints():
    chunk = Chunk(path="app/routes/users.py", language="python", kind="summary", start_line=1, end_line=40,
                  text="Functions: get_user, create_user", doc="User routes.")
    ctx = _ctx(chunk.path, endpoints=[Endpoint("GET", "/users/{id}", "get_user"), Endpoint("POST", "/users")])
    header = enrich.header(chunk, ctx, 1000)
    assert "[META] Endpoints: GET /users/{id}, POST /users" in header
    assert "[META] Symbol: file summary" in header


def test_same_input_gives_the_same_header():
    first = enrich.header(_revoke_chunk(), _ctx(), 1000)
    enrich.keyword_tables.cache_clear()  # a fresh process reading the keyword table again
    assert enrich.header(_revoke_chunk(), _ctx(), 1000) == first
    assert enrich.header(_revoke_chunk(), _ctx(), 40) == enrich.header(_revoke_chunk(), _ctx(), 40)
