"""Names defined inside macro invocations and preprocessor blocks: does a bare name find its declaration line first?

Place in the flow: a benchmark over parse -> chunk -> retrieve; it prints figures and asserts nothing. The truth comes
from a scan of its own, independent of localidx's parser: plain text, line by line.

- Rust: an item-level macro invocation is a line ``name! {`` (or ``path::name! {``) at the indentation of an item,
  ``macro_rules!`` aside (its body is a template); its body runs to the line where the braces opened on that line
  close (counted on the text with strings, chars and comments blanked). A declaration inside it is a line
  ``[pub[(..)]] [unsafe|async|const] struct|enum|union|trait|type|fn NAME``.
- C: a block of ``#if``/``#ifdef``/``#ifndef`` ... ``#endif`` (include guards aside: an ``#ifndef X`` whose next line
  is ``#define X``) holds a definition when a line inside it starts a function definition ``type name(...) {`` at
  column 0, or ``[typedef] struct|union|enum name {``. A function prototype (``type name(...);``) anywhere declares
  the name too, as ``benchmarks/names.py`` counts it: a match holding it is a hit, but it does not qualify a name.

A name qualifies when the whole scan (inside macros or not) defines it at most twice in the repository's source files
(tests, examples, benches, vendored ``deps/`` left out), it has at least four characters, and every definition of it
lies inside such a region; ``--per-repo`` names are sampled with a fixed digest. Each is asked as
``localidx search -k 10 NAME`` asks it (hybrid): hit@1 when the first match is in a defining file and its lines hold
a declaration line; hit@3 likewise within the first three.

    PYTHONPATH=. .venv/bin/python benchmarks/macro_names.py --repo /tmp/tokio --lang rust --work /tmp/mn-tokio
    PYTHONPATH=. .venv/bin/python benchmarks/macro_names.py --repo /tmp/redis --lang c --work /tmp/mn-redis --per-repo 30

``--misses`` lists each miss with what came first; ``--name NAME`` (repeatable) asks those names instead of a
sample. Run the same command with ``PYTHONPATH`` on another checkout of localidx to compare (each ``--work`` holds
one index; use one per checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

SALT = "localidx-macro-names-1"
MIN_LENGTH = 4
SKIP_PARTS = ("tests", "test", "examples", "benches", "deps", "vendor", "fuzz", "tests-build", "tests-integration",
              "stress-test", "benchmarks")

_RUST_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:unsafe|async|const|extern\s+\"C\")\s+)*"
                        r"(?:struct|enum|union|trait|type|fn)\s+([A-Za-z_]\w*)")
_RUST_MACRO = re.compile(r"^(\s*)((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)!\s*\{\s*$")
_RUST_BLANK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\\\'])\'', re.DOTALL)
_C_TYPE = re.compile(r"^(?:typedef\s+)?(?:struct|union|enum)\s+([A-Za-z_]\w*)\s*\{")
_C_FUNC = re.compile(r"^(?!typedef|return|else|if|while|for|switch|#)[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(")
_C_IF = re.compile(r"^\s*#\s*if(?:n?def)?\b")
_C_ENDIF = re.compile(r"^\s*#\s*endif\b")


def _blanked(text: str) -> str:
    """Strings, chars and comments replaced by spaces (newlines kept), so braces inside them are not counted."""
    return _RUST_BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def rust_declarations(text: str) -> list[tuple[str, int, bool]]:
    """(name, line, inside an item-level macro invocation, prototype) for every declaration line of a Rust file."""
    lines = text.split("\n")
    code = _blanked(text).split("\n")
    inside = [False] * len(lines)
    for i, line in enumerate(code):
        opened = _RUST_MACRO.match(line)
        if not opened or opened.group(2).endswith("macro_rules") or len(opened.group(1)) > 4:
            continue
        depth = 0
        for j in range(i, len(code)):
            depth += code[j].count("{") - code[j].count("}")
            if j > i:
                inside[j] = True
            if depth <= 0:
                break
    out = []
    for i, line in enumerate(lines):
        m = _RUST_DECL.match(code[i])
        if m and "!" not in code[i][: m.start(1)]:
            out.append((m.group(1), i + 1, inside[i], False))
    return out


def c_declarations(text: str) -> list[tuple[str, int, bool, bool]]:
    """(name, line, inside an #if block other than an include guard, prototype) for every declaration line of a C
    file: definitions of functions, structs, unions and enums, and function prototypes."""
    lines = text.split("\n")
    depth = 0
    guards: list[bool] = []
    out = []
    for i, line in enumerate(lines):
        if _C_IF.match(line):
            following = lines[i + 1] if i + 1 < len(lines) else ""
            guard = "ifndef" in line and re.match(r"^\s*#\s*define\s+" + re.escape(line.split()[-1]) + r"\b",
                                                  following) is not None
            guards.append(guard)
            depth += 0 if guard else 1
            continue
        if _C_ENDIF.match(line) and guards:
            depth -= 0 if guards.pop() else 1
            continue
        typed = _C_TYPE.match(line)
        if typed:
            out.append((typed.group(1), i + 1, depth > 0, False))
            continue
        function = _C_FUNC.match(line)
        if not function:
            continue
        # A definition when its body opens before a `;` ends it (within the next few lines), else a prototype.
        ahead = "\n".join(lines[i : i + 8])[function.end():]
        ends = [k for k in (ahead.find("{"), ahead.find(";")) if k >= 0]
        if ends:
            out.append((function.group(1), i + 1, depth > 0, min(ends) == ahead.find(";")))
    return out


SCANS = {"rust": ((".rs",), rust_declarations), "c": ((".c", ".h"), c_declarations)}


def _is_source(path: str) -> bool:
    return not any(part in SKIP_PARTS for part in path.split("/")[:-1])


def sample_names(root: Path, lang: str, per_repo: int, chosen: list[str] | None = None) -> list[dict]:
    """The names asked: ``{"query", "targets": [{path, line}]}``, declared only inside macro or #if regions; with
    ``chosen``, those names (wherever declared) instead of a sample."""
    suffixes, scan = SCANS[lang]
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    by_name: dict[str, list[tuple[str, int, bool, bool]]] = defaultdict(list)
    for path in files:
        if not path.endswith(suffixes) or not _is_source(path):
            continue
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        for name, line, inside, prototype in scan(text):
            by_name[name].append((path, line, inside, prototype))
    if chosen:
        return [{"query": name, "targets": [{"path": p, "line": n} for p, n, _, _ in by_name[name]]}
                for name in chosen if by_name.get(name)]
    candidates = []
    for name, decls in by_name.items():
        definitions = [d for d in decls if not d[3]]
        # As benchmarks/names.py counts them: a prototype declares the name too, so it is a target, not a rival.
        if definitions and len(definitions) <= 2 and len(name) >= MIN_LENGTH and all(d[2] for d in definitions):
            candidates.append({"query": name, "targets": [{"path": p, "line": n} for p, n, _, _ in decls]})
    order = sorted(candidates, key=lambda c: hashlib.sha256(f"{SALT}:{root.name}:{c['query']}".encode()).hexdigest())
    return sorted(order[:per_repo], key=lambda c: c["query"])


def hit_rank(ranked: list[tuple[str, int, int]], targets: list[dict]) -> int | None:
    for rank, (path, start, end) in enumerate(ranked, 1):
        if any(path == t["path"] and start <= t["line"] <= end for t in targets):
            return rank
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git checkout (tokio, redis, curl)")
    parser.add_argument("--lang", choices=sorted(SCANS), required=True)
    parser.add_argument("--work", type=Path, required=True, help="the index's home (kept and reused)")
    parser.add_argument("--per-repo", type=int, default=50)
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--name", action="append", default=[], help="ask this name instead of a sample (repeatable)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from localidx.config import load_settings
    from localidx.index.indexer import run_index
    from localidx.retrieve.search import search_response
    from localidx.store.index import open_index

    root = args.repo.resolve()
    names = sample_names(root, args.lang, args.per_repo, args.name)
    settings = load_settings(root, {"home": str(args.work.resolve())})
    started = time.perf_counter()
    run_index(root, True, settings)
    print(f"indexed {root} in {time.perf_counter() - started:.0f}s (model {settings.embed_model})")
    index = open_index(root, True, settings, read_only=True)
    ranks = []
    try:
        for n in names:
            response = search_response(index, n["query"], k=10, mode="hybrid", files=False)
            ranked = [(m["path"], m["start_line"], m["end_line"]) for m in response["matches"]]
            rank = hit_rank(ranked, n["targets"])
            ranks.append(rank)
            if args.misses and rank != 1:
                want = ", ".join(f"{t['path']}:{t['line']}" for t in n["targets"])
                got = ", ".join(f"{p}:{s}-{e}" for p, s, e in ranked[:2])
                print(f"- miss `{n['query']}` wants {want}; rank {rank}; first: {got}")
    finally:
        index.close()
    hit1 = sum(1 for r in ranks if r == 1)
    hit3 = sum(1 for r in ranks if r is not None and r <= 3)
    what = "names asked" if args.name else "names declared inside macro/#if regions"
    print(f"\n{root.name} ({args.lang}): {len(names)} {what}")
    print(f"hit@1 {hit1}/{len(names)} = {hit1 / max(len(names), 1):.3f}   "
          f"hit@3 {hit3}/{len(names)} = {hit3 / max(len(names), 1):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
