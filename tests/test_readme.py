"""README.md and .ci/run must agree: CI runs exactly the test command the README gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fenced_after(text: str, marker: str) -> str:
    block = re.search(re.escape(marker) + r"\s*```sh\n(.+?)\n```", text, re.DOTALL)
    assert block, f"no sh block after {marker!r} in README.md"
    return block.group(1).strip()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = _fenced_after(readme, "Run the tests:")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    tail = command.split("&&", 1)[1].strip()  # the venv is created by .ci/run itself
    assert tail in ci, f".ci/run does not run {tail!r}"
