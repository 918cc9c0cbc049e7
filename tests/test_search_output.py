"""What `search`, `context` and `status` print and exit with, as a script sees them: exit 1 when nothing matches
(as grep and rg do), 2 when the index is missing or damaged, a relevance that means something across queries, and
queries given as several unquoted words. Real processes, real git repositories, the shipped static model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FILES = {
    "net/redirects.py": '"""Following HTTP redirects."""\n\n\n'
                        "def follow_redirects(response, max_hops=20):\n"
                        '    """Follow the Location header of a 3xx response until a final response."""\n'
                        "    hops = 0\n"
                        "    while response.is_redirect and hops < max_hops:\n"
                        "        response = response.next()\n"
                        "        hops += 1\n"
                        "    return response\n",
    "billing/invoice.py": '"""Invoices."""\n\n\n'
                          "def invoice_total(lines):\n"
                          '    """Sum of the lines of an invoice, taxes included."""\n'
                          "    return sum(line.amount * (1 + line.tax_rate) for line in lines)\n",
    "auth/tokens.py": "def verify_token(token, secret):\n"
                      '    """Check the signature of a session token."""\n'
                      "    return token.signature == sign(token.body, secret)\n",
}


def cli(root: Path, *args: str, model: str = "static-minilm") -> subprocess.CompletedProcess:
    env = dict(os.environ, LOCALIDX_EMBED_MODEL=model, LOCALIDX_HOME=str(root.parent / "home"), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    from conftest import init_repo

    base = tmp_path_factory.mktemp("searchout")
    root = init_repo(base / "repo", FILES)
    proc = cli(root, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.parametrize("mode", ["hybrid", "vector", "bm25"])
def test_gibberish_matches_nothing_and_exits_1(indexed, mode):
    # Before: three unrelated chunks at score 1.000 and exit 0 (bm25: "no matches" and exit 0).
    proc = cli(indexed, "search", "xyzzyplugh", "--mode", mode)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "" and "no matches" in proc.stderr
    as_json = cli(indexed, "search", "qwzxv blorf", "--mode", mode, "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["matches"] == []


def test_an_unquoted_question_is_one_query_and_its_match_carries_a_similarity(indexed):
    # Before: "Got unexpected extra argument (are)", exit 2.
    proc = cli(indexed, "search", "where", "are", "redirects", "followed", "--json")
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)["matches"][0]
    assert best["path"] == "net/redirects.py" and best["relevant"] is True
    assert 0.0 < best["similarity"] <= 1.0 and best["score"] == 1.0  # score: scaled; similarity: the raw cosine
    plain = cli(indexed, "search", "where", "are", "redirects", "followed")
    assert plain.returncode == 0 and plain.stdout.startswith("net/redirects.py:") and "  1.000  sim 0." in plain.stdout


def test_context_takes_unquoted_words_too(indexed):
    proc = cli(indexed, "context", "how", "is", "an", "invoice", "total", "computed", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["matches"][0]["path"] == "billing/invoice.py"


def test_status_exit_codes_follow_the_state(make_repo, tmp_path):
    root = make_repo({"a.py": "def f():\n    return 1\n"})
    empty = cli(root, "status", model="fake")
    assert empty.returncode == 1 and "EMPTY" in empty.stdout  # before: 0
    assert cli(root, "index", "-q", model="fake").returncode == 0
    assert cli(root, "status", model="fake").returncode == 0
    catalog = next((root.parent / "home" / "worktrees").glob("*/catalog.sqlite"))
    for suffix in ("-wal", "-shm"):
        Path(f"{catalog}{suffix}").unlink(missing_ok=True)
    catalog.write_bytes(b"this is not a database" * 100)
    damaged = cli(root, "status", model="fake")
    assert damaged.returncode == 2 and "DAMAGED" in damaged.stdout  # before: 0
    assert damaged.stdout.count("localidx index") == 1, damaged.stdout  # before: said twice on one line
    assert json.loads(cli(root, "status", "--json", model="fake").stdout)["state"] == "DAMAGED"
    search = cli(root, "search", "f", model="fake")
    assert search.returncode == 2 and len(search.stderr.strip().splitlines()) == 1  # before: 1


@pytest.mark.parametrize("command", ["search", "context", "ask", "status"])
def test_help_documents_the_exit_codes(tmp_path, command):
    proc = subprocess.run([sys.executable, "-m", "localidx", command, "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and "Exit status: 0" in proc.stdout and "3 for a bug" in proc.stdout


# -- the lines shown --------------------------------------------------------------------------------------------


def test_the_lines_that_matched_are_shown_with_numbers_and_indentation(indexed):
    # Before: the chunk's first three lines, indentation stripped, no line numbers.
    proc = cli(indexed, "search", "max_hops", "--mode", "bm25", "--color", "never")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("net/redirects.py:4-10  follow_redirects  ")
    assert lines[1] == "    4: def follow_redirects(response, max_hops=20):"
    assert lines[2] == "    6:     hops = 0"  # "hops", a word of max_hops; the indentation kept
    assert lines[3] == "    7:     while response.is_redirect and hops < max_hops:" and len(lines) == 4
    assert "\x1b[" not in proc.stdout


def test_color_always_highlights_the_terms_and_never_and_no_color_do_not(indexed):
    proc = cli(indexed, "search", "invoice", "total", "--mode", "bm25", "--color", "always")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[1;31minvoice_total\x1b[0m" not in proc.stdout  # the term, not the identifier around it
    assert "\x1b[1;31minvoice\x1b[0m_\x1b[1;31mtotal\x1b[0m" in proc.stdout
    assert proc.stdout.startswith("\x1b[35mbilling/invoice.py:")
    from localidx.interface.highlight import use_color

    assert use_color("auto", is_tty=True, env={}) and not use_color("auto", is_tty=True, env={"NO_COLOR": "1"})
    assert not use_color("auto", is_tty=False, env={}) and not use_color("never", is_tty=True, env={})


def test_a_match_by_meaning_alone_shows_its_first_lines(indexed):
    from localidx.interface.highlight import snippet

    lines = snippet("def f():\n\n    return 1\n    # end\n    pass\n", 10, ["zebra"])
    assert [(line.number, line.text) for line in lines] == [(10, "def f():"), (12, "    return 1"), (13, "    # end")]
