"""Every language fixture, chunked and compared with its golden file, plus the invariants every language keeps.

A fixture is ``tests/fixtures/languages/<lang>/sample.<ext>`` with ``sample.<ext>.golden.json`` beside it. Goldens are
rewritten only with ``pytest --update-goldens``; review the diff before committing one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localidx.text import tokens
from localidx.chunk import chunk_file
from localidx.config import Settings
from localidx.languages import LANGUAGES, language_for_path

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
SAMPLES = sorted(p for p in FIXTURES.glob("*/sample.*") if not p.name.endswith(".golden.json"))
SETTINGS = Settings(max_tokens=256)


def _view(chunk) -> dict:
    """The parts of a chunk a golden file pins: structure and facts, not the full text."""
    tags = {k: chunk.tags[k] for k in ("http_method", "http_path", "is_api_endpoint", "has_async", "is_test", "priority",
                                      "macro")
            if k in chunk.tags}
    return {
        "kind": chunk.kind,
        "symbol": chunk.symbol,
        "lines": [chunk.start_line, chunk.end_line],
        "level": chunk.level,
        "parent": chunk.parent,
        "symbols": chunk.symbols,
        "signature": chunk.signature,
        "doc": chunk.doc[:80],
        "calls": chunk.calls,
        "chunk_index": chunk.chunk_index,
        "head": chunk.text.splitlines()[0] if chunk.text else "",
        "tags": tags,
    }


def _chunk(sample: Path):
    rel = f"{sample.parent.name}/{sample.name}"
    return chunk_file(rel, sample.read_bytes(), SETTINGS)


def test_every_language_has_a_fixture():
    covered = {language_for_path(p.name).name for p in SAMPLES if language_for_path(p.name)}
    assert covered == set(LANGUAGES), f"languages without a fixture: {sorted(set(LANGUAGES) - covered)}"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_golden(sample: Path, update_goldens: bool):
    result = _chunk(sample)
    view = [_view(c) for c in result.chunks]
    golden = sample.with_name(sample.name + ".golden.json")
    if update_goldens or not golden.exists():
        golden.write_text(json.dumps(view, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        if not update_goldens:
            pytest.fail(f"wrote missing golden {golden.name}; review it and run again")
    assert view == json.loads(golden.read_text(encoding="utf-8"))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_invariants(sample: Path):
    result = _chunk(sample)
    assert not result.errors, result.errors
    lines = sample.read_text(encoding="utf-8").split("\n")
    # Nothing is lost: every non-blank line is inside some chunk and its text appears in one of them.
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        holders = [c for c in result.chunks if c.start_line <= n <= c.end_line and c.kind != "summary"]
        assert holders, f"line {n} in no chunk: {line!r}"
        assert any(line.strip() in c.text for c in holders), f"line {n} text in no chunk: {line!r}"
    kinds = {c.kind for c in result.chunks}
    assert kinds & {"function", "method"}, "a fixture must define functions or methods"
    for c in result.chunks:
        assert tokens.count(c.text) <= SETTINGS.max_tokens, f"{c.title} over max_tokens"
        assert c.search_text.startswith("[META] File: ")
        assert c.search_text.endswith(c.text)
    # Class chunks are skeletons: no method body is stored twice.
    methods = [c for c in result.chunks if c.kind == "method" and c.end_line - c.start_line >= 3]
    skeletons = [c for c in result.chunks if c.kind in ("class", "struct", "impl", "trait", "interface", "enum")]
    for m in methods:
        body_line = m.text.splitlines()[-2].strip()
        if len(body_line) > 12:
            for s in skeletons:
                if s.start_line <= m.start_line <= s.end_line:
                    assert body_line not in s.text, f"{m.symbol} body repeated in skeleton {s.symbol}"
    # Deterministic identity.
    again = _chunk(sample)
    assert [c.id for c in again.chunks] == [c.id for c in result.chunks]
    assert len({c.id for c in result.chunks}) == len(result.chunks)


def test_a_query_file_reads_the_files_it_inherits_first(tmp_path, monkeypatch):
    import localidx.languages as languages

    (tmp_path / "base-tags.scm").write_text("; base\n(a) @x\n", encoding="utf-8")
    (tmp_path / "extra-tags.scm").write_text("; inherits: base\n(b) @y\n", encoding="utf-8")
    (tmp_path / "extra-chunks.scm").write_text("(c) @z\n", encoding="utf-8")
    (tmp_path / "lang-tags.scm").write_text("; inherits: extra, base\n(d) @w\n", encoding="utf-8")
    (tmp_path / "lang-chunks.scm").write_text(";; inherits: extra\n(e) @v\n", encoding="utf-8")
    (tmp_path / "loop-tags.scm").write_text("; inherits: loop\n", encoding="utf-8")
    monkeypatch.setattr(languages, "_queries_dir", lambda: tmp_path)
    languages._query_text.cache_clear()
    try:
        spec = languages.LanguageSpec("lang", (), (), "none", ("lang-tags.scm", "lang-chunks.scm"))
        # Each file after its parents, of its own kind, in the order named; a file inherited twice is read once.
        assert spec.query_source() == "\n".join([
            "; base\n(a) @x\n", "; inherits: base\n(b) @y\n", "; inherits: extra, base\n(d) @w\n",
            "(c) @z\n", ";; inherits: extra\n(e) @v\n",
        ])
        with pytest.raises(ValueError, match="loop-tags.scm -> loop-tags.scm"):
            languages.LanguageSpec("loop", (), (), "none", ("loop-tags.scm",)).query_source()
    finally:
        languages._query_text.cache_clear()


def test_the_shipped_query_files_inherit_files_that_exist_and_share_them():
    import re

    queries = FIXTURES.parents[2] / "localidx" / "languages" / "queries"
    inherited = set()
    for path in queries.glob("*.scm"):
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        if m := re.fullmatch(r";+\s*inherits\s*:\s*(.+?)\s*", first):
            kind = path.name.rsplit("-", 1)[1]
            for parent in m.group(1).split(","):
                assert (queries / f"{parent.strip()}-{kind}").is_file(), (path.name, parent)
                inherited.add(parent.strip())
    assert inherited == {"ecma", "jsx", "c_family", "c"}
    # Each language's compiled query holds a shared pattern once: `new X()` is a call in JavaScript and TypeScript.
    for name in ("javascript", "typescript", "tsx"):
        assert LANGUAGES[name].query_source().count("(new_expression") == 1, name


def test_a_grammar_is_loaded_only_when_a_file_needs_it(tmp_path):
    import subprocess
    import sys

    # A fresh process, as a cold index is: chunking Python and Lua files imports those two grammars and no other.
    code = (
        "import sys\n"
        "from localidx.chunk import chunk_file\n"
        "from localidx.config import Settings\n"
        "chunk_file('a.py', b'def f():\\n    return 1\\n', Settings())\n"
        "chunk_file('b.lua', b'local function g()\\n  return 1\\nend\\n', Settings())\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('tree_sitter_') and '.' not in m)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=FIXTURES.parents[2])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tree_sitter_lua", "tree_sitter_python"]


def test_a_file_whose_grammar_fails_is_cut_into_windows_with_the_reason(make_repo, tmp_path):
    import os
    import subprocess
    import sys

    # A broken grammar wheel: its module imports but cannot give a language.
    broken = tmp_path / "site" / "tree_sitter_swift"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("def language():\n    raise OSError('bad wheel')\n", encoding="utf-8")
    swift = (FIXTURES / "swift" / "sample.swift").read_text(encoding="utf-8")
    repo = make_repo({"Sources/Inventory.swift": swift, "lib/store.lua": "local function g()\n  return 1\nend\n"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(FIXTURES.parents[2])])}
    proc = subprocess.run([sys.executable, "-m", "localidx", "index", "--dry-run", "--json"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["errors"] == [{"path": "Sources/Inventory.swift", "reason": "parser failed: bad wheel"}]
    assert report["chunks_by_language"]["swift"] >= 2 and report["chunks_by_language"]["lua"] >= 1
    assert report["chunks_by_kind"]["window"] >= 1
    # The other file of the same run keeps its symbols.
    assert report["chunks_by_kind"]["function"] >= 1
