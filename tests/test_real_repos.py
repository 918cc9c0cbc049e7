"""Bugs found on real public repositories, each as a small fixture under ``tests/fixtures/real/`` and a test that
fails without its fix. The soak run (``benchmarks/soak.py``) is where they are found; these tests keep them fixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from localidx.chunk import chunk_file
from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.store.index import open_index
from localidx.text import tokens

FIXTURES = Path(__file__).parent / "fixtures" / "real"


def settings_for(root: Path, **extra):
    return load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index"), **extra})


def test_functions_sharing_one_line_are_one_chunk_and_the_file_indexes(make_repo):
    # sphinx-doc/sphinx at 752d3285d250 (and 12 of 16 sphinx commits from 2020-2023): a bundled underscore.js defines
    # many functions on one long line. Each function's chunk was that whole line, with the same id, and indexing
    # stopped with "UNIQUE constraint failed: rel_chunks.cid" (exit 3, nothing usable).
    source = (FIXTURES / "one_line_library.js").read_bytes()
    result = chunk_file("lib/one_line_library.js", source, load_settings())
    ids = Counter(c.id for c in result.chunks)
    assert max(ids.values()) == 1
    line_chunk = next(c for c in result.chunks if c.start_line == 2)
    assert line_chunk.symbols == ["sumOver", "sumUnder", "sumAll"]

    repo = make_repo({"lib/one_line_library.js": source, "app.py": "def main():\n    return 1\n"})
    stats = run_index(repo, True, settings_for(repo))
    assert stats.files_processed == 2 and not stats.errors
    idx = open_index(repo, True, settings_for(repo), read_only=True)
    try:
        rows = idx.store.snapshot().search().select(["id", "path"]).limit(None).to_arrow().to_pylist()
    finally:
        idx.close()
    assert {r["path"] for r in rows} == {"lib/one_line_library.js", "app.py"}
    assert len({r["id"] for r in rows}) == len(rows)


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(cwd.parent / f"{cwd.name}-home"))
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_bare_repository_is_refused_in_one_line(make_repo, tmp_path):
    # A bare clone (a mirror, a server's repository) has no work tree: it was indexed as plain files (pack
    # metadata, hook samples).
    source = make_repo({"app.py": "def main():\n    return 1\n"})
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    for where in (bare, bare / "hooks"):
        for command in (["index"], ["status"], ["search", "main"], ["index", "--dry-run"]):
            proc = _cli(where, *command)
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            assert proc.returncode == 2 and len(lines) == 1, (command, proc.stderr)
            assert "bare git repository" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "mirror.git-home").exists(), "nothing may be written for a bare repository"


def test_chunks_of_a_file_in_another_repository_find_that_repository(make_repo):
    # `localidx chunks /abs/path/file.go` run from a directory of another repository said "outside the repository".
    here = make_repo({"README.md": "# here\n"}, name="here")
    there = make_repo({"cmd/main.go": "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"}, name="there")
    proc = _cli(here, "chunks", str(there / "cmd/main.go"))
    assert proc.returncode == 0, proc.stderr
    assert "cmd/main.go:1-5  function" in proc.stdout and proc.stdout.rstrip().endswith("main")
    both = _cli(here, "chunks", "README.md", str(there / "cmd/main.go"), "--json")
    assert both.returncode == 0, both.stderr
    assert {c["path"] for c in json.loads(both.stdout)} == {"README.md", "cmd/main.go"}


def test_node_text_read_after_the_parse_deadline_is_the_source_not_a_hang():
    # rust-lang/regex at 88a2a62d861d, bench/src/ffi/re2.cpp (1.4 KB): on a loaded machine the C++ query's first
    # compile outlasted the parse deadline, and the query's #match? predicates then read node text through the parse
    # callback, which answered b"" forever: the worker hung and the run with it.
    import threading
    import time as clock

    from localidx.chunk.parse import _parse_tree
    from localidx.languages import language_for_path

    spec = language_for_path("lib/ffi.cpp")
    source = b'extern "C" {\n    int add(int a, int b) {\n        return a + b;\n    }\n}\n'
    tree = _parse_tree(spec, source, timeout_s=0.2)
    clock.sleep(0.3)  # the deadline is behind us now
    result: list = []
    reader = threading.Thread(target=lambda: result.append(tree.root_node.text), daemon=True)
    reader.start()
    reader.join(10)
    assert result == [source], "reading node text after the deadline hung or came back empty"


def test_a_long_dense_line_is_cut_to_the_budget():
    # square/okhttp at 1682d9bac8c0, CacheTest.kt: a 562-character base64 certificate line inside a test method. The
    # split planned parts from the method's average characters per token, so the line looked like it fit, went into
    # a part of its own, and that part was 391 tokens: over max_tokens (384), which no chunk may ever be.
    settings = load_settings()
    source = (FIXTURES / "long_base64_line.kt").read_bytes()
    result = chunk_file("src/test/CertificatePinTest.kt", source, settings)
    assert not result.errors
    over = [(c.start_line, c.token_count) for c in result.chunks if c.token_count > settings.max_tokens]
    assert not over
    long_line = source.decode().split("\n")[8].strip()
    assert "".join(c.text.strip() for c in result.chunks if c.start_line == c.end_line == 9) == long_line


def test_text_of_more_tokens_than_characters_is_counted_against_the_budget():
    # notepad-plus-plus at f400b682b509, nativeLang/georgian.xml: Georgian tooltips cost about 1.6 tokens per
    # character, and the budget check took any text of at most max_tokens characters to fit without counting it:
    # two tooltip lines (372 characters) made a 398-token window, and others up to 466, over max_tokens (384).
    settings = load_settings()
    source = (FIXTURES / "georgian_tooltips.xml").read_bytes()
    tooltips = [line for line in source.decode().split("\n") if "<Tip " in line]
    pair = "\n".join(tooltips[:2])
    assert len(pair) <= settings.max_tokens < tokens.count(pair)
    assert not tokens.fits(pair, settings.max_tokens)
    result = chunk_file("nativeLang/georgian.xml", source, settings)
    assert not result.errors
    assert max(c.token_count for c in result.chunks) <= settings.max_tokens
