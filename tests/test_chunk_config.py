"""Config chunking: the file summary a reader sees first, key-aligned windows, and full line coverage."""

from __future__ import annotations

import pytest

from localidx.text import tokens
from localidx.chunk.config import CONFIG_LANGUAGES, chunk_config, config_language
from localidx.config import Settings

APP_YAML = """\
# Service settings
server:
  host: internal-host-7
  port: 8080

# Where data lives
database:
  url: postgres://db.internal/app
  pool: 5
logging:
  level: info
features:
- search
- "export"
"""

PYPROJECT = '''\
name = "demo"
version.major = 1
notes = """
[not.a.table]
fake = 1
"""

[server]
host = "localhost"

[[bin]]
name = "demo"

[[bin]]
name = "demo-admin"

[tool.demo]
level = 3
'''

PACKAGE_JSON = """\
{
  "name": "demo",
  "scripts": {"build": "tsc", "test": "jest"},
  "dependencies": {
    "left-pad": "1.3.0"
  }
}
"""

SETUP_CFG = """\
; global options
verbose = 1

[metadata]
name = demo

[options]
packages = find:
"""

DOTENV = """\
# local secrets, already redacted
export API_KEY=[REDACTED]
DB_URL="postgres://
NOT_A_KEY=inside the quoted value"
DEBUG=1
"""

PROPERTIES = """\
# Spring
server.port=8080
spring.datasource.url = jdbc:postgresql://db \\
    continued.not.a.key=1
app.name demo
"""


def summary_of(path: str, text: str, language: str) -> str:
    chunks = chunk_config(path, text, language, Settings())
    head = chunks[0]
    assert head.kind == "summary" and head.level == 0
    assert head.title == f"{path} (summary)"
    assert (head.start_line, head.end_line) == (1, len(text.splitlines()))
    return head.text


def test_yaml_summary_lists_top_level_keys_without_values():
    text = summary_of("deploy/app.yaml", APP_YAML, "yaml")
    assert text == "File: deploy/app.yaml\nLanguage: yaml\nTop-level keys: server, database, logging, features"
    assert "internal-host-7" not in text and "8080" not in text


def test_toml_summary_lists_sections_and_ignores_multiline_strings():
    text = summary_of("pyproject.toml", PYPROJECT, "toml")
    assert text.splitlines()[2:] == [
        "Top-level keys: name, version, notes, server, bin, tool",
        "Sections: [server], [[bin]], [tool.demo]",
    ]


def test_json_summary_uses_the_parsed_keys():
    text = summary_of("package.json", PACKAGE_JSON, "json")
    assert text.splitlines()[2] == "Top-level keys: name, scripts, dependencies"
    assert "tsc" not in text


def test_invalid_json_falls_back_to_scanning():
    damaged = '{\n  // comment\n  "a": 1,\n  "b": {"nested": 2},\n  "c": [1, 2,],\n}\n'
    text = summary_of("tsconfig.json", damaged, "json")
    assert text.splitlines()[2] == "Top-level keys: a, b, c"


def test_json_array_summary():
    assert summary_of("list.json", "[1, 2, 3]\n", "json").splitlines()[2] == "Top-level: array of 3 items"


def test_ini_summary():
    text = summary_of("setup.cfg", SETUP_CFG, "ini")
    assert text.splitlines()[1:] == ["Language: ini", "Top-level keys: verbose", "Sections: [metadata], [options]"]


def test_dotenv_summary_names_variables_only():
    text = summary_of(".env", DOTENV, "dotenv")
    assert text.splitlines()[2] == "Top-level keys: API_KEY, DB_URL, DEBUG"
    assert "REDACTED" not in text and "postgres" not in text


def test_properties_summary_skips_continuation_lines():
    text = summary_of("application.properties", PROPERTIES, "properties")
    assert text.splitlines()[2] == "Top-level keys: server.port, spring.datasource.url, app.name"


def test_summary_truncates_after_thirty_names():
    text = "".join(f"key{i:02}: {i}\n" for i in range(35))
    listed = summary_of("many.yaml", text, "yaml").splitlines()[2]
    expected = ", ".join(f"key{i:02}" for i in range(30))
    assert listed == f"Top-level keys: {expected} ... and 5 more"


@pytest.mark.parametrize(
    "path, language",
    [
        ("deploy/app.yaml", "yaml"),
        ("ci.YML", "yaml"),
        ("pyproject.toml", "toml"),
        ("Pipfile", "toml"),
        ("package.json", "json"),
        ("setup.cfg", "ini"),
        ("nginx/site.conf", "ini"),
        ("tox.ini", "ini"),
        ("application.properties", "properties"),
        (".env", "dotenv"),
        ("services/api/.env.local", "dotenv"),
        ("prod.env", "dotenv"),
        ("main.py", None),
        ("README.md", None),
    ],
)
def test_config_language(path, language):
    assert config_language(path) == language


def test_config_languages_table_names_only_known_languages():
    assert set(CONFIG_LANGUAGES.values()) == {"yaml", "toml", "json", "ini", "dotenv", "properties"}


def assert_covers_every_line(chunks, text):
    lines = text.splitlines()
    windows = [c for c in chunks if c.kind == "config"]
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        holders = [c for c in windows if c.start_line <= number <= c.end_line]
        assert holders, f"line {number} not covered"
        single = "".join(c.text for c in holders if c.start_line == c.end_line == number)
        assert any(line.strip() in c.text for c in holders) or line.strip() in single, f"line {number} text missing"


SAMPLES = [
    ("app.yaml", APP_YAML, "yaml"),
    ("pyproject.toml", PYPROJECT, "toml"),
    ("package.json", PACKAGE_JSON, "json"),
    ("setup.cfg", SETUP_CFG, "ini"),
    (".env", DOTENV, "dotenv"),
    ("application.properties", PROPERTIES, "properties"),
]


@pytest.mark.parametrize("path, text, language", SAMPLES)
@pytest.mark.parametrize("max_tokens", [32, 384])
def test_config_chunks_cover_every_line_within_budget(path, text, language, max_tokens):
    settings = Settings(max_tokens=max_tokens, overlap_lines=1)
    chunks = chunk_config(path, text, language, settings)
    assert chunks[0].kind == "summary"
    assert all(c.kind == "config" and c.language == language for c in chunks[1:])
    assert all(tokens.count(c.text) <= max_tokens for c in chunks)
    assert_covers_every_line(chunks, text)


def test_small_files_are_one_window_titled_by_their_keys():
    chunks = chunk_config("app.yaml", APP_YAML, "yaml", Settings())
    assert len(chunks) == 2
    window = chunks[1]
    assert (window.start_line, window.end_line) == (1, 14)
    assert window.title == "server, database, logging and 1 more"
    assert window.symbol == "server"


def test_windows_split_at_top_level_keys_with_comments_attached():
    chunks = chunk_config("app.yaml", APP_YAML, "yaml", Settings(max_tokens=32))
    windows = [(c.start_line, c.end_line, c.title, c.symbol) for c in chunks[1:]]
    assert windows == [
        (1, 4, "server", "server"),
        (6, 11, "database, logging", "database"),
        (12, 14, "features", "features"),
    ]


def test_toml_windows_follow_sections():
    chunks = chunk_config("pyproject.toml", PYPROJECT, "toml", Settings(max_tokens=32))
    starts = {c.start_line for c in chunks[1:]}
    assert starts <= {1, 2, 3, 8, 11, 14, 17}
    assert not any(c.start_line in (4, 5) for c in chunks[1:])
    assert any(c.symbol == "tool.demo" for c in chunks)


def test_oversize_section_is_split_with_overlap():
    body = "".join(f"  option_{i}: value number {i} for the service\n" for i in range(120))
    text = f"small: 1\nservice:\n{body}tail: 2\n"
    settings = Settings(max_tokens=100, overlap_lines=3)
    chunks = chunk_config("big.yaml", text, "yaml", settings)
    parts = [c for c in chunks if c.symbol == "service"]
    assert len(parts) > 3
    assert [p.title for p in parts] == [f"service (part {i + 1})" for i in range(len(parts))]
    assert [p.chunk_index for p in parts] == list(range(len(parts)))
    assert parts[0].start_line == 2 and parts[-1].end_line == 122
    for prev, part in zip(parts, parts[1:]):
        assert part.overlap_lines == 3
        assert part.start_line == prev.end_line - 2
    assert all(tokens.count(c.text) <= settings.max_tokens for c in chunks)
    assert [c.title for c in chunks if c.symbol != "service"] == ["big.yaml (summary)", "small", "tail"]
    assert_covers_every_line(chunks, text)


def test_a_minified_json_line_is_cut_by_characters():
    text = "{" + ", ".join(f'"key{i}": "value {i}"' for i in range(2000)) + "}"
    settings = Settings(max_tokens=200)
    chunks = chunk_config("bundle.json", text, "json", settings)
    windows = chunks[1:]
    assert len(windows) > 5
    assert all(c.start_line == c.end_line == 1 for c in windows)
    assert "".join(c.text for c in windows) == text
    assert all(tokens.count(c.text) <= settings.max_tokens for c in chunks)
    assert chunks[0].text.splitlines()[2].endswith("... and 1970 more")


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n"])
def test_empty_config_has_no_chunks(text):
    assert chunk_config("empty.yaml", text, "yaml", Settings()) == []


def test_unknown_language_is_an_error():
    with pytest.raises(ValueError):
        chunk_config("x.xml", "<a/>", "xml", Settings())
