"""Gold answers of a bug-report question, from the fix commit alone: which files and which functions the fix changed.

Used while writing the bug-report set (``benchmarks/eval/bugreports/*.jsonl``) so that every report's gold is
derived the same way, and by ``check`` to verify a set file against the repositories.

- gold files: the fix commit's changed files that are source code (a language localidx parses) and not tests,
  docs, examples, changelogs or build files (``is_source``). A usable fix changes 1 to 3 of them.
- gold functions: ``path::qualified.symbol`` of the innermost function, method or class (at the parent commit)
  around every line the fix removed or changed; a pure insertion counts for the symbol around the line it follows.
  Lines outside any symbol (module code) give no function.

    .venv/bin/python benchmarks/eval/bugreports/gold.py REPO_DIR FIX_COMMIT          # print the gold as JSON
    .venv/bin/python benchmarks/eval/bugreports/gold.py --check REPO_DIR SET.jsonl   # recompute and compare
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

_TEST_PARTS = re.compile(
    r"(^|/)(tests?|testing|spec|specs|__tests__|test_?data|fixtures?|e2e|benchmarks?|bench|examples?|docs?|"
    r"documentation|samples?|scripts|tools|ci|\.github)(/|$)", re.IGNORECASE)
_TEST_NAMES = re.compile(r"(^test_|_test\.|\.test\.|\.spec\.|_spec\.|^conftest\.py$|Test\.java$|Tests?\.cs$)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def is_source(path: str) -> bool:
    """A file the question's answer may be: code in a language localidx parses, outside tests, docs and examples."""
    from localidx.languages import language_for_path

    name = PurePosixPath(path).name
    if _TEST_PARTS.search(path) or _TEST_NAMES.search(name):
        return False
    return language_for_path(path) is not None


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          errors="replace").stdout


def changed_old_lines(repo: Path, commit: str, path: str) -> set[int]:
    """Lines of ``path`` at the parent that the fix removed or changed (insertions: the line before them)."""
    diff = git(repo, "diff", "-U0", f"{commit}^", commit, "--", path)
    lines: set[int] = set()
    for line in diff.splitlines():
        m = _HUNK.match(line)
        if not m:
            continue
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        if count == 0:
            lines.add(max(start, 1))  # insertion after line `start`
        else:
            lines.update(range(start, start + count))
    return lines


def gold_functions(repo: Path, commit: str, path: str) -> list[str]:
    from localidx.chunk.parse import parse
    from localidx.languages import language_for_path

    spec = language_for_path(path)
    try:
        data = subprocess.run(["git", "-C", str(repo), "show", f"{commit}^:{path}"], check=True,
                              capture_output=True).stdout
    except subprocess.CalledProcessError:
        return []  # the file is new in the fix
    parsed = parse(spec, data, timeout_s=30)
    found: dict[str, None] = {}
    for line in sorted(changed_old_lines(repo, commit, path)):
        around = [s for s in parsed.symbols if s.kind != "module" and s.start_line <= line <= s.end_line]
        if around:
            inner = min(around, key=lambda s: s.end_line - s.start_line)
            found.setdefault(f"{path}::{inner.qualified or inner.name}", None)
    return list(found)


def gold(repo: Path, commit: str) -> dict:
    """{"parent", "gold_files", "gold_functions", "other_files"} of a fix commit."""
    parent = git(repo, "rev-parse", f"{commit}^").strip()
    changed = [p for p in git(repo, "diff", "--name-only", "--no-renames", f"{commit}^", commit).splitlines() if p]
    files = [p for p in changed if is_source(p)]
    functions = [f for p in files for f in gold_functions(repo, commit, p)]
    return {"parent": parent, "gold_files": files, "gold_functions": functions,
            "other_files": [p for p in changed if p not in files]}


def check(repo: Path, set_file: Path) -> int:
    bad = 0
    for n, line in enumerate(set_file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        want = gold(repo, item["fix_commit"])
        for key in ("parent", "gold_files", "gold_functions"):
            if item.get(key) != want[key]:
                bad += 1
                print(f"{set_file}:{n} {item.get('id')}: {key} is {item.get(key)!r}, the fix gives {want[key]!r}")
        if not 1 <= len(want["gold_files"]) <= 3:
            bad += 1
            print(f"{set_file}:{n} {item.get('id')}: the fix changes {len(want['gold_files'])} source files")
    print(f"{set_file}: {'ok' if not bad else f'{bad} problems'}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify a set file: REPO_DIR SET.jsonl")
    parser.add_argument("repo", type=Path)
    parser.add_argument("target", help="a fix commit, or with --check a .jsonl set file")
    args = parser.parse_args()
    if args.check:
        return check(args.repo, Path(args.target))
    print(json.dumps(gold(args.repo, args.target), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
