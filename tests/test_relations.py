"""Call relations on real git repositories indexed into a real catalog: which definition a call reaches (same file,
import, unique name), what stays unresolved, and how edits, new files and deletes change the edges incrementally."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.store.index import open_index
from localidx.store.relations import Relations, file_relations, import_keys, module_keys

SERVICE = '''"""The record service."""

from app.util import normalize
from app.shapes import area, perimeter


def handle(record, out):
    """Handle one incoming record: normalize, validate, archive and report it."""
    data = normalize(record)
    data = validate(data)
    archive_record(data)
    render_report(data)
    lookup_plan(data)
    data["size"] = area(data["w"], data["h"]) + perimeter(data["w"], data["h"])
    out.append(data)
    return data


def validate(data):
    """Check that the record has a name and an id, and that its name is not blank."""
    if not data.get("name") or "id" not in data:
        raise ValueError("a record needs a name and an id")
    if not data["name"].strip():
        raise ValueError("a record name cannot be blank")
    return data
'''

NORMALIZE = '''def normalize(record):
    """Normalize a record: lower-case its keys and strip surrounding blanks from its name."""
    cleaned = {key.lower(): value for key, value in record.items()}
    cleaned["name"] = cleaned.get("name", "").strip()
    cleaned["source"] = "{source}"
    return cleaned
'''

ARCHIVE = '''"""Where handled records go."""


def archive_record(data):
    """Write one record to the archive shelf, keyed by its id, and remember when."""
    shelf = Archive()
    shelf.records[data["id"]] = dict(data)
    shelf.history.append(("archived", data["id"]))
    return shelf


def append(record):
    """A module function with a noise name: calls to some list's append must never land here."""
    print("appending", record)
    return [record]


class Archive:
    """Records by id, with their history."""

    def get(self, key):
        """One record by its id, or None when it was never archived or has been purged."""
        found = self.records.get(key)
        return None if found is None or found.get("purged") else found

    def describe(self, key):
        """A line about one record, for the audit log, naming its id and whether it is archived."""
        record = self.get(key)
        state = "archived" if record is not None else "missing"
        return f"record {key}: {state} ({len(self.history)} events so far)"
'''

SHAPES = '''def area(w, h):
    return w * h


def perimeter(w, h):
    return 2 * (w + h)
'''


def report(flavour: str) -> str:
    return f'''def render_report(data):
    """Render a {flavour} report line for one record, with its id and its name."""
    line = "{flavour}: " + str(data["id"]) + " " + data["name"]
    return line.upper() if data.get("loud") else line
'''


FORMAT_TS = '''export function formatPrice(cents: number): string {
  const whole = Math.floor(cents / 100);
  const rest = String(cents % 100).padStart(2, "0");
  return `${whole}.${rest} EUR (FLAVOUR)`;
}
'''

CART_TS = '''import { formatPrice } from "./util/format";

export function cartLabel(items: { cents: number }[]): string {
  const total = items.reduce((sum, item) => sum + item.cents, 0);
  const count = items.length === 1 ? "one item" : `${items.length} items`;
  return `Total: ${formatPrice(total)} for ${count}`;
}
'''


@pytest.fixture
def repo(make_repo):
    return make_repo({
        "app/service.py": SERVICE,
        "app/util.py": NORMALIZE.replace("{source}", "util"),
        "app/legacy.py": NORMALIZE.replace("{source}", "legacy"),
        "app/archive.py": ARCHIVE,
        "app/shapes.py": SHAPES,
        "app/report_a.py": report("plain"),
        "app/report_b.py": report("fancy"),
        "web/src/util/format.ts": FORMAT_TS.replace("FLAVOUR", "current"),
        "web/src/legacy/format.ts": FORMAT_TS.replace("FLAVOUR", "legacy"),
        "web/src/cart.ts": CART_TS,
    })


def settings_for(root: Path):
    return load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index")})


def index(root: Path, **kw):
    return run_index(root, True, settings_for(root), **kw)


@contextlib.contextmanager
def relations(root: Path):
    idx = open_index(root, True, settings_for(root), read_only=True)
    try:
        rows = idx.store.snapshot().search().select(["id", "path", "symbol", "symbols", "chunk_index"]).limit(None)
        yield Relations(idx.catalog), rows.to_arrow().to_pylist()
    finally:
        idx.close()


def chunk_id(rows: list[dict], path: str, symbol: str) -> str:
    found = [r["id"] for r in rows if r["path"] == path and r["chunk_index"] == 0
             and (r["symbol"] == symbol or symbol in (r["symbols"] or []))]
    assert len(found) == 1, (path, symbol, found)
    return found[0]


def stored_rows(rel: Relations, path: str) -> int:
    """Rows any relations table holds for a file."""
    db = rel._db
    row = db.execute("SELECT fid FROM rel_files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return 0
    return sum(db.execute(sql, (row[0],)).fetchone()[0] for sql in (
        "SELECT COUNT(*) FROM rel_chunks WHERE fid = ?", "SELECT COUNT(*) FROM rel_defs WHERE fid = ?",
        "SELECT COUNT(*) FROM rel_refs WHERE fid = ?", "SELECT COUNT(*) FROM rel_imports WHERE fid = ?",
        "SELECT COUNT(*) FROM rel_modules WHERE fid = ?")) + 1


def by_name(edges) -> dict:
    out: dict = {}
    for e in edges:
        out.setdefault(e.name, []).append(e)
    return out


def test_calls_resolve_by_file_then_import_then_unique_name(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        handle = chunk_id(rows, "app/service.py", "handle")
        edges = by_name(rel.callees(handle, limit=50))

        [same] = edges["validate"]
        assert (same.reason, same.confidence) == ("same-file", 1.0)
        assert same.callee_id == chunk_id(rows, "app/service.py", "validate")
        assert (same.caller_symbol, same.caller_path, same.callee_line) == ("handle", "app/service.py", 19)

        # Two modules define normalize; the one imported wins.
        [imported] = edges["normalize"]
        assert (imported.reason, imported.confidence, imported.callee_path) == ("import", 0.8, "app/util.py")

        [unique] = edges["archive_record"]
        assert (unique.reason, unique.confidence, unique.callee_path) == ("unique-name", 0.5, "app/archive.py")

        # Defined in two files, neither imported: no guess. Never defined: nothing.
        assert "render_report" not in edges and "lookup_plan" not in edges
        # A noise name resolves only within the caller's file: out.append(...) is not archive.append.
        assert "append" not in edges and "len" not in edges
        assert [e.confidence for e in rel.callees(handle, limit=50)] == sorted(
            (e.confidence for e in rel.callees(handle, limit=50)), reverse=True)
        assert len(rel.callees(handle, limit=2)) == 2


def test_a_noise_name_resolves_to_a_method_of_the_callers_own_class(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        describe = chunk_id(rows, "app/archive.py", "Archive.describe")
        [get] = [e for e in rel.callees(describe) if e.name == "get"]
        assert (get.callee_symbol, get.reason) == ("Archive.get", "same-file")
        # self.history.append(...) does not reach the module's own append function.
        archive_record = chunk_id(rows, "app/archive.py", "archive_record")
        assert "append" not in by_name(rel.callees(archive_record))


def test_merged_tiny_siblings_are_a_callee_for_each_of_their_symbols(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        merged = chunk_id(rows, "app/shapes.py", "area")
        assert merged == chunk_id(rows, "app/shapes.py", "perimeter")
        handle = chunk_id(rows, "app/service.py", "handle")
        edges = by_name(rel.callees(handle, limit=50))
        assert {e.callee_id for n in ("area", "perimeter") for e in edges[n]} == {merged}
        assert {e.callee_symbol for n in ("area", "perimeter") for e in edges[n]} == {"area", "perimeter"}
        assert {(e.caller_id, e.name) for e in rel.callers(merged)} == {(handle, "area"), (handle, "perimeter")}


def test_callers_and_markdown_lists(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        handle = chunk_id(rows, "app/service.py", "handle")
        validate = chunk_id(rows, "app/service.py", "validate")
        util = chunk_id(rows, "app/util.py", "normalize")
        legacy = chunk_id(rows, "app/legacy.py", "normalize")

        [caller] = rel.callers(validate)
        assert (caller.caller_id, caller.caller_symbol, caller.caller_line) == (handle, "handle", 7)
        assert [e.caller_id for e in rel.callers(util)] == [handle]
        assert rel.callers(legacy) == []

        assert rel.used_by_md(validate) == "- `handle` (app/service.py:7) — same-file, 1.0"
        uses = rel.uses_md(handle).splitlines()
        assert uses[0] == "- `validate` (app/service.py:19) — same-file, 1.0"
        assert "- `normalize` (app/util.py:1) — import, 0.8" in uses
        assert "- `archive_record` (app/archive.py:4) — unique-name, 0.5" in uses
        assert rel.uses_md(legacy) == "" and rel.used_by_md(legacy) == ""
        assert rel.callees("no-such-chunk") == [] and rel.callers("no-such-chunk") == []


def test_relative_imports_in_typescript(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        cart = chunk_id(rows, "web/src/cart.ts", "cartLabel")
        [price] = [e for e in rel.callees(cart) if e.name == "formatPrice"]
        assert (price.reason, price.callee_path) == ("import", "web/src/util/format.ts")
        assert [e.caller_id for e in rel.callers(chunk_id(rows, "web/src/util/format.ts", "formatPrice"))] == [cart]
        assert rel.callers(chunk_id(rows, "web/src/legacy/format.ts", "formatPrice")) == []


def test_edits_new_files_and_deletes_change_edges_incrementally(repo):
    index(repo)
    with relations(repo) as (rel, rows):
        handle = chunk_id(rows, "app/service.py", "handle")
        assert {"archive_record", "normalize"} <= set(by_name(rel.callees(handle, limit=50)))

    # The callee is renamed: the caller's file is untouched, its edge goes.
    archive = repo / "app/archive.py"
    archive.write_text(ARCHIVE.replace("def archive_record", "def archive_entry"), encoding="utf-8")
    # A new file defines a name that resolved to nothing.
    (repo / "app/plans.py").write_text(
        'def lookup_plan(data):\n    """The pricing plan of a record\'s account."""\n    return data.get("plan")\n',
        encoding="utf-8")
    # The imported module goes: the other normalize is now the only one.
    (repo / "app/util.py").unlink()
    stats = index(repo)
    assert stats.files_processed == 2 and stats.files_deleted == 1

    with relations(repo) as (rel, rows):
        assert chunk_id(rows, "app/service.py", "handle") == handle
        edges = by_name(rel.callees(handle, limit=50))
        assert "archive_record" not in edges
        [plan] = edges["lookup_plan"]
        assert (plan.callee_path, plan.reason) == ("app/plans.py", "unique-name")
        [normalize] = edges["normalize"]
        assert (normalize.callee_path, normalize.reason) == ("app/legacy.py", "unique-name")
        assert stored_rows(rel, "app/util.py") == 0
        assert rel._db.execute("SELECT COUNT(*) FROM rel_defs WHERE name = 'archive_record'").fetchone()[0] == 0


def test_an_index_from_before_relations_is_rebuilt_once(repo):
    index(repo)
    idx = open_index(repo, True, settings_for(repo))
    try:
        # What an index written before relations looks like: files in the catalog, no relations.
        idx.catalog.connection.executescript(
            "DROP TABLE rel_refs; DROP TABLE rel_defs; DELETE FROM meta WHERE key = 'relations_schema';")
    finally:
        idx.close()
    with relations(repo) as (rel, rows):
        assert rel.callees(chunk_id(rows, "app/service.py", "handle")) == []
    stats = index(repo)
    assert stats.rebuilt and stats.chunks_embedded == 0  # vectors come from the cache
    with relations(repo) as (rel, rows):
        assert rel.callees(chunk_id(rows, "app/service.py", "handle"), limit=50)
    assert not index(repo).rebuilt
    # A full rebuild on request keeps them too.
    index(repo, rebuild=True)
    with relations(repo) as (rel, rows):
        assert rel.callers(chunk_id(rows, "app/service.py", "validate"))


def test_a_file_skipped_by_content_loses_its_relations(repo):
    index(repo)
    # A generated-code marker makes the chunker skip the file (a content skip reason): its definitions go.
    (repo / "app/shapes.py").write_text("# @generated by shapegen\n" + SHAPES, encoding="utf-8")
    index(repo)
    with relations(repo) as (rel, rows):
        assert rel._catalog.get("app/shapes.py").skipped == "generated"
        assert stored_rows(rel, "app/shapes.py") == 0
        handle = chunk_id(rows, "app/service.py", "handle")
        assert "area" not in by_name(rel.callees(handle, limit=50))


def test_module_and_import_keys():
    assert module_keys("src/app/util.ts") == {"app": 2, "src/app": 4, "util": 3, "app/util": 5, "src/app/util": 7}
    assert module_keys("pkg/__init__.py") == {"pkg": 3}
    py = import_keys("pkg/sub/mod.py", ["from a.b import c, d as e", "from ..x import y", "import os.path as p"])
    assert {"a/b", "a/b/c", "a/b/d", "b/c", "pkg/x", "pkg/x/y", "os/path"} <= set(py)
    ts = import_keys("web/src/cart.ts", ['import { f } from "./util/format.ts"', "import x from '../lib'",
                                         'import y from "@/components/Button"'])
    assert {"web/src/util/format", "web/lib", "components/button"} <= set(ts)
    go = import_keys("cmd/main.go", ['import (\n\t"fmt"\n\t"github.com/acme/shop/internal/store"\n)'])
    assert {"fmt", "internal/store", "shop/internal/store"} <= set(go)
    assert {"store/catalog", "store"} <= set(import_keys("src/main.rs", ["use crate::store::Catalog;"]))
    assert "store/catalog" in import_keys("src/main.rs", ["use crate::store::catalog::Catalog;"])


def test_split_parts_share_their_heads_relations():
    from localidx.chunk import chunk_file
    from localidx.config import Settings

    body = "\n".join(f"    total += helper_{i}(x)" for i in range(200))
    text = f"def big(x):\n    total = 0\n{body}\n    return total\n\n\ndef helper_199(x):\n    return x\n"
    result = chunk_file("big.py", text.encode(), Settings())
    parts = [c for c in result.chunks if c.symbol == "big"]
    assert len(parts) > 1
    rel = file_relations("big.py", result.chunks, result.imports)
    heads = {chunk: head for chunk, _s, _l, head in rel.chunks}
    assert {heads[p.id] for p in parts} == {parts[0].id}
    assert {d[2] for d in rel.defs if d[0] == "big"} == {parts[0].id}
    assert {r[0] for r in rel.refs} == {parts[0].id}
    # Called only in the last part, and bare there: a same-file call.
    assert (parts[0].id, "helper_199", 1) in rel.refs
