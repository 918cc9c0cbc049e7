"""The chunker's promises, checked on generated and hand-written sources: coverage, budget, overlap, merge,
skeletons, sentinels, redaction, identity."""

from __future__ import annotations

import random

import pytest

from localidx.text import tokens
from localidx.chunk import chunk_file
from localidx.config import Settings

SETTINGS = Settings(max_tokens=128, overlap_lines=5)


def _generated_python(seed: int, functions: int = 60) -> str:
    rng = random.Random(seed)
    out = ['"""Generated module."""', "import os", ""]
    for f in range(functions):
        shape = rng.choice(["tiny", "medium", "long", "class"])
        if shape == "tiny":
            out += [f"def tiny_{f}(x):", f"    return x + {f}", ""]
        elif shape == "medium":
            out += [f"def medium_{f}(items):", '    """Sum things."""', "    total = 0", "    for item in items:",
                    "        total += item", "    return total", ""]
        elif shape == "long":
            out += [f"def long_{f}(value):", "    result = []"]
            out += [f"    result.append(compute_{i}(value) * {i} + offset_{i})" for i in range(rng.randint(30, 80))]
            out += ["    return result", ""]
        else:
            out += [f"class Service{f}:", '    """A service."""', "    retries = 3", ""]
            for m in range(rng.randint(1, 4)):
                out += [f"    def handle_{m}(self, request):", f"        self.log(request, {m})",
                        "        return self.backend.call(request)", ""]
        out.append(f"CONSTANT_{f} = {f}")
        out.append("")
    return "\n".join(out)


def test_generated_sources_keep_every_line_within_budget():
    for seed in range(5):
        text = _generated_python(seed)
        result = chunk_file(f"pkg/gen_{seed}.py", text.encode(), SETTINGS)
        assert not result.errors
        lines = text.split("\n")
        for n, line in enumerate(lines, 1):
            if line.strip():
                assert any(c.start_line <= n <= c.end_line and line.strip() in c.text
                           for c in result.chunks if c.kind != "summary"), f"seed {seed}: line {n} lost: {line!r}"
        for c in result.chunks:
            assert tokens.count(c.text) <= SETTINGS.max_tokens
            assert c.token_count == tokens.count(c.text)


def test_split_parts_overlap_by_overlap_lines():
    body = "\n".join(f"    value_{i} = transform(value_{i - 1}, factor={i})" for i in range(1, 120))
    text = f"def long_function(value_0):\n{body}\n    return value_119\n"
    result = chunk_file("long.py", text.encode(), Settings(max_tokens=256, overlap_lines=5))
    parts = [c for c in result.chunks if c.symbol == "long_function"]
    assert len(parts) > 2
    assert [p.chunk_index for p in parts] == list(range(len(parts)))
    assert parts[0].overlap_lines == 0
    for prev, nxt in zip(parts, parts[1:]):
        assert nxt.overlap_lines == 5
        assert nxt.start_line == prev.end_line - 4
        assert prev.text.split("\n")[-5:] == nxt.text.split("\n")[:5]
    assert parts[0].start_line == 1 and parts[-1].end_line == 121


def test_tiny_siblings_merge_and_keep_their_names():
    text = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"
    [chunk] = chunk_file("small.py", text.encode(), SETTINGS).chunks
    assert chunk.symbols == ["a", "b", "c"]
    assert (chunk.start_line, chunk.end_line) == (1, 10)


def test_big_siblings_are_not_merged():
    body = "\n".join(f"    x_{i} = compute(x_{i - 1})" for i in range(1, 20))
    text = f"def a(x_0):\n{body}\n\n\ndef b(x_0):\n{body}\n"
    chunks = chunk_file("big.py", text.encode(), Settings()).chunks
    assert [c.symbol for c in chunks] == ["a", "b"]
    assert all(c.symbols == [] for c in chunks)


def test_class_chunk_is_a_skeleton_and_methods_point_to_it():
    text = (
        "class Repo:\n"
        '    """Stores users."""\n'
        "    table = 'users'\n\n"
        "    def get(self, user_id):\n"
        "        row = self.db.fetch(self.table, user_id)\n"
        "        if row is None:\n"
        "            raise KeyError(f'no user {user_id} in {self.table}')\n"
        "        return User.from_row(row)\n\n"
        "    def put(self, user):\n"
        "        if not user.valid():\n"
        "            raise ValueError(f'refusing to store invalid user {user.id}')\n"
        "        self.db.write(self.table, user.to_row())\n"
        "        self.cache.evict(user.id)\n"
    )
    chunks = chunk_file("repo.py", text.encode(), Settings()).chunks
    skeleton = next(c for c in chunks if c.kind == "class")
    assert "table = 'users'" in skeleton.text and "def get(self, user_id):" in skeleton.text
    assert "self.db.fetch" not in skeleton.text and "self.cache.evict" not in skeleton.text
    methods = [c for c in chunks if c.kind == "method"]
    assert [m.symbol for m in methods] == ["Repo.get", "Repo.put"]
    assert all(m.parent_id == skeleton.id and m.parent == "Repo" for m in methods)
    assert "fetch" in methods[0].calls


def test_a_skeleton_leaves_a_members_doc_comment_to_the_member():
    # A heavily documented impl: each method's doc comment is in the method's chunk, and only its first line in the
    # impl's skeleton, so the skeleton stays one chunk and a method's documentation is found with its code.
    doc = "    /// Runs a step of the shutdown.\n" + "".join(
        f"    /// Runs the future to completion, step {n} of the blocking pool's shutdown.\n" for n in range(29))
    methods = "".join(f"{doc}    #[track_caller]\n    pub fn run_{n}(&self) -> u32 {{\n        self.step({n})\n    }}\n\n"
                      for n in range(6))
    text = "pub struct Handle;\n\nimpl Handle {\n" + methods + "}\n"
    chunks = chunk_file("src/handle.rs", text.encode(), Settings()).chunks
    skeletons = [c for c in chunks if c.kind == "impl"]
    assert len(skeletons) == 1
    assert "blocking pool" not in skeletons[0].text  # the comment's first line stays: an outline of the impl
    assert skeletons[0].text.count("/// Runs a step of the shutdown.") == 6
    assert "#[track_caller]" in skeletons[0].text and "pub fn run_3(&self) -> u32 {" in skeletons[0].text
    others = [c for c in chunks if c is not skeletons[0]]
    for n in range(6):  # each comment line is still in a chunk: the method's, or its comment's own
        name_line = next(i for i, line in enumerate(text.splitlines(), 1) if f"pub fn run_{n}(" in line)
        for line in range(name_line - 31, name_line):
            assert any(c.start_line <= line <= c.end_line for c in others), (n, line)


def test_ids_are_deterministic_and_follow_content():
    text = _generated_python(7)
    first = chunk_file("pkg/mod.py", text.encode(), SETTINGS).chunks
    second = chunk_file("pkg/mod.py", text.encode(), SETTINGS).chunks
    assert [c.id for c in first] == [c.id for c in second]
    edited = chunk_file("pkg/mod.py", text.replace("return x + 3", "return x - 3").encode(), SETTINGS).chunks
    changed = {c.id for c in first} ^ {c.id for c in edited}
    assert 0 < len(changed) < len(first)
    moved = chunk_file("pkg/other.py", text.encode(), SETTINGS).chunks
    assert not {c.id for c in first} & {c.id for c in moved}
    # Only the file summary names the path in its text; every other chunk's content is the same.
    assert [c.content_hash for c in first if c.kind != "summary"] == [
        c.content_hash for c in moved if c.kind != "summary"]


def test_parser_timeout_gives_a_sentinel_and_keeps_the_text(monkeypatch):
    # The parse timeout bounds redaction too (test_redact_index.py); here the parser alone runs out of time.
    monkeypatch.setattr("localidx.safety.secret_scan.deadline_after", lambda seconds: None)
    text = _generated_python(1, functions=200)
    result = chunk_file("slow.py", text.encode(), Settings(parse_timeout_s=1e-6))
    [error] = [c for c in result.chunks if c.kind == "error"]
    assert error.level == -99 and "timed out" in error.text
    assert (error.start_line, error.end_line) == (1, len(text.split("\n")))
    windows = [c for c in result.chunks if c.kind == "window"]
    assert windows and windows[0].start_line == 1
    assert result.errors


def test_import_only_init_gives_no_chunks_but_code_does():
    assert chunk_file("pkg/__init__.py", b"", Settings()).chunks == []
    result = chunk_file("pkg/__init__.py", b"# re-exports\nfrom .a import b\nimport c\n", Settings())
    assert result.chunks == [] and result.skipped == "import-only" and not result.errors
    chunks = chunk_file("pkg/__init__.py", b"from .a import b\n\nVERSION = b.version()\n", Settings()).chunks
    assert chunks and "VERSION" in chunks[0].text


def test_invalid_utf8_is_replaced_and_flagged():
    result = chunk_file("bad.py", b"def f():\n    return '\xff\xfe caf\xe9'\n", Settings())
    assert result.invalid_utf8
    [chunk] = result.chunks
    assert "\ufffd" in chunk.text and chunk.tags.get("invalid_utf8") is True


def test_secrets_are_redacted_before_anything_leaves_and_lines_stay_right():
    key = "AKIA" + "QWERTYUIOPASDFGH"
    pem = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join("A" * 64 for _ in range(4)) + "\n-----END RSA PRIVATE KEY-----"
    text = (
        "import boto3\n\n"
        f"ACCESS_KEY = '{key}'\n"
        f'KEY_PEM = """{pem}"""\n\n\n'
        "def connect():\n"
        "    return boto3.client('s3', aws_access_key_id=ACCESS_KEY)\n"
    )
    result = chunk_file("cloud.py", text.encode(), Settings())
    everything = "\n".join(c.text + c.search_text for c in result.chunks)
    assert key not in everything and "A" * 64 not in everything
    assert "«redacted:" in everything
    assert result.redactions >= 2
    # Every line a chunk holds sits at its original line number; only the lines holding secrets (the key on line 3,
    # the key block on lines 4-9, which keeps its line count) differ.
    original = text.split("\n")
    for chunk in result.chunks:
        if chunk.kind == "summary":
            continue
        for offset, line in enumerate(chunk.text.split("\n")):
            number = chunk.start_line + offset
            if line != original[number - 1]:
                assert 3 <= number <= 9, (number, line)
    holder = next(c for c in result.chunks if "def connect():" in c.text)
    assert original[holder.start_line - 1 + holder.text.split("\n").index("def connect():")] == "def connect():"


def test_unknown_text_falls_back_to_overlapping_windows():
    text = "\n".join(f"line {i} of a plain text file with some words" for i in range(200))
    chunks = chunk_file("notes/log.txt", text.encode(), Settings(window_lines=60, overlap_lines=5)).chunks
    assert {c.kind for c in chunks} == {"window"}
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 200
    assert all(b.start_line == a.end_line - 4 for a, b in zip(chunks, chunks[1:]))


def test_binary_content_is_skipped_with_a_reason():
    result = chunk_file("image.py", b"\x89PNG\r\n\x1a\n\x00\x00\x00", Settings())
    assert result.skipped == "binary" and result.chunks == []


def test_markdown_and_config_are_dispatched():
    md = chunk_file("docs/guide.md", b"# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n", Settings()).chunks
    assert [c.kind for c in md] == ["heading", "content", "heading", "content"]
    assert md[1].parent_id == md[0].id and md[2].parent_id == md[0].id
    cfg = chunk_file("deploy/app.yaml", b"server:\n  port: 80\ndatabase:\n  host: db\n", Settings()).chunks
    assert cfg[0].kind == "summary" and "server" in cfg[0].text and "database" in cfg[0].text
    assert {c.kind for c in cfg[1:]} == {"config"}


def test_code_summary_for_route_files_lists_endpoints():
    text = (
        "from fastapi import APIRouter\n\nrouter = APIRouter()\n\n\n"
        '@router.get("/users/{user_id}")\n'
        "async def get_user(user_id: int):\n"
        "    return await db.fetch_user(user_id)\n"
    )
    chunks = chunk_file("app/routes/users.py", text.encode(), Settings()).chunks
    summary = chunks[0]
    assert summary.kind == "summary"
    assert "GET /users/{user_id} -> get_user" in summary.text
    handler = next(c for c in chunks if c.symbol == "get_user")
    assert handler.tags["http_method"] == "GET" and handler.tags["http_path"] == "/users/{user_id}"
    assert handler.tags["is_api_endpoint"] is True and handler.tags["has_async"] is True
    assert handler.tags["priority"] == 10
    assert "Endpoint: GET /users/{user_id}" in handler.search_text.split("\n", 1)[0]


BOM_SOURCES = {
    "svc/app.py": b'"""Doc."""\nimport os\n\n\ndef alpha(x):\n    return x + 1\n\n\nclass Beta:\n    def gamma(self):\n        return 2\n',
    "docs/guide.md": b"# Title\n\nSome text here.\n\n## Sub\n\nMore.\n",
    "pyproject.toml": b"[tool]\nname = \'x\'\n\n[other]\nv = 1\n",
    "web/app.js": b"export function alpha(x) {\n  return x + 1;\n}\n\nclass Beta {\n  gamma() { return 2; }\n}\n",
    "notes.txt": b"hello\nworld\n",
}


@pytest.mark.parametrize("path", sorted(BOM_SOURCES))
def test_a_byte_order_mark_changes_no_chunk(path):
    """Editors on Windows save files with a UTF-8 byte-order mark; it must not change a chunk's text, kind, symbol
    or id (it once turned a Markdown file's first heading into body text and a TOML table into a key)."""
    data = BOM_SOURCES[path]
    plain = [c.to_dict() for c in chunk_file(path, data, SETTINGS).chunks]
    marked = [c.to_dict() for c in chunk_file(path, b"\xef\xbb\xbf" + data, SETTINGS).chunks]
    assert plain
    assert [(c["id"], c["kind"], c["symbol"], c["text"]) for c in marked] == \
           [(c["id"], c["kind"], c["symbol"], c["text"]) for c in plain]


@pytest.mark.parametrize("path, declaration", [
    ("src/JsonParser.java", "public final class JsonParser {"),
    ("src/parser.ts", "export class JsonParser {"),
])
def test_a_definition_whose_comment_is_too_long_keeps_its_declaration_in_its_first_part(path, declaration):
    # Before: the first part of the class held its long comment and not the line declaring it, which landed in a
    # later part: the name's definition did not show its declaration.
    doc = ["/**", *(f" * Paragraph {n} of a long explanation of how the parser reads tokens and nests values."
                    for n in range(40)), " */"]
    body = [f"  private int field{n} = {n};" for n in range(30)]
    text = "\n".join([*doc, declaration, *body, "}", ""])
    chunks = chunk_file(path, text.encode(), SETTINGS).chunks
    declared_at = len(doc) + 1
    parts = sorted((c for c in chunks if c.symbol.endswith("JsonParser")), key=lambda c: c.start_line)
    assert parts[0].start_line <= declared_at <= parts[0].end_line
    # The comment's head is a chunk of its own, no definition of anything; every line is still in a chunk.
    head = [c for c in chunks if c.end_line < parts[0].start_line and c.kind == "module"]
    assert head and all(not c.symbol for c in head) and head[0].start_line == 1
    assert all(c.text.count("\n") < 60 for c in chunks)
