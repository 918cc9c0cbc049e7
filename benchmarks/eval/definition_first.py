"""A C function's bare name: does its definition come before its prototypes?

Place in the flow: a benchmark over retrieve; it prints figures and asserts nothing. In C and C++ a function is
declared in a header (often in a block of a dozen prototypes) or forward-declared at the top of its file, and defined
once with its body. Someone who types the function's name wants the body first; the prototype block is a second
answer. The truth comes from Universal Ctags (``--kinds-C=+p``), not from localidx's parsers.

The names: functions that ctags finds defined exactly once in a source file (no tests, examples, vendored code) and
declared by at least one prototype elsewhere or earlier; ``--names`` of them sampled with a fixed digest. Each is
asked as ``localidx search -k 10 NAME`` asks it, in-process, against the index of the work tree the command runs in
(``localidx index`` it first). Printed: how many came with the definition first, with a prototype first, and with
neither first, and each name whose definition did not come first.

    cd /tmp/jq && localidx index && python benchmarks/eval/definition_first.py --names 30
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "shortq"))

import ctags  # noqa: E402

SALT = "localidx-definition-first-1"
C_FAMILY = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh")


def sample(root: Path, count: int) -> list[dict]:
    """``{"name", "definition": (path, line), "prototypes": [(path, line)]}`` for ``count`` names."""
    sources = [p for p in ctags.tracked_files(root) if p.endswith(C_FAMILY) and ctags.is_source(p)]
    by_name: dict[str, list[ctags.Tag]] = defaultdict(list)
    for tag in ctags.definitions(root, sources, declarations=True):
        if tag.kind in ("function", "prototype"):
            by_name[tag.name].append(tag)
    chosen = []
    for name, tags in by_name.items():
        bodies = [t for t in tags if t.kind == "function"]
        heads = [t for t in tags if t.kind == "prototype"]
        if len(bodies) == 1 and heads and len(name) >= 4:
            chosen.append({"name": name, "definition": (bodies[0].path, bodies[0].line),
                           "prototypes": [(t.path, t.line) for t in heads]})
    chosen.sort(key=lambda c: hashlib.sha256(f"{SALT}:{c['name']}".encode()).hexdigest())
    return sorted(chosen[:count], key=lambda c: c["name"])


def _holds(match: dict, where: tuple[str, int]) -> bool:
    return match["path"] == where[0] and match["start_line"] <= where[1] <= match["end_line"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the indexed work tree (default: here)")
    parser.add_argument("--names", type=int, default=30)
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "bm25", "vector"))
    args = parser.parse_args(argv)
    ctags.require_ctags()

    from localidx.config import load_settings
    from localidx.retrieve.search import search_response
    from localidx.store.index import open_index

    names = sample(args.root.resolve(), args.names)
    root = args.root.resolve()
    index = open_index(root, True, load_settings(root), read_only=True)
    first = {"definition": 0, "prototype": 0, "other": 0}
    late = []
    for item in names:
        matches = search_response(index, item["name"], k=10, mode=args.mode)["matches"]
        top = matches[0] if matches else None
        if top is not None and _holds(top, item["definition"]):
            first["definition"] += 1
        elif top is not None and any(_holds(top, p) for p in item["prototypes"]):
            first["prototype"] += 1
            rank = next((n for n, m in enumerate(matches, 1) if _holds(m, item["definition"])), None)
            late.append(f"  {item['name']}: {top['path']}:{top['start_line']}-{top['end_line']} first, "
                        f"definition at rank {rank}")
        else:
            first["other"] += 1
            rank = next((n for n, m in enumerate(matches, 1) if _holds(m, item["definition"])), None)
            where = f"{top['path']}:{top['start_line']}-{top['end_line']}" if top else "nothing"
            late.append(f"  {item['name']}: {where} first (neither), definition at rank {rank}")
    print(f"{len(names)} names ({args.mode}): definition first {first['definition']}, "
          f"a prototype first {first['prototype']}, something else first {first['other']}")
    print("\n".join(late))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
