"""The documents under docs/ stay true to the code.

docs/configuration.md's table of settings is checked against the settings' own definitions (``Settings`` and
``RULES`` in ``localidx.config``): a setting added, renamed, retyped, given a new default or a new range without its
row fails here. The links between README.md and docs/ resolve, and the project's documents, docstrings and comments
speak of localidx and its users, not of how the work on it was organised.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from localidx.config import RULES, Settings

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DOC = ROOT / "docs" / "configuration.md"


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _documented_range(kind: str, name: str) -> str:
    rule = RULES[name]
    if kind == "bool":
        return "true or false"
    if kind in ("int", "float"):
        return f"{_number(rule.low)} to {_number(rule.high)}"
    return rule.allowed or "any text"


def _documented_default(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _settings_table(text: str) -> dict[str, list[str]]:
    """setting -> [type, default, range, what it does], from the table under "## Every setting"."""
    section = text.split("## Every setting", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 5 and re.fullmatch(r"`[a-z_]+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _mismatches(rows: dict[str, list[str]]) -> list[str]:
    settings = {f.name: f for f in fields(Settings)}
    if sorted(rows) != sorted(settings):
        return [f"documented {sorted(rows)}, defined {sorted(settings)}"]
    wrong = []
    for name, field in settings.items():
        kind, default, allowed, what = rows[name]
        expected = [field.type, _documented_default(field.default), _documented_range(field.type, name)]
        if [kind, default, allowed] != expected:
            wrong.append(f"{name}: documented {[kind, default, allowed]}, defined {expected}")
        if not what:
            wrong.append(f"{name}: no description")
    return wrong


def test_every_setting_is_documented_with_its_type_default_and_range():
    assert _mismatches(_settings_table(CONFIG_DOC.read_text(encoding="utf-8"))) == []


def test_the_check_notices_a_wrong_default_a_wrong_range_and_a_missing_setting():
    text = CONFIG_DOC.read_text(encoding="utf-8")
    assert _mismatches(_settings_table(text.replace("| `max_tokens` | int | 384 |", "| `max_tokens` | int | 512 |")))
    assert _mismatches(_settings_table(text.replace("| 0 to 49 |", "| 0 to 50 |")))
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `watch` |"))
    assert _mismatches(_settings_table(without))


def test_links_between_the_readme_and_docs_resolve():
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert missing == []


WORK_NOTES = re.compile(r"\b[Ii]ssues? \d+\b|\bback to back\b|\b(?:this|same|one) session\b|\blent to\b|"
                        r"\bthis round\b|\bthe lead\b")


def test_documents_and_code_speak_of_localidx_not_of_the_work_on_it():
    paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "localidx").rglob("*.py"),
             *(ROOT / "localidx" / "data").rglob("*.toml"), *(ROOT / "benchmarks").glob("*.py"),
             *(ROOT / "tests").glob("*.py")]
    found = []
    for path in paths:
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if WORK_NOTES.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert found == []
