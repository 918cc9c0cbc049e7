"""Definitions as Universal Ctags sees them, and the comments written beside them: a truth about source code that
does not come from localidx's own parsers, for the generated question set (``devset.py``) and the name benchmark
(``benchmarks/names.py``).

Needs the ``ctags`` program of Universal Ctags (Debian ``universal-ctags``); ``require_ctags`` says so in one line.
Everything here reads files of a work tree and returns plain records; nothing is written.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Source files, by extension; the comment syntax follows the extension (``COMMENT_STYLE``).
SOURCE_LANGUAGE = {
    ".py": "python", ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".scala": "scala",
    ".ts": "typescript", ".tsx": "typescript", ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".rb": "ruby", ".cs": "csharp", ".php": "php", ".lua": "lua", ".swift": "swift", ".ex": "elixir",
    ".exs": "elixir", ".hs": "haskell", ".zig": "zig",
}
COMMENT_STYLE = {".py": "hash", ".rb": "hash", ".ex": "hash", ".exs": "hash", ".lua": "lua", ".hs": "haskell",
                 ".php": "c-hash"}  # every other source extension: C style (// and /* */)

# Paths that are not the code a question is about: tests, examples, benchmarks, vendored and generated copies, docs.
NOT_SOURCE = re.compile(
    r"(^|/)(tests?|testes|testing|testdata|test_?data|spec|specs|__tests__|__mocks__|fixtures?|examples?|samples?|"
    r"demos?|"
    r"benchmarks?|benches|bench|vendor|third_party|third-party|3rdparty|external|deps|fuzz|fuzzing|docs?|site|"
    r"website|contrib|build|dist|node_modules|bundled|[\w.-]*(?:demo|example|sample)s?|perf[\w.-]*)(/|$)"
    r"|(\.min\.js|_test\.go|_spec\.rb|_test\.rb|\.test\.[jt]sx?|\.spec\.[jt]sx?|\.d\.ts|Tests?\.(java|kt|cs)"
    r"|(^|/)test_[^/]*\.py"
    r"|_test\.py|_tests?\.(c|cc|cpp)|_unittest\.cc|_bench\.\w+|_benchmark\.\w+|conftest\.py)$", re.I)

# ctags kind names (long form) by what they define.
CONTAINER_KINDS = frozenset({"class", "interface", "struct", "enum", "trait", "module", "union", "object",
                             "protocol", "record", "exception"})
FUNCTION_KINDS = frozenset({"function", "method", "member", "func", "singletonMethod", "generator", "macro"})
TYPE_KINDS = frozenset({"type", "typedef", "talias", "typealias", "alias"})
FIELD_KINDS = frozenset({"field", "property"})


@dataclass(frozen=True)
class Tag:
    """One definition: ``line`` is its declaration line (1-based); ``end`` its last line when ctags knows it."""

    name: str
    path: str
    line: int
    end: int | None
    kind: str
    scope: str
    language: str  # ctags' language name


def require_ctags() -> str:
    """The ctags program, or SystemExit with one line saying what is missing."""
    program = shutil.which("ctags")
    if program is None:
        raise SystemExit("Universal Ctags is needed: install it (Debian: apt-get install universal-ctags)")
    version = subprocess.run([program, "--version"], capture_output=True, text=True).stdout
    if "Universal Ctags" not in version:
        raise SystemExit(f"{program} is not Universal Ctags (Debian: apt-get install universal-ctags)")
    return version.splitlines()[0]


_TEST_FOLDER = re.compile(r"(^|/)\w*Tests?(?:[A-Z]\w*)?/")  # AdapterTestUtilities/, UnitTests/


def is_source(path: str) -> bool:
    return Path(path).suffix in SOURCE_LANGUAGE and not NOT_SOURCE.search(path) and not _TEST_FOLDER.search(path)


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def definitions(root: Path, paths: list[str], declarations: bool = False) -> list[Tag]:
    """Every tag ctags reports for ``paths`` (relative to ``root``), in file order. ``declarations``: also C and C++
    prototypes (kind ``prototype``) and Python stub files (``.pyi``), which declare what is defined elsewhere."""
    if not paths:
        return []
    extra = ["--kinds-C=+p", "--kinds-C++=+p", "--langmap=Python:+.pyi"] if declarations else []
    command = ["ctags", *extra, "-L", "-", "--output-format=json", "--sort=no", "--fields=+nKeZl", "-f", "-"]
    done = subprocess.run(command,
                          cwd=root, input="\n".join(paths) + "\n", capture_output=True, text=True,
                          errors="replace")
    tags = []
    for line in done.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("_type") != "tag" or "line" not in record:
            continue
        tags.append(Tag(record["name"], record["path"], int(record["line"]), record.get("end"), record["kind"],
                        record.get("scope", ""), record.get("language", "")))
    return tags


# -- comments -----------------------------------------------------------------------------------------------------

_ANNOTATION = re.compile(r"^\s*(@[\w.]+|#\[|#!\[|\[\s*[A-Z][\w.]*\s*[(\]]|template\s*<|export\s*$)")
_LICENSE = re.compile(r"copyright|licen[cs]e|spdx|all rights reserved|permission is hereby|warranty|"
                      r"\(c\)\s*\d{4}|generated by|do not edit|auto-?generated|@generated", re.I)


def _style(path: str) -> str:
    return COMMENT_STYLE.get(Path(path).suffix, "c")


def _line_comment(line: str, style: str) -> str | None:
    """The text of a one-line comment, or None when the line is not one."""
    s = line.strip()
    prefixes = {"hash": ("#",), "lua": ("--",), "haskell": ("--",), "c": ("//",), "c-hash": ("//", "#")}[style]
    for prefix in prefixes:
        if s.startswith(prefix) and not s.startswith("#!") and not (prefix == "#" and s.startswith("#[")):
            return s.lstrip(prefix[0]).lstrip("!/-|^").strip()
    return None


def comment_above(lines: list[str], decl: int, path: str) -> tuple[int, str] | None:
    """The comment written directly above line ``decl`` (1-based), skipping annotations and attributes: (its first
    line, its text), or None."""
    style = _style(path)
    i = decl - 2
    while i >= 0 and _ANNOTATION.match(lines[i]):
        i -= 1
    if i < 0:
        return None
    if style != "hash" and lines[i].rstrip().endswith("*/"):
        end = i
        while i >= 0 and "/*" not in lines[i]:
            i -= 1
        if i < 0 or not lines[i].lstrip().startswith("/*"):  # a comment at the end of a line of code
            return None
        return i + 1, _block_text(lines[i:end + 1])
    if style in ("lua", "haskell") and lines[i].strip().endswith(("]]", "-}")):
        end = i
        while i >= 0 and not lines[i].strip().startswith(("--[[", "--[=", "{-")):
            i -= 1
        return (i + 1, _block_text(lines[i:end + 1])) if i >= 0 else None
    texts = []
    while i >= 0 and (text := _line_comment(lines[i], style)) is not None:
        texts.append(text)
        i -= 1
    return (i + 2, "\n".join(reversed(texts))) if texts else None


def _block_text(block: list[str]) -> str:
    out = []
    for line in block:
        s = line.strip()
        s = re.sub(r"^(/\*+!?|--\[=*\[|\{-\|?)", "", s)
        s = re.sub(r"(\*+/|\]=*\]|-\})$", "", s).strip()
        s = re.sub(r"^\*+\s?", "", s)
        out.append(s)
    return "\n".join(out)


def docstring_below(lines: list[str], decl: int) -> tuple[int, str] | None:
    """A Python docstring: the string that opens the body of the definition at line ``decl``."""
    i = decl - 1
    while i < len(lines) and not re.search(r":\s*(#.*)?$", lines[i]) and i < decl + 20:
        i += 1  # the end of a signature written over several lines
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return _python_string(lines, i)


def _python_string(lines: list[str], i: int) -> tuple[int, str] | None:
    if i >= len(lines):
        return None
    m = re.match(r'\s*[rRuU]?("""|\'\'\')', lines[i])
    if not m:
        return None
    quote = m.group(1)
    rest = lines[i][m.end():]
    if quote in rest:
        return i + 1, rest.split(quote)[0]
    text = [rest]
    j = i + 1
    while j < len(lines) and quote not in lines[j]:
        text.append(lines[j])
        j += 1
    if j < len(lines):
        text.append(lines[j].split(quote)[0])
    return i + 1, "\n".join(text)


def header_comment(lines: list[str], path: str) -> tuple[int, str] | None:
    """A file's summary: a Python module docstring, or the first comment block at the top of the file, before any
    code, that is not a licence or a generated-file notice."""
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith("#!") or "coding" in lines[i][:30]
                              and lines[i].lstrip().startswith("#")):
        i += 1
    if path.endswith(".py"):
        found = _python_string(lines, i)
        return found if found and not _LICENSE.search(found[1]) else None
    style = _style(path)
    while i < len(lines):
        s = lines[i].strip()
        if not s or s.startswith("<?php") or s.startswith("#pragma once") or s == "'use strict';":
            i += 1
            continue
        if style != "hash" and s.startswith("/*"):
            start = i
            while i < len(lines) and "*/" not in lines[i]:
                i += 1
            block = (start + 1, _block_text(lines[start:i + 1]))
            i += 1
        elif _line_comment(lines[i], style) is not None:
            start = i
            texts = []
            while i < len(lines) and (text := _line_comment(lines[i], style)) is not None:
                texts.append(text)
                i += 1
            block = (start + 1, "\n".join(texts))
        else:
            return None
        if block[1].strip() and not _LICENSE.search(block[1]):
            return block
    return None


# -- sentences ----------------------------------------------------------------------------------------------------

_INLINE = [
    (re.compile(r'<(?:see|seealso|paramref|typeparamref)\s+\w+="([^"]*)"\s*/?>'),
     lambda m: re.sub(r"\{.*\}|\(.*\)", "", m.group(1)).split(".")[-1].split(":")[-1]),
    (re.compile(r"\{@(?:link|linkplain|code|literal)\s+([^}]*)\}"), lambda m: m.group(1).split("#")[-1].strip()),
    (re.compile(r"\{@inheritDoc\}", re.I), lambda m: ""),
    (re.compile(r"</?[A-Za-z][^>\n]{0,200}>"), lambda m: " "),
    (re.compile(r"\[`?([^\]`]+)`?\]\([^)]*\)"), lambda m: m.group(1)),
    (re.compile(r"\[`([^\]`]+)`\]"), lambda m: m.group(1)),
    (re.compile(r"[`*]+"), lambda m: ""),
    (re.compile(r":(?:class|func|meth|attr|mod|obj|data|exc|py:\w+):`?~?([\w.]+)`?"), lambda m: m.group(1)),
    (re.compile(r"&[a-z]+;"), lambda m: " "),
]
_STOP = re.compile(r"^\s*(@\w+|:param|:return|:raises|Args:|Arguments:|Returns?:|Raises:|Parameters|Example|"
                   r"#\s|>>>|\.\.\s|-{3,}|={3,}|\*\s*@)")
_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|approx|resp|incl)\.", re.I)


def first_sentence(text: str) -> str:
    """The first sentence of a comment's prose: inline markup reduced to its words, tags and examples cut."""
    prose = []
    for line in text.splitlines():
        if _STOP.match(line):
            break
        if not line.strip():
            if prose:
                break
            continue
        prose.append(line.strip())
    s = " ".join(prose)
    for pattern, repl in _INLINE:
        s = pattern.sub(repl, s)
    s = _ABBREVIATIONS.sub(lambda m: m.group(1) + "\0", s)
    m = re.search(r"[.!?](\s|$)", s)
    if m:
        s = s[:m.start()]
    return re.sub(r"\s+", " ", s.replace("\0", ".")).strip()


def without_name(sentence: str, names: list[str]) -> str:
    """``sentence`` with each of ``names`` taken out where it stands as a word (and its call or qualified forms)."""
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        sentence = re.sub(rf"(?<![\w.:#])(?:[\w.]+(?:\.|::|#))?{re.escape(name)}(?:\(\)|'s)?(?![\w])", " ",
                          sentence)
    sentence = re.sub(r"\s+([,.;:])", r"\1", re.sub(r"\s+", " ", sentence)).strip()
    return sentence.strip(" ,.;:-'\"")


_STOPWORDS = frozenset("""a an the of to in on for by with and or not no is are be been was were it its this that these
those as at from into if when than then else which who what how can may must should will would does do did has have
had given new all any each some such other one""".split())


def words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning (letters, not the commonest English words)."""
    return [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if w.lower() not in _STOPWORDS]
