"""Output that says what is true: labels, scores and messages as a user reads them, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def fake_env(tmp_path: Path, name: str = "home") -> dict:
    return {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / name)}


# -- languages ------------------------------------------------------------------------------------------------


def test_files_no_grammar_reads_are_text_unless_their_type_has_a_name(make_repo, tmp_path):
    root = make_repo({
        "pkg/__init__.py": "def main():\n    return 1\n",
        "pkg/py.typed": "partial\n",
        "VERSION": "1.2.3\n",
        "notes.unknownext": "some notes\n",
        "scripts/run.zsh": "#!/bin/zsh\necho hi\n",
        "Dockerfile": "FROM python:3.12\n",
    })
    proc = run(root, "chunks", "pkg/py.typed", "VERSION", "scripts/run.zsh", "Dockerfile", "--json")
    assert proc.returncode == 0, proc.stderr
    assert {r["path"]: r["language"] for r in json.loads(proc.stdout)} == {
        "pkg/py.typed": "text", "VERSION": "text", "scripts/run.zsh": "zsh", "Dockerfile": "dockerfile"}
    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    status = json.loads(run(root, "status", "--json", env=env).stdout)
    assert status["chunks_by_language"] == {"text": 3, "python": 1, "zsh": 1, "dockerfile": 1}


# -- messages said once ---------------------------------------------------------------------------------------


def test_advice_is_given_once(make_repo, tmp_path):
    root = make_repo({"auth.py": "def verify_token(token):\n    return token.valid\n"})
    env = {**fake_env(tmp_path), "LOCALIDX_LLM_BASE_URL": "", "LOCALIDX_LLM_MODEL": ""}
    for command in ("context", "ask"):
        proc = run(root, command, "where are tokens verified", env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "run `localidx index`" in lines[0], proc.stderr
    assert run(root, "index", "-q", env=env).returncode == 0
    proc = run(root, "ask", "where are tokens verified", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("no LLM is configured") == 1, proc.stderr
    assert "auth.py:1-2" in proc.stdout


# -- scores ---------------------------------------------------------------------------------------------------

SERVICE_AUTH = (
    "def verify_token(token, secret):\n"
    '    """Check a signed session token against the server secret."""\n'
    "    return sign(token.payload, secret) == token.signature\n"
)
SERVICE_BILLING = (
    "def invoice_total(lines):\n"
    '    """Sum the lines of an invoice."""\n'
    "    return sum(line.amount for line in lines)\n"
)
TINY = 'def refresh():\n    """Refresh the token cache."""\n    return None\n'


def test_all_repos_scores_are_comparable_so_a_tiny_repository_cannot_outrank_the_answer(make_repo, tmp_path):
    # "aaa-tiny" sorts first: with scores normalised per repository its only function scored 1.000, tied with the
    # real answer, and won the tie.
    tiny = make_repo({"cache.py": TINY}, name="aaa-tiny")
    service = make_repo({"auth.py": SERVICE_AUTH, "billing.py": SERVICE_BILLING}, name="zz-service")
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": None}
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    for root in (tiny, service):
        for args in (("index", "-q"), ("repos", "share", ".")):  # --all-repos reads shared repositories only
            assert subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env,
                                  capture_output=True, timeout=300).returncode == 0
    question = "verify the session token signature"
    for command in ("search", "context"):
        proc = subprocess.run([sys.executable, "-m", "localidx", command, "--all-repos", question, "--json"],
                              cwd=tiny, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        matches = json.loads(proc.stdout)["matches"]
        assert (matches[0]["repo"], matches[0]["path"]) == ("zz-service", "auth.py"), matches
        tiny_hit = next(m for m in matches if m["repo"] == "aaa-tiny")
        assert tiny_hit["score"] < 0.5 * matches[0]["score"], (command, matches)


def test_a_query_with_no_words_says_so_instead_of_a_perfect_score(make_repo, tmp_path):
    root = make_repo({"auth.py": SERVICE_AUTH})
    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    for command in (("search", '"'), ("search", "--mode", "vector", '"'), ("search", "--all-repos", "?!"),
                    ("context", "''"), ("ask", "--"), ):
        proc = run(root, *command[:-1], "--", command[-1], env=env)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "nothing to search for" in lines[0] and "no letters or digits" in lines[0], lines


# -- merged chunks --------------------------------------------------------------------------------------------

GO_TINY = (
    "package fmtx\n\n"
    "type Config struct{ Width int }\n\n"
    "func (c Config) Format(s string) string { return pad(s, c.Width) }\n\n"
    "func pad(s string, n int) string { return s }\n\n"
    "func Load() Config { return Config{Width: 8} }\n"
)
GO_CALLER = (
    "package fmtx\n\n"
    "// Render lays a report out in columns, formatting every cell with the default config.\n"
    "func Render(cells []string) []string {\n"
    "\tout := make([]string, 0, len(cells))\n"
    "\tcfg := Load()\n"
    "\tfor _, cell := range cells {\n"
    "\t\tout = append(out, cfg.Format(cell))\n"
    "\t}\n"
    "\treturn out\n"
    "}\n"
)


def test_a_merged_chunk_of_tiny_symbols_says_it_holds_all_of_them(make_repo, tmp_path):
    # It was labelled "kind: method, symbol: Format", with Format's signature, though it holds four symbols.
    root = make_repo({"fmt.go": GO_TINY, "render.go": GO_CALLER})
    proc = run(root, "chunks", "fmt.go", "--json")
    assert proc.returncode == 0, proc.stderr
    [group] = json.loads(proc.stdout)
    assert group["symbols"] == ["Config", "Format", "pad", "Load"]
    assert group["kind"] == "group" and group["symbol"] == "Config, Format, pad, Load"
    assert group["title"] == "4 symbols and module code: struct Config, method Format, function pad, function Load"
    assert group["signature"] == "" and group["doc"] == "" and group["name"] == ""
    assert "Symbols: Config, Format, pad, Load" in group["search_text"].split("\n")[0]

    env = fake_env(tmp_path)
    assert run(root, "index", "-q", env=env).returncode == 0
    found = run(root, "search", "pad format", "--kind", "group", env=env)
    assert found.returncode == 0 and found.stdout.startswith("fmt.go:1-9  Config, Format, pad, Load  "), found.stdout
    # Call relations still reach each member of the group, both ways.
    pack = json.loads(run(root, "context", "render report columns", "--json", env=env).stdout)
    by_path = {m["path"]: m for m in pack["matches"]}
    assert "`Load` (fmt.go:1)" in by_path["render.go"]["uses"] and "`Format` (fmt.go:1)" in by_path["render.go"]["uses"]
    assert "`Render` (render.go:3)" in by_path["fmt.go"]["used_by"]
