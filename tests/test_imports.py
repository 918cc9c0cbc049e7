"""Import statements are read once (``localidx.imports``), so [META] and the call relations agree on what a file
imports: a relative Python import, Go's raw-string imports and its ``package`` clause, JavaScript's back quotes.

Before, [META]'s Role read ``from ..jwt import unseal`` as the PyJWT library while the relations resolved it to the
repository's own ``app/jwt.py``; [META] read ``package jwt`` as an import and back-quoted names as none."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from localidx.chunk import enrich
from localidx.config import load_settings
from localidx.imports import Module, imported_modules
from localidx.index.indexer import run_index
from localidx.store.index import open_index
from localidx.store.relations import Relations, import_keys

# A body long enough that the [META] header keeps its Role line (a header stays under 20% of the chunk).
PY_BODY = '''
    """Turn a signed value into its fields, refusing one whose signature or expiry does not hold."""
    fields = unseal(value)
    if fields is None:
        raise ValueError("the value does not decode")
    if fields.get("exp", 0) < now:
        raise ValueError("the value has expired")
    subject = fields.get("sub", "").strip()
    if not subject:
        raise ValueError("the value names no subject")
    scopes = sorted({scope.strip().lower() for scope in fields.get("scopes", []) if scope.strip()})
    if "admin" in scopes and len(scopes) > 1:
        scopes = ["admin"]
    return {"subject": subject, "scopes": scopes, "expires": fields["exp"], "issued": fields.get("iat", now)}
'''

UNSEAL = '''def unseal(value):
    """Split a signed value into its fields; None when its signature does not hold."""
    head, _, body = value.partition(".")
    return {"sub": head, "exp": len(body), "scopes": body.split(",")} if head else None
'''

SAVE_GO = '''package store

// Save writes one order to the store and says whether it was new.
func Save(order string) (bool, error) {
	if order == "" {
		return false, nil
	}
	return true, nil
}
'''

CHECKOUT_GO = '''package main

import (
	`example.com/shop/store`
	"fmt"

	`github.com/golang-jwt/jwt/v5`
)

// checkout saves an order and signs a receipt that names it, for the customer to keep.
func checkout(order string, now int64) (string, error) {
	if _, err := store.Save(order); err != nil {
		return "", err
	}
	if len(order) > 64 {
		return "", fmt.Errorf("order %q is longer than 64 characters", order)
	}
	claims := jwt.MapClaims{"order": order, "at": now, "until": now + 30*24*3600}
	receipt := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	signed, err := receipt.SignedString([]byte(order))
	if err != nil {
		return "", fmt.Errorf("signing the receipt of order %q: %w", order, err)
	}
	return signed, nil
}
'''


@pytest.fixture
def repo(make_repo):
    return make_repo({
        "app/api/views.py": f"from ..jwt import unseal\n\n\ndef read_fields(value, now):{PY_BODY}",
        "app/api/claims.py": f"from jwt import unseal\n\n\ndef read_claims(value, now):{PY_BODY}",
        "app/jwt.py": UNSEAL,
        "vendor/jwt.py": UNSEAL,
        "shop/store/save.go": SAVE_GO,
        "legacy/store/save.go": SAVE_GO,
        "cmd/checkout/main.go": CHECKOUT_GO,
    })


@contextlib.contextmanager
def indexed(root: Path):
    settings = load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index")})
    run_index(root, True, settings)
    idx = open_index(root, True, settings, read_only=True)
    try:
        rows = idx.store.snapshot().search().select(["id", "path", "symbol", "chunk_index", "search_text"])
        yield Relations(idx.catalog), {(r["path"], r["symbol"]): r for r in rows.limit(None).to_arrow().to_pylist()
                                       if r["chunk_index"] == 0}
    finally:
        idx.close()


def role(row: dict) -> list[str]:
    [line] = [line for line in row["search_text"].splitlines() if line.startswith("[META] Role: ")]
    return line.removeprefix("[META] Role: ").split(", ")


def test_the_three_shapes_they_disagreed_on_are_read_one_way():
    assert imported_modules("from ..pkg import x, y as z") == (Module(parts=("pkg",), up=1, names=("x", "y")),)
    assert imported_modules("from . import views") == (Module(parts=(), up=0, names=("views",)),)
    assert imported_modules('import (\n\t`github.com/golang-jwt/jwt/v5`\n\t"net/http"\n)') == (
        Module(parts=("github.com", "golang-jwt", "jwt", "v5"), path=True),
        Module(parts=("net", "http"), path=True),
    )
    assert imported_modules("package jwt") == ()
    assert imported_modules("const jwt = require(`jsonwebtoken`);") == (Module(parts=("jsonwebtoken",), path=True),)
    assert imported_modules("const messages = require(`./locales/${lang}`);") == ()
    assert imported_modules('import x from "../../lib/x.js"') == (Module(parts=("lib", "x.js"), up=2, path=True),)


def test_a_relative_python_import_is_the_repositorys_module_for_both(repo):
    with indexed(repo) as (rel, rows):
        views = rows[("app/api/views.py", "read_fields")]
        [unseal] = [e for e in rel.callees(views["id"]) if e.name == "unseal"]
        assert (unseal.reason, unseal.callee_path) == ("import", "app/jwt.py")
        # app/jwt.py is not the PyJWT library: no Authentication role from it, as there is from `from jwt import`.
        assert "Authentication" not in role(views)
        assert "Authentication" in role(rows[("app/api/claims.py", "read_claims")])


def test_go_raw_string_imports_count_for_both(repo):
    with indexed(repo) as (rel, rows):
        checkout = rows[("cmd/checkout/main.go", "checkout")]
        [save] = [e for e in rel.callees(checkout["id"]) if e.name == "Save"]
        assert (save.reason, save.callee_path) == ("import", "shop/store/save.go")
        assert "Authentication" in role(checkout)  # github.com/golang-jwt/jwt, in back quotes


def test_a_go_package_clause_imports_nothing_for_either():
    assert enrich.roles("internal/claims/claims.go", ["package jwt", 'import "fmt"'], [], "") == []
    assert import_keys("internal/claims/claims.go", ["package jwt", 'import "fmt"']) == ["fmt"]


def test_back_quoted_javascript_names_count_for_both_and_a_template_with_a_substitution_for_neither():
    statement = "const jwt = require(`jsonwebtoken`);"
    assert enrich.roles("web/src/sign.js", [statement], [], "") == ["Authentication"]
    assert import_keys("web/src/sign.js", [statement]) == ["jsonwebtoken"]
    template = "const messages = require(`./locales/${lang}`);"
    assert enrich.roles("web/src/i18n.js", [template], [], "") == []
    assert import_keys("web/src/i18n.js", [template]) == []
