"""Markdown chunking: the heading hierarchy a reader sees, budgets, and the invariant check."""

from __future__ import annotations

import dataclasses

import pytest

from localidx.text import tokens
from localidx.chunk.docs import check_docs, chunk_markdown
from localidx.config import Settings
from localidx.records import LEVEL_CONTENT

README = """\
---
title: Demo
tags: [cli, search]
---

Badges and a one-line pitch.

# Demo Tool

Demo indexes your code.

## Install ##

Run:

```bash title="shell"
# not a heading
pip install demo
```

### From source

~~~~markdown
```
# still code, inside a longer fence
```
~~~~

Then build.

Usage
-----

Call `demo search`.

Reference
=========

- an item
---

#### Deep note

Text.
"""


def rows(chunks):
    return [(c.kind, c.level, c.title, c.start_line, c.end_line, c.parent_index) for c in chunks]


@pytest.fixture
def readme_chunks():
    return chunk_markdown("docs/README.md", README, Settings())


def test_readme_hierarchy(readme_chunks):
    C = LEVEL_CONTENT
    assert rows(readme_chunks) == [
        ("content", C, "front matter", 1, 4, None),
        ("content", C, "README.md (intro)", 6, 6, None),
        ("heading", 1, "Demo Tool", 8, 8, None),
        ("content", C, "Demo Tool", 10, 10, 2),
        ("heading", 2, "Install", 12, 12, 2),
        ("content", C, "Install", 14, 19, 4),
        ("heading", 3, "From source", 21, 21, 4),
        ("content", C, "From source", 23, 29, 6),
        ("heading", 2, "Usage", 31, 32, 2),
        ("content", C, "Usage", 34, 34, 8),
        ("heading", 1, "Reference", 36, 37, None),
        ("content", C, "Reference", 39, 40, 10),
        ("heading", 4, "Deep note", 42, 42, 10),
        ("content", C, "Deep note", 44, 44, 12),
    ]


def test_readme_symbols_text_and_language(readme_chunks):
    by_title = {(c.kind, c.title): c for c in readme_chunks}
    source = by_title[("heading", "From source")]
    assert source.symbol == "Demo Tool > Install > From source"
    assert source.name == "From source"
    assert source.parent == "Demo Tool > Install"
    assert source.text == "### From source"
    usage = by_title[("heading", "Usage")]
    assert usage.text == "Usage\n-----"
    assert usage.symbol == "Demo Tool > Usage"
    assert by_title[("content", "Install")].parent == "Demo Tool > Install"
    assert "# not a heading" in by_title[("content", "Install")].text
    assert by_title[("content", "front matter")].text.startswith("---\ntitle: Demo")
    assert by_title[("content", "front matter")].parent == ""
    assert {c.language for c in readme_chunks} == {"markdown"}
    assert all(c.kind in ("heading", "content") for c in readme_chunks)


def test_check_docs_accepts_the_readme(readme_chunks):
    assert check_docs(readme_chunks, README) is None


def broken(chunks, index, **changes):
    copy = [dataclasses.replace(c) for c in chunks]
    copy[index] = dataclasses.replace(copy[index], **changes)
    return copy


def test_check_docs_rejects_content_parented_by_content(readme_chunks):
    reason = check_docs(broken(readme_chunks, 5, parent_index=3), README)
    assert reason and "not a heading" in reason and "\n" not in reason


def test_check_docs_rejects_a_heading_under_a_deeper_heading(readme_chunks):
    # "Usage" (H2) made a child of "From source" (H3).
    reason = check_docs(broken(readme_chunks, 8, parent_index=6), README)
    assert reason and "level" in reason


def test_check_docs_rejects_a_missing_parent(readme_chunks):
    assert "no parent" in check_docs(broken(readme_chunks, 9, parent_index=None), README)


def test_check_docs_rejects_an_unassigned_line(readme_chunks):
    without_usage_text = [c for c in readme_chunks if not (c.kind == "content" and c.title == "Usage")]
    # Parent indexes shift after removal; re-point the later chunks so only the coverage fault remains.
    fixed = []
    for c in without_usage_text:
        index = c.parent_index
        fixed.append(dataclasses.replace(c, parent_index=index - 1 if index is not None and index > 9 else index))
    reason = check_docs(fixed, README)
    assert reason == "line 34 is not assigned to any chunk"


def test_check_docs_rejects_text_missing_from_its_chunk(readme_chunks):
    reason = check_docs(broken(readme_chunks, 9, text="something else"), README)
    assert reason and "line 34" in reason


def test_check_docs_rejects_a_reversed_range(readme_chunks):
    assert "reversed" in check_docs(broken(readme_chunks, 3, start_line=11, end_line=10), README)


def test_only_content_before_the_first_heading_lacks_a_parent(readme_chunks):
    first_heading = next(c.start_line for c in readme_chunks if c.kind == "heading")
    for c in readme_chunks:
        if c.kind == "content" and c.parent_index is None:
            assert c.end_line < first_heading


def test_no_front_matter_without_closing_line():
    text = "---\nnot front matter\n\n# Title\n"
    chunks = chunk_markdown("a.md", text, Settings())
    assert rows(chunks)[0] == ("content", LEVEL_CONTENT, "a.md (intro)", 1, 2, None)
    assert check_docs(chunks, text) is None


def test_thematic_break_after_a_list_is_not_a_heading():
    text = "# T\n\n- one\n- two\n---\n\n***\n---\n"
    chunks = chunk_markdown("a.md", text, Settings())
    assert [c.kind for c in chunks] == ["heading", "content"]
    assert (chunks[1].start_line, chunks[1].end_line) == (3, 8)


def paragraphs(count: int, words: int = 8) -> list[str]:
    out = []
    for p in range(count):
        out.append(" ".join(f"word{p}x{w}" for w in range(words)))
        out.append(f"second line of paragraph {p}")
        out.append("")
    return out


def test_oversize_section_is_split_with_overlap():
    body = paragraphs(40)
    text = "# Guide\n\n" + "\n".join(body) + "\n"
    settings = Settings(max_tokens=120, overlap_lines=2)
    chunks = chunk_markdown("guide.md", text, settings)
    parts = chunks[1:]
    assert chunks[0].kind == "heading" and len(parts) > 3
    assert [p.chunk_index for p in parts] == list(range(len(parts)))
    assert [p.title for p in parts] == [f"Guide (part {i + 1})" for i in range(len(parts))]
    assert all(p.parent_index == 0 and p.kind == "content" for p in parts)
    assert parts[0].overlap_lines == 0
    lines = text.split("\n")
    for prev, part in zip(parts, parts[1:]):
        assert part.overlap_lines == 2
        assert part.start_line == prev.end_line - 1
        # Paragraph boundaries are preferred: a part ends where a blank line follows.
        assert lines[prev.end_line] == ""
    for part in parts:
        assert tokens.count(part.text) <= settings.max_tokens
        assert part.text == "\n".join(lines[part.start_line - 1 : part.end_line])
    covered = set()
    for part in parts:
        covered.update(range(part.start_line, part.end_line + 1))
    assert {n for n, line in enumerate(lines, start=1) if line.strip()} - {1} <= covered
    assert parts[0].start_line == 3 and parts[-1].end_line == len(body) + 1
    assert check_docs(chunks, text) is None


def test_split_keeps_a_fenced_block_whole():
    # The budget runs out in the middle of the fence; the fence fits on its own, so it moves whole to the next part.
    para = [f"plain line {i} of a long paragraph without blank lines" for i in range(4)]
    fence = ["```python"] + [f"# comment {i} inside the fence" for i in range(12)] + ["```"]
    text = "## API\n\n" + "\n".join(para + [""] + fence + [""] + para) + "\n"
    settings = Settings(max_tokens=100, overlap_lines=2)
    chunks = chunk_markdown("api.md", text, settings)
    fence_start, fence_end = 8, 8 + len(fence) - 1
    parts = [c for c in chunks if c.kind == "content"]
    assert [c.kind for c in chunks].count("heading") == 1
    assert [(p.start_line, p.end_line) for p in parts] == [(3, 6), (fence_start, fence_end), (20, 26)]
    assert all(tokens.count(p.text) <= settings.max_tokens for p in parts)
    assert check_docs(chunks, text) is None


def test_a_fence_over_budget_alone_is_split():
    fence = ["```"] + [f"line {i} of a long generated listing" for i in range(200)] + ["```"]
    text = "# Dump\n\n" + "\n".join(fence) + "\n"
    settings = Settings(max_tokens=64, overlap_lines=1)
    chunks = chunk_markdown("dump.md", text, settings)
    assert len(chunks) > 5
    assert all(tokens.count(c.text) <= settings.max_tokens for c in chunks)
    assert check_docs(chunks, text) is None


def test_a_single_huge_line_is_cut_by_characters():
    words = " ".join(f"token{i}" for i in range(2600))
    line = words[:20_000]
    assert len(line) == 20_000
    text = f"# Data\n\n{line}\n\nAfter.\n"
    settings = Settings(max_tokens=384, overlap_lines=5)
    chunks = chunk_markdown("data.md", text, settings)
    cut = [c for c in chunks if c.kind == "content" and c.start_line == 3]
    assert len(cut) > 1
    assert all(c.end_line == 3 for c in cut)
    assert "".join(c.text for c in cut) == line
    assert all(tokens.count(c.text) <= settings.max_tokens for c in cut)
    assert [c.chunk_index for c in cut] == list(range(len(cut)))
    last = chunks[-1]
    assert (last.start_line, last.end_line, last.text) == (5, 5, "After.")
    assert check_docs(chunks, text) is None


def test_empty_document_has_no_chunks():
    assert chunk_markdown("empty.md", "", Settings()) == []
    assert chunk_markdown("blank.md", "\n \n\t\n", Settings()) == []
    assert check_docs([], "\n \n") is None
