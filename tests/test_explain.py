"""The explain stage (`summarize`) against a real git repository, a real LanceDB and a real HTTP stub of an LLM
(tests/llm_stub.py): every code chunk explained once, the explanation searchable, incremental and resumable runs
(a real SIGKILL included), an unreachable LLM that does not fail indexing, and summarize off changing nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import BILLING_MODULE
from llm_stub import Reply, error_body, serve_llm, unused_url, user_message
from localidx.config import load_settings
from localidx.embed.fake import FakeEmbedder
from localidx.errors import ConfigError
from localidx.index.explain import EXPLAIN_PREFIX
from localidx.index.indexer import run_index, sync_work_tree
from localidx.records import CODE_KINDS
from localidx.retrieve import search
from localidx.store.index import open_index
from localidx.store.lance import embed_key

MODULE = BILLING_MODULE

FAKE_ID = FakeEmbedder.model_id
MARKER = "zanzibarite"  # a word only invoice_total's explanation contains


def explain(request: dict) -> str:
    """The stub's explanation: computed from the chunk it is asked about."""
    sent = user_message(request)
    symbol = re.search(r"^Symbol: (.*)$", sent, re.M).group(1)
    if "def invoice_total" in sent and symbol == "invoice_total":
        return f"Adds up the amounts of every line on a bill using {MARKER} arithmetic."
    return f"Explains {symbol} for the tests."


@pytest.fixture
def repo(make_repo, monkeypatch):
    root = make_repo({
        "billing/invoice.py": MODULE,
        "billing/tax.py": "def vat(amount, rate=0.2):\n    return round(amount * rate, 2)\n",
        "docs/guide.md": "# Billing\n\nHow invoices are totalled.\n",
        "config/app.toml": "[server]\nport = 8080\n",
        "billing/fx.py": "def convert(amount, rate):\n    return amount * rate\n",
        "billing/refund.py": "def refund(invoice):\n    return -invoice.total\n",
        "billing/audit.py": "def audit(ledger):\n    return sorted(ledger.history)\n",
    })
    monkeypatch.setenv("LOCALIDX_EMBED_MODEL", "fake")
    monkeypatch.setenv("LOCALIDX_HOME", str(root.parent / "index-home"))
    for name in ("LOCALIDX_LLM_BASE_URL", "LOCALIDX_LLM_MODEL", "LOCALIDX_SUMMARIZE"):
        monkeypatch.delenv(name, raising=False)
    return root


def settings(root: Path, url: str = "", summarize: bool = True, **extra):
    return load_settings(root, {"llm_base_url": url, "llm_model": "stub-coder", "summarize": summarize,
                                "llm_timeout_s": 10.0, **extra})


def all_rows(root: Path, s) -> list[dict]:
    idx = open_index(root, True, s, read_only=True)
    try:
        table = idx.store.snapshot()
        return [] if table is None else table.search().limit(None).to_arrow().to_pylist()
    finally:
        idx.close()


def code_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] in CODE_KINDS]


def explained(rows: list[dict]) -> list[dict]:
    return [r for r in rows if EXPLAIN_PREFIX in r["search_text"]]


def asked_for(requests: list) -> list[str]:
    return [user_message(r) for r in requests]


def test_every_code_chunk_is_explained_once_and_found_by_bm25(repo):
    with serve_llm(explain) as url:
        s = settings(repo, url)
        stats = run_index(repo, True, s)
        rows = all_rows(repo, s)
        code = code_rows(rows)
        assert code and len(rows) > len(code)  # docs, config and summaries are there too
        distinct = {r["content_hash"] for r in code}
        assert len(url.requests) == len(distinct) == stats.chunks_explained
        assert stats.explain_failures == 0 and stats.explain_pending == 0 and stats.warnings == []
        # Every code chunk carries its explanation in the [META] header; no other chunk has one.
        assert explained(rows) == code
        for row in code:
            header, _, body = row["search_text"].partition("\n" + EXPLAIN_PREFIX)
            assert header.startswith("[META] File: ") and body.split("\n", 1)[1] == row["text"]
            assert row["bm25_text"].startswith(row["search_text"] + "\n")
            # The vector follows the explanation: the row's key is that of its new text, and it has its vector.
            assert row["embed_key"] == embed_key(FAKE_ID, row["search_text"]) and row["vector"] is not None
        assert stats.chunks_pending == 0

        idx = open_index(repo, True, s, read_only=True)
        try:
            [top, *_] = search(idx, MARKER, mode="bm25")
        finally:
            idx.close()
        assert top.path == "billing/invoice.py" and "def invoice_total" in top.text

        again = run_index(repo, True, s)
        assert len(url.requests) == len(distinct) and again.chunks_explained == 0


def test_an_edit_asks_only_for_the_changed_chunk(repo):
    with serve_llm(explain) as url:
        s = settings(repo, url)
        run_index(repo, True, s)
        before = {r["content_hash"] for r in code_rows(all_rows(repo, s))}
        first = len(url.requests)
        path = repo / "billing/invoice.py"
        path.write_text(MODULE.replace('ValueError("insufficient funds")', 'ValueError("not enough money")'))
        stats = run_index(repo, True, s)
        new = [r for r in code_rows(all_rows(repo, s)) if r["content_hash"] not in before]
        asked = asked_for(url.requests[first:])
    assert new and len(asked) == len(new) == stats.chunks_explained
    assert all("not enough money" in text for text in asked)
    assert explained(all_rows(repo, s)) == code_rows(all_rows(repo, s))


def test_a_stopped_run_resumes_without_asking_again(repo):
    with serve_llm(explain) as url:
        s = settings(repo, url)
        idx = open_index(repo, True, s)
        try:
            stats = sync_work_tree(idx, repo, s, should_stop=lambda: len(url.requests) >= 2)
        finally:
            idx.close()
        assert stats.chunks_explained == 2 and stats.explain_pending > 0
        assert len(explained(all_rows(repo, s))) >= 2
        first = asked_for(url.requests)
        resumed = run_index(repo, True, s)
        rest = asked_for(url.requests[2:])
        rows = all_rows(repo, s)
    assert not set(first) & set(rest)
    assert len(first) + len(rest) == len({r["content_hash"] for r in code_rows(rows)})
    assert resumed.explain_pending == 0 and explained(rows) == code_rows(rows)
    assert all(r["vector"] is not None for r in rows)


def test_failures_are_counted_and_stop_the_stage_and_the_next_run_finishes(repo):
    healthy = threading.Event()

    def flaky(request):
        if not healthy.is_set() and len(url.requests) > 2:
            return Reply(status=503, body=error_body("overloaded"))
        return explain(request)

    with serve_llm(flaky) as url:
        s = settings(repo, url)
        stats = run_index(repo, True, s)
        assert stats.chunks_explained == 2 and stats.explain_failures == 3
        assert any("3 failures in a row" in w and "overloaded" in w for w in stats.warnings)
        assert stats.chunks_pending == 0  # indexing itself completed: every row has its vector
        healthy.set()
        again = run_index(repo, True, s)
        rows = all_rows(repo, s)
        distinct = len({r["content_hash"] for r in code_rows(rows)})
    assert again.chunks_explained == distinct - 2 and again.warnings == []
    assert explained(rows) == code_rows(rows)


def test_a_killed_run_resumes_without_asking_again(repo):
    """SIGKILL the indexer (a real process) while the LLM is answering its third request."""
    proc: list[subprocess.Popen] = []

    def killer(request):
        if len(url.requests) == 3:
            proc[0].send_signal(signal.SIGKILL)
            proc[0].wait(timeout=30)
        return explain(request)

    with serve_llm(killer) as url:
        env = dict(os.environ, LOCALIDX_LLM_BASE_URL=url, LOCALIDX_LLM_MODEL="stub-coder", LOCALIDX_SUMMARIZE="1")
        proc.append(subprocess.Popen([sys.executable, "-m", "localidx", "index", "-q"], cwd=repo, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        proc[0].communicate(timeout=120)
        assert proc[0].returncode == -signal.SIGKILL
        killed = asked_for(url.requests)
        assert len(killed) == 3
        s = settings(repo, url)
        stats = run_index(repo, True, s)
        rest = asked_for(url.requests[3:])
        rows = all_rows(repo, s)
    # The first two answers were cached as they arrived; only the one in flight is asked again.
    assert set(killed[:2]).isdisjoint(rest) and killed[2] in rest
    assert len(rest) == stats.chunks_explained == len({r["content_hash"] for r in code_rows(rows)}) - 2
    assert explained(rows) == code_rows(rows) and all(r["vector"] is not None for r in rows)


def test_an_unreachable_llm_does_not_stop_indexing(repo):
    s = settings(repo, unused_url())
    stats = run_index(repo, True, s)
    assert stats.chunks_written > 0 and stats.chunks_pending == 0 and stats.chunks_explained == 0
    assert stats.explain_pending == len(code_rows(all_rows(repo, s)))
    [warning] = stats.warnings
    assert "summarize stopped" in warning and "connection refused" in warning
    rows = all_rows(repo, s)
    assert not explained(rows) and all(r["vector"] is not None for r in rows)
    idx = open_index(repo, True, s, read_only=True)
    try:
        assert search(idx, "invoice total", mode="bm25")
    finally:
        idx.close()
    # The server comes up (on another port: same model, same table): the queued chunks are explained now.
    with serve_llm(explain) as url:
        later = run_index(repo, True, settings(repo, url))
    rows = all_rows(repo, s)
    assert later.chunks_explained == len({r["content_hash"] for r in code_rows(rows)})
    assert explained(rows) == code_rows(rows)


def test_summarize_off_asks_nothing_and_writes_the_same_rows(repo, tmp_path, monkeypatch):
    with serve_llm(explain) as url:
        with_url = settings(repo, url, summarize=False)
        stats = run_index(repo, True, with_url)
        assert url.requests == []
    assert (stats.chunks_explained, stats.explain_failures, stats.explain_pending, stats.warnings) == (0, 0, 0, [])
    rows = all_rows(repo, with_url)
    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "plain-home"))
    plain = load_settings(repo)
    assert plain.llm_base_url == "" and not plain.summarize
    run_index(repo, True, plain)
    expected = all_rows(repo, plain)
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(rows, key=key) == sorted(expected, key=key)
    assert not explained(rows)
    assert all(r["embed_key"] == embed_key(FAKE_ID, r["search_text"]) for r in rows)
    for s in (with_url, plain):
        idx = open_index(repo, True, s, read_only=True)
        assert "_x" not in idx.store.table_name.removesuffix(idx.paths.worktree_key)
        idx.close()


def test_switching_summarize_rebuilds_and_the_cache_answers_again(repo):
    with serve_llm(explain) as url:
        on = settings(repo, url)
        run_index(repo, True, on)
        asked = len(url.requests)
        off = run_index(repo, True, settings(repo, url, summarize=False))
        assert off.rebuilt and not explained(all_rows(repo, settings(repo, url, summarize=False)))
        back = run_index(repo, True, on)
        assert back.rebuilt and back.chunks_explained == 0 and len(url.requests) == asked
        rows = all_rows(repo, on)
        assert explained(rows) == code_rows(rows)
        other_model = run_index(repo, True, settings(repo, url, llm_model="another-coder"))
        assert other_model.rebuilt and other_model.chunks_explained == len({r["content_hash"] for r in code_rows(rows)})


def test_summarize_without_an_endpoint_is_one_config_error(repo):
    with pytest.raises(ConfigError) as info:
        run_index(repo, True, settings(repo, ""))
    assert str(info.value).startswith("summarize needs llm_base_url") and "\n" not in str(info.value)
