"""The symbol benchmark: does a name find its definition? No hand-written questions: the names come from the index.

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. Not part of the test suite.

For each repository it clones (from a bare git directory, e.g. one brought by a mirror, or any path git clones), it
indexes the clone with the configured embedding model (``--model``, default ``static-minilm``) into ``<work>/home``
(incremental: a rerun reuses the index), reads the defined names from the index (chunks of code kinds, source files
only: no tests, docs, examples or built copies), keeps names defined in at most two places, and samples
``--per-repo`` of them with a fixed seed. Each name is asked the way people type it:

- ``bare``       ``Response``
- ``keyword``    ``class Response``, ``def open_dataset``, ``fn parse``, ``func New`` (the language's word for the kind)
- ``qualified``  ``Client.send``, ``serde::Deserialize``, ``Foo#bar`` (the symbol's own qualification, or the
                 module's file name for a top-level name)
- ``call``       ``open_dataset(`` (functions and methods)
- ``folded``     ``opendataset`` (lower case, no separators)

A hit is a match that covers a defining line (the first line of a chunk of that symbol, where the definition
starts). Each shape runs in ``search --mode bm25``, the default ``search`` (hybrid), ``search --files`` (the
defining file's rank) and, for bare names, the ``balanced`` context pack. It prints rank-1 and top-3 rates by
language and by shape, and every miss with ``--misses``.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/symbols.py --work /tmp/symbols \\
        /path/to/mirrors/encode+httpx/repo /path/to/mirrors/gin-gonic+gin/repo ...

Results are cached per (repository commit, localidx code, query, setup) in ``<work>/results.jsonl``: a rerun after
an interruption goes on where it stopped; ``--fresh`` discards them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

SHAPES = ("bare", "keyword", "qualified", "call", "folded")
SETUPS = ("bm25", "hybrid", "files", "context")
TYPE_WORD = {"python": "class", "javascript": "class", "typescript": "class", "tsx": "class", "java": "class",
             "kotlin": "class", "csharp": "class", "cpp": "class", "ruby": "class", "php": "class",
             "go": "type", "rust": "struct", "c": "struct", "swift": "class", "scala": "class", "haskell": "type",
             "elixir": "module", "zig": "struct", "ocaml": "type", "objc": "class", "groovy": "class",
             "powershell": "class", "julia": "struct"}
FUNCTION_WORD = {"python": "def", "javascript": "function", "typescript": "function", "tsx": "function",
                 "go": "func", "rust": "fn", "ruby": "def", "php": "function", "kotlin": "fun", "swift": "func",
                 "scala": "def", "elixir": "def", "lua": "function", "zig": "fn", "bash": "function",
                 "groovy": "def", "powershell": "function", "perl": "sub", "julia": "function"}
MEMBER = {"rust": "::", "cpp": "::", "php": "::", "ruby": "#", "perl": "::"}
FUNCTION_KINDS = ("function", "method", "constructor", "macro")


def clone(source: str, work: Path) -> Path:
    name = Path(source.rstrip("/")).name
    if name in ("repo", ".git"):
        name = Path(source.rstrip("/")).parent.name
    target = work / "repos" / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", source, str(target)], check=True)
    return target


def index(root: Path, env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=root, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def definitions(idx) -> dict[str, list[dict]]:
    """Folded name -> its definitions in source files: {path, line, symbol, kind, language, name}."""
    from localidx.retrieve.transforms import data, fold_name, name_parts, path_role

    table = idx.store.snapshot()
    rows = table.to_arrow().select(["path", "start_line", "end_line", "symbol", "kind", "language"]).to_pylist()
    skip = data().non_definition_kinds
    first: dict[tuple, dict] = {}
    for row in rows:
        if row["kind"] in skip or not row["symbol"] or path_role(row["path"], row["language"] or ""):
            continue
        for symbol in row["symbol"].split(", "):
            parts = name_parts(symbol)
            if not parts:
                continue
            key = (row["path"], symbol)
            if key not in first or row["start_line"] < first[key]["line"]:
                first[key] = {"path": row["path"], "line": row["start_line"], "symbol": symbol, "kind": row["kind"],
                              "language": row["language"] or "", "name": parts[-1]}
    by_name: dict[str, list[dict]] = defaultdict(list)
    for found in first.values():
        by_name[fold_name(found["name"])].append(found)
    return by_name


def sample(by_name: dict[str, list[dict]], count: int, seed: str) -> list[list[dict]]:
    eligible = sorted(name for name, defs in by_name.items()
                      if len(defs) <= 2 and len(name) >= 3 and not defs[0]["name"].startswith("__"))
    rng = random.Random(seed)
    chosen = rng.sample(eligible, min(count, len(eligible)))
    return [by_name[name] for name in chosen]


def queries(defs: list[dict]) -> dict[str, str]:
    """The query of each shape for a name (shapes that do not apply are left out)."""
    from localidx.retrieve.transforms import fold_name, name_parts

    main = defs[0]
    name, language, kind = main["name"], main["language"], main["kind"]
    out = {"bare": name}
    word = FUNCTION_WORD.get(language) if kind in FUNCTION_KINDS else TYPE_WORD.get(language)
    if word:
        out["keyword"] = f"{word} {name}"
    parts = name_parts(main["symbol"])
    if len(parts) > 1:
        out["qualified"] = MEMBER.get(language, ".").join(parts[-2:])
    else:
        stem = Path(main["path"]).stem
        if stem and stem not in ("__init__", "index", "mod", "lib", "main") and stem.isidentifier():
            out["qualified"] = f"{stem}.{name}" if language not in MEMBER else f"{stem}{MEMBER[language]}{name}"
    if kind in FUNCTION_KINDS:
        out["call"] = f"{name}("
    folded = fold_name(name)
    if folded != name:
        out["folded"] = folded
    return out


def rank_of(defs: list[dict], matches: list[dict], files: bool) -> int | None:
    """1-based rank of the first match covering a defining line (files: of the first defining file)."""
    for n, match in enumerate(matches, 1):
        for d in defs:
            if match["path"] != d["path"]:
                continue
            if files or match.get("start_line", 0) <= d["line"] <= match.get("end_line", 0):
                return n
    return None


def ask(idx, setup: str, query: str) -> list[dict]:
    from localidx.retrieve.context import build_for_repository
    from localidx.retrieve.search import search_response

    if setup == "context":
        return build_for_repository(idx, query, profile="balanced")["matches"]
    if setup == "files":
        return search_response(idx, query, files=True, k=10)["files"]
    return search_response(idx, query, k=10, mode=setup)["matches"]


def code_version() -> str:
    import importlib

    digest = hashlib.sha256()
    for name in ("localidx.retrieve.search", "localidx.retrieve.transforms", "localidx.retrieve.rerank"):
        digest.update(Path(importlib.import_module(name).__file__).read_bytes())
    return digest.hexdigest()[:12]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="git repositories to clone (bare directories or paths)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--per-repo", type=int, default=30)
    parser.add_argument("--seed", default="localidx-symbols-1")
    parser.add_argument("--model", default="static-minilm")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--misses", action="store_true", help="print every query whose definition is not first")
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args()
    setups = [s for s in args.setups.split(",") if s]
    bad = [s for s in setups if s not in SETUPS]
    if bad:
        parser.error(f"unknown setup {bad[0]!r} (choose from {', '.join(SETUPS)})")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LOCALIDX_HOME": str(work / "home"), "LOCALIDX_EMBED_MODEL": args.model,
           "LOCALIDX_REGISTRY": str(work / "registry"), "HF_HUB_OFFLINE": "1"}
    os.environ.update(env)
    cache_path = work / "results.jsonl"
    if args.fresh and cache_path.exists():
        cache_path.unlink()
    cache = {}
    if cache_path.exists():
        for line in cache_path.read_text().splitlines():
            item = json.loads(line)
            cache[item["key"]] = item
    version = code_version()

    from localidx.config import load_settings
    from localidx.store.index import open_index

    results = []
    with cache_path.open("a") as out:
        for source in args.sources:
            root = clone(source, work)
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                    check=True).stdout.strip()
            took = index(root, env)
            idx = open_index(root, True, load_settings(root), read_only=True)
            by_name = definitions(idx)
            chosen = sample(by_name, args.per_repo, f"{args.seed}:{root.name}")
            print(f"{root.name} @ {commit[:12]}: {sum(len(v) for v in by_name.values())} source definitions, "
                  f"{len(chosen)} names sampled, index {took:.1f} s", file=sys.stderr)
            for defs in chosen:
                for shape, query in queries(defs).items():
                    for setup in setups:
                        if setup == "context" and shape != "bare":
                            continue
                        key = f"{root.name}|{commit}|{version}|{args.model}|{setup}|{query}"
                        if key not in cache:
                            matches = ask(idx, setup, query)
                            cache[key] = {"key": key, "rank": rank_of(defs, matches, setup == "files"),
                                          "top": [f"{m['path']}:{m.get('start_line', '')}" for m in matches[:3]]}
                            out.write(json.dumps(cache[key]) + "\n")
                            out.flush()
                        results.append({"repo": root.name, "language": defs[0]["language"], "shape": shape,
                                        "setup": setup, "query": query, "rank": cache[key]["rank"],
                                        "top": cache[key]["top"]})
    report(results, setups, args.misses)
    return 0


def report(results: list[dict], setups: list[str], misses: bool) -> None:
    def rates(rows):
        n = len(rows)
        first = sum(1 for r in rows if r["rank"] == 1)
        top3 = sum(1 for r in rows if r["rank"] is not None and r["rank"] <= 3)
        return n, first / n if n else 0.0, top3 / n if n else 0.0

    for group in ("language", "shape"):
        print(f"\nby {group}: n  R@1  R@3 per setup")
        values = sorted({r[group] for r in results})
        print(f"{group:<12}" + "".join(f"{s:>22}" for s in setups))
        for value in [*values, "all"]:
            line = f"{value:<12}"
            for setup in setups:
                rows = [r for r in results if r["setup"] == setup and (value == "all" or r[group] == value)]
                n, first, top3 = rates(rows)
                line += f"{n:>8} {first:6.3f} {top3:6.3f}" if n else f"{'-':>22}"
            print(line)
    if misses:
        print("\nmisses (rank, setup, repo, query, top 3):")
        for r in results:
            if r["rank"] != 1:
                print(f"  {r['rank']}  {r['setup']}  {r['repo']}  {r['query']!r}  {r['top']}")


if __name__ == "__main__":
    sys.exit(main())
