"""The generated development set: short questions made from what a repository says about itself, no hand labels.

Three kinds of question, each made from a repository's files at a pinned revision when the set is run (nothing of
those repositories is stored here, only this code):

- ``doc``: the first sentence of a definition's doc comment (or Python docstring), its own name taken out, asks for
  that definition (fields and properties only where those are too few). Definitions come from Universal Ctags,
  not from localidx. The target is the declaration line of a class-like definition (a match must hold it), or a
  function's lines from its declaration to its end.
- ``module``: the first sentence of a source file's header comment (a module docstring, Go's package comment, Rust's
  ``//!`` lines; licence headers skipped), the file's stem taken out, asks for that file.
- ``docs``: a sentence of a Markdown file (outside code blocks; not a changelog) that names a source file by its
  path or unique file name, the name taken out, asks for that file.

Only source files count as targets (tests, examples, benchmarks, vendored code and docs are not:
``ctags.NOT_SOURCE``); a sentence needs three words that carry meaning once the name is out and is cut at 30 words;
a sentence that recurs in the repository, or nearly (two overloads sharing a comment; translation files that differ
by the language's name), is dropped, so each question has one answer. Each repository gives at most ``CAPS``
questions of each kind, a sample fixed by a digest of the question.

The split, fixed before anything was tuned on the set: the repositories of each language are ordered by
sha256(``SALT`` + ":" + owner/name); the first, third, ... are the tuning half, the second, fourth, ... the held-out
half. ``REPOS`` lists the repositories (none of them in semble's benchmark, none kept out by the real-issue eval).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import ctags

SALT = "localidx-shortq-dev-1"
CAPS = {"doc": 30, "module": 10, "docs": 10}
MIN_WORDS = 3  # words that carry meaning (ctags.words), once the name is out
MAX_WORDS = 30

# owner/name, revision, language (the language most of its source is in).
REPOS = [
    ("python-attrs/attrs", "c1dc5dcba16ed827aa6dcad896b41a3afedb4e32", "python"),
    ("pallets/jinja", "5ef70112a1ff19c05324ff889dd30405b1002044", "python"),
    ("spf13/viper", "528f7416c4b56a4948673984b190bf8713f0c3c4", "go"),
    ("labstack/echo", "05489dc1730161df26b72d1ae2a3ba6fb8178fc7", "go"),
    ("rust-random/rand", "bb1262f703ca04e4ce56be78e1dc4e204cd6a998", "rust"),
    ("rayon-rs/rayon", "c4dac9f82ee03f61e855075b668229a9e4d759ad", "rust"),
    ("jhy/jsoup", "46b620860af930eedc193a705eaf7cea5aec89a6", "java"),
    ("apache/commons-io", "d83aeb6f4774aee75d857b29fb6cd89132c9a91b", "java"),
    ("immerjs/immer", "061c2425e1c9dff89e4e4189d42af1b7839dfe0a", "typescript"),
    ("sindresorhus/ky", "3419113b48e034fdcf8fa6bd3be3da7b3d0d758f", "typescript"),
    ("madler/zlib", "d201f04c72b0881220f5ba75ca19fd0e19fa848b", "c"),
    ("lua/lua", "53b41d0cddd80bf33fdc631bdd32e3ba53842b89", "c"),
    ("google/leveldb", "78a352f47ed6c1e9d750545e9b242289185b87e1", "cpp"),
    ("gabime/spdlog", "62302019babd8fdf63c1c6dc4c9faa48d441a7f0", "cpp"),
    ("jekyll/jekyll", "202df571314ba1d18e9fccd81d12aaad4a703c38", "ruby"),
    ("sidekiq/sidekiq", "1bb4aa06e5aa178a114a5e855f9f3d5c24f6c61b", "ruby"),
    ("serilog/serilog", "60935b4d7abad71cf6157b45a10f5c3c65ead527", "csharp"),
    ("App-vNext/Polly", "173d6d1d2e28a4697f1ac1d22da68f77ff19a0c9", "csharp"),
    ("PHPMailer/PHPMailer", "4a489474e7ef8bbf03c1cb219d8939ea76a7fb40", "php"),
    ("symfony/console", "6b099f3306f7c9c2d2786ed736d0026b2903205f", "php"),
]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def split_of(repos: list[tuple[str, str, str]] = REPOS) -> dict[str, str]:
    """owner/name -> "tuning" or "heldout", by the rule in the module docstring."""
    halves = {}
    by_language: dict[str, list[str]] = {}
    for name, _revision, language in repos:
        by_language.setdefault(language, []).append(name)
    for names in by_language.values():
        for n, name in enumerate(sorted(names, key=lambda x: digest(f"{SALT}:{x}"))):
            halves[name] = "tuning" if n % 2 == 0 else "heldout"
    return halves


def _read(root: Path, path: str) -> list[str] | None:
    try:
        data = (root / path).read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096] or len(data) > 1_000_000:
        return None
    return data.decode("utf-8", "replace").splitlines()


_NOISE = re.compile(r"\b(todo|fixme|deprecated|xxx|hack|generated|resharper|eslint|noqa|pylint|nolint|"
                    r"clang-format|nosec|istanbul|prettier-ignore|rubocop)\b|https?:|@ts-|\w+://", re.I)


def _question(sentence: str, names: list[str]) -> str | None:
    query = ctags.without_name(sentence, names)
    found = query.split()
    if len(ctags.words(query)) < MIN_WORDS:
        return None
    if _NOISE.search(query) or ctags._LICENSE.search(query):
        return None
    return " ".join(found[:MAX_WORDS])


def _defines(tag: ctags.Tag, line: str) -> bool:
    """Whether ``tag`` is a definition a question may ask for: a class-like, a function, a type, a field or property;
    a ``member`` only in Python (a method there, a field elsewhere); a JavaScript or TypeScript constant only when it
    holds a function."""
    if tag.kind in ctags.CONTAINER_KINDS or tag.kind in ctags.TYPE_KINDS:
        return True
    if tag.kind == "member":
        return tag.path.endswith(".py")
    if tag.kind in ctags.FUNCTION_KINDS or tag.kind in ctags.FIELD_KINDS:
        return True
    return tag.kind in ("constant", "variable") and Path(tag.path).suffix in (".ts", ".tsx", ".js", ".jsx", ".mjs") \
        and ("=>" in line or "function" in line)


def doc_questions(root: Path, sources: list[str]) -> list[dict]:
    """``doc`` questions: a definition's doc comment -> the definition."""
    out = []
    files: dict[str, list[str] | None] = {}
    for tag in ctags.definitions(root, sources):
        container = tag.kind in ctags.CONTAINER_KINDS
        if tag.path not in files:
            files[tag.path] = _read(root, tag.path)
        lines = files[tag.path]
        if lines is None or tag.line > len(lines):
            continue
        if not _defines(tag, lines[tag.line - 1]):
            continue
        found = ctags.docstring_below(lines, tag.line) if tag.path.endswith(".py") else \
            ctags.comment_above(lines, tag.line, tag.path)
        if not found:
            continue
        query = _question(ctags.first_sentence(found[1]), [tag.name])
        if not query:
            continue
        end = tag.line if container or not tag.end else max(int(tag.end), tag.line)
        out.append({"query": query, "category": "doc", "field": tag.kind in ctags.FIELD_KINDS,
                    "targets": [{"path": tag.path, "start_line": tag.line, "end_line": end}]})
    return out


def module_questions(root: Path, sources: list[str]) -> list[dict]:
    """``module`` questions: a file's header comment -> the file."""
    out = []
    for path in sources:
        if Path(path).name == "package-info.java":  # a package's comment alone: no code of its own to find
            continue
        lines = _read(root, path)
        found = ctags.header_comment(lines or [], path)
        if not found:
            continue
        stem = Path(path).stem
        names = [stem, Path(path).name, Path(path).parent.name if stem in ("__init__", "mod", "lib", "index") else ""]
        sentence = re.sub(r"^\s*Package\s+\w+\s*", "", ctags.first_sentence(found[1]))
        query = _question(sentence, names)
        if query:
            out.append({"query": query, "category": "module", "targets": [{"path": path}]})
    return out


_CHANGELOG = re.compile(r"change|history|news|release|upgrad|migrat|authors|licen", re.I)
_MENTION = re.compile(r"[\w./-]+\.[A-Za-z]+")


def docs_questions(root: Path, tracked: list[str], sources: list[str]) -> list[dict]:
    """``docs`` questions: a Markdown sentence that names a source file -> that file."""
    by_name: dict[str, list[str]] = {}
    for path in sources:
        by_name.setdefault(Path(path).name, []).append(path)
    source_set = set(sources)
    out = []
    for doc in tracked:
        if not doc.lower().endswith((".md", ".markdown")) or _CHANGELOG.search(Path(doc).name):
            continue
        lines = _read(root, doc) or []
        prose, fenced = [], False
        for line in lines:
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if fenced or line.lstrip().startswith(("#", "|", "<", "    ")):
                continue
            if re.match(r"\s*([-*+]|\d+[.)])\s", line) or not line.strip():
                prose.append("\n")  # a list item or a paragraph starts a sentence of its own
            prose.append(re.sub(r"^\s*([-*+]|\d+[.)])\s+", "", line).strip())
        text = re.sub(r"[ \t]+", " ", " ".join(prose))
        for sentence in re.split(r"(?<=[.!?])\s+|\s*\n\s*", text):
            named = []
            for mention in _MENTION.findall(sentence):
                mention = mention.strip("./")
                if mention in source_set:
                    named.append((mention, mention))
                elif len(by_name.get(Path(mention).name, [])) == 1 and "/" not in mention:
                    named.append((mention, by_name[Path(mention).name][0]))
            if not named or len({p for _m, p in named}) > 1:
                continue
            mention, path = named[0]
            cleaned = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", sentence)
            cleaned = cleaned.replace(mention, " ").replace("`", "")
            query = _question(ctags.first_sentence(cleaned) or cleaned, [Path(path).stem])
            if query:
                out.append({"query": query, "category": "docs", "targets": [{"path": path}]})
    # One question per file named: a file named in many sentences (a version file in release notes) would fill the
    # sample otherwise.
    by_target: dict[str, dict] = {}
    for q in sorted(out, key=lambda q: digest(f"{SALT}:{q['query']}")):
        by_target.setdefault(q["targets"][0]["path"], q)
    return list(by_target.values())


def _unique(made: list[dict]) -> list[dict]:
    """The questions no other question repeats, or nearly: two whose meaningful words differ by at most one word on
    each side (one comment copied to every overload, or to every translation file with its language's name) are
    both dropped."""
    keys: Counter = Counter()
    shapes = []
    for q in made:
        found = frozenset(w.lower() for w in ctags.words(q["query"]))
        shape = {found} | {found - {w} for w in found}
        shapes.append(shape)
        keys.update(shape)
    return [q for q, shape in zip(made, shapes) if all(keys[k] == 1 for k in shape)]


def questions(root: Path, repo: str) -> list[dict]:
    """The set's questions for the work tree ``root`` of ``repo`` (owner/name), at most ``CAPS`` per kind."""
    tracked = ctags.tracked_files(root)
    sources = [p for p in tracked if ctags.is_source(p)]
    made = doc_questions(root, sources) + module_questions(root, sources) + docs_questions(root, tracked, sources)
    made = _unique(made)
    out = []
    for kind, cap in CAPS.items():
        # Fields and properties only where functions, types and classes with doc comments are too few.
        of_kind = sorted((q for q in made if q["category"] == kind),
                         key=lambda q: (q.pop("field", False),
                                        digest(f"{SALT}:{repo}:{q['query']}:{q['targets'][0]['path']}")))
        out.extend(sorted(of_kind[:cap], key=lambda q: (q["targets"][0]["path"], q["targets"][0].get("start_line")
                                                        or 0)))
    return out
