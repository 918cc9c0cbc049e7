"""The CLI as a user meets it: real processes in real git repositories; bad input is one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git

APP = (
    '"""Users API."""\n'
    "from flask import Flask\n\n"
    "app = Flask(__name__)\n\n\n"
    '@app.route("/users", methods=["GET"])\n'
    "def list_users():\n"
    '    """Every user, newest first, without their password hashes."""\n'
    "    users = sorted(db.all_users(), key=lambda u: u.created_at, reverse=True)\n"
    "    return [u.public_view() for u in users]\n"
)


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def repo(make_repo):
    return make_repo({
        "app/api.py": APP,
        "README.md": "# Users\n\nA small service.\n",
        "package-lock.json": "{}\n",
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        "config/settings.yaml": "server:\n  port: 8080\n",
        ".env": "API_TOKEN=abc\n",
    })


def test_chunks_human_output_has_jumpable_locations(repo):
    proc = run(repo / "app", "chunks", "api.py")
    assert proc.returncode == 0, proc.stderr
    assert "app/api.py:7-11" in proc.stdout and "function" in proc.stdout and "list_users" in proc.stdout


def test_chunks_json_records_have_the_promised_fields(repo):
    proc = run(repo, "chunks", "app/api.py", "--json")
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    fields = {"id", "path", "language", "kind", "symbol", "title", "parent_id", "level", "start_line", "end_line",
              "text", "search_text", "token_count", "chunk_index", "overlap_lines", "span_hash", "content_hash", "tags"}
    assert records and all(fields <= set(r) for r in records)
    handler = next(r for r in records if r["symbol"] == "list_users")
    assert handler["path"] == "app/api.py"
    assert handler["tags"]["http_path"] == "/users" and handler["tags"]["http_method"] == "GET"


def test_a_file_saved_with_a_byte_order_mark_chunks_like_the_same_file_without_one(repo):
    plain = json.loads(run(repo, "chunks", "app/api.py", "README.md", "--json").stdout)
    for rel in ("app/api.py", "README.md"):
        (repo / rel).write_bytes(b"\xef\xbb\xbf" + (repo / rel).read_bytes())
    proc = run(repo, "chunks", "app/api.py", "README.md", "--json")
    assert proc.returncode == 0, proc.stderr
    marked = json.loads(proc.stdout)
    spans = ("start_byte", "end_byte")
    assert [{k: v for k, v in r.items() if k not in spans} for r in marked] == \
           [{k: v for k, v in r.items() if k not in spans} for r in plain]
    assert not any("\ufeff" in r["text"] for r in marked)
    # Byte spans stay those of the file as it is on disk: three bytes further on.
    assert [r["end_byte"] - 3 for r in marked] == [r["end_byte"] for r in plain]


@pytest.mark.parametrize("args, needle", [
    (("chunks", "missing.py"), "no such file"),
    (("chunks", "app"), "is a directory"),
    (("index", "--dry-run", "nowhere"), "no such file"),
    (("index", "--dry-run", "--include-kinds", "function,bogus"), "unknown kind"),
    (("search", "users", "--lang", "klingon", "--no-daemon"), "unknown language 'klingon': use one of bash, c, cpp"),
    (("context", "users", "--lang", "klingon", "--no-daemon"), "unknown language"),
])
def test_bad_input_is_one_line_and_non_zero(repo, args, needle):
    assert needle in assert_one_line_error(run(repo, *args))


def test_bad_config_is_one_line_and_non_zero(repo):
    (repo / ".localidx.toml").write_text("max_tokens = 'lots'\n")
    line = assert_one_line_error(run(repo, "chunks", "app/api.py"))
    assert "max_tokens" in line
    (repo / ".localidx.toml").write_text("max_tokens = [\n")
    assert "invalid TOML" in assert_one_line_error(run(repo, "chunks", "app/api.py"))


def test_bad_env_value_is_one_line(repo):
    proc = subprocess.run([sys.executable, "-m", "localidx", "chunks", "app/api.py"], cwd=repo, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "LOCALIDX_MAX_TOKENS": "-5", "HOME": str(repo)})
    assert "max_tokens" in assert_one_line_error(proc)


def test_dry_run_reports_files_skips_and_chunks_writing_nothing(repo):
    before = sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts)
    proc = run(repo, "index", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    skipped = {s["path"]: s["reason"] for s in report["skipped_files"]}
    assert skipped == {"package-lock.json": "lock-file", "assets/logo.png": "binary", ".env": "secret-file"}
    assert report["files_processed"] == 3
    assert report["chunks_by_language"]["python"] >= 2
    assert report["chunks_by_kind"]["heading"] == 1 and report["chunks_by_kind"]["summary"] >= 2
    assert report["duration_s"] > 0
    after = sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts)
    assert before == after
    human = run(repo, "index", "--dry-run")
    assert "lock-file" in human.stdout and "package-lock.json" in human.stdout and "nothing written" in human.stdout


def test_dry_run_filters(repo):
    report = json.loads(run(repo, "index", "--dry-run", "--json", "--include-kinds", "function").stdout)
    assert set(report["chunks_by_kind"]) == {"function"}
    report = json.loads(run(repo, "index", "--dry-run", "--json", "--limit-files", "1").stdout)
    assert report["files_processed"] == 1
    report = json.loads(run(repo, "index", "--dry-run", "--json", "app").stdout)
    assert report["files_processed"] == 1 and report["chunks_by_language"] == {"python": report["chunks"]}


def test_dry_run_outside_git_honours_gitignore(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def a():\n    return 1\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("def gen():\n    return 2\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    report = json.loads(run(tmp_path, "index", "--dry-run", "--json").stdout)
    assert report["in_git"] is False
    assert report["files_processed"] == 2  # src/a.py and .gitignore itself


def test_help_and_version_are_fast_paths(repo):
    assert run(repo, "--help").returncode == 0
    proc = run(repo, "--version")
    assert proc.returncode == 0 and "localidx" in proc.stdout


def run_env(cwd: Path, env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_index_json_record_and_status_states(repo, tmp_path):
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    empty = json.loads(run_env(repo, env, "status", "--json").stdout)
    assert empty["state"] == "EMPTY" and empty["chunks"] == 0
    assert not (tmp_path / "home").exists(), "status must not create an index"
    proc = run_env(repo, env, "index", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    for key in ("files_processed", "files_skipped", "chunks_written", "chunks_embedded", "chunks_deleted",
                "duration_s", "rate"):
        assert key in record
    assert record["files_processed"] == 3 and record["files_skipped"] == 3
    assert run_env(repo, env, "index").returncode == 0
    human = run_env(repo, {**env, "LOCALIDX_HOME": str(tmp_path / "other-home")}, "index")  # a cold run, in words
    timing = next(line for line in human.stdout.splitlines() if " s in all " in line)
    # Each figure says what it measures: the whole run's rate and the embedding rate are named as such.
    assert "(chunking and writing " in timing and " chunks/s over the whole run" in timing, timing
    assert " chunks/s while embedding" in timing, timing
    ready = json.loads(run_env(repo, env, "status", "--json").stdout)
    assert ready["state"] == "READY" and ready["chunks"] == record["chunks_written"]
    # The second run found nothing to do: the status still shows the run that did the work.
    assert ready["last_run"]["files_processed"] == 3 and ready["last_run"]["chunks_written"] == record["chunks_written"]
    assert ready["embedding_progress"] == 1.0 and ready["chunks_by_language"]["python"] >= 1
    (repo / "app" / "api.py").write_text(APP + "\n\ndef extra():\n    return 1\n")
    stale = json.loads(run_env(repo, env, "status", "--json").stdout)
    assert stale["state"] == "STALE" and stale["changed_files"] == ["app/api.py"]
    human = run_env(repo, env, "status")
    assert human.stdout.startswith("STALE") and "run `localidx index`" in human.stdout


def test_a_state_dir_inside_the_work_tree_is_never_indexed(repo):
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(repo / ".lxstate")}  # untracked, not ignored
    first = run_env(repo, env, "index", "--json")
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stdout)
    assert record["files_processed"] == 3
    second = json.loads(run_env(repo, env, "index", "--json").stdout)
    assert second["files_processed"] == 0 and second["chunks_written"] == 0, "the run indexed its own writes"
    dry = json.loads(run_env(repo, env, "index", "--dry-run", "--json").stdout)
    assert {"path": ".lxstate", "reason": "localidx-state"} in dry["skipped_files"], dry
    assert not any(s["path"].startswith(".lxstate/") for s in dry["skipped_files"]), "listed once, as its directory"
    status = json.loads(run_env(repo, env, "status", "--json").stdout)
    assert status["state"] == "READY" and not status.get("changed_files")


def test_lang_takes_names_aliases_and_extensions(repo, tmp_path):
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    assert run_env(repo, env, "index", "-q").returncode == 0
    for value in ("python", "Python", "py", ".py", "python3"):
        proc = run_env(repo, env, "search", "list users", "--lang", value, "--json", "--no-daemon")
        assert proc.returncode == 0, (value, proc.stderr)
        assert {m["path"] for m in json.loads(proc.stdout)["matches"]} == {"app/api.py"}, value
    yaml = run_env(repo, env, "search", "port", "--lang", "yml", "--json", "--no-daemon")
    assert {m["language"] for m in json.loads(yaml.stdout)["matches"]} == {"yaml"}


def test_an_index_of_nothing_says_so_instead_of_asking_for_an_index(make_repo, tmp_path):
    root = make_repo({"logo.png": b"\x89PNG\r\n\x1a\n\x00\x00", "package-lock.json": "{}\n"})
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    before = run_env(root, env, "status", "--no-daemon")
    assert before.returncode == 1 and "nothing indexed yet: run `localidx index`" in before.stdout
    assert run_env(root, env, "index", "-q", "--no-daemon").returncode == 0
    after = run_env(root, env, "status", "--no-daemon")
    assert after.returncode == 1 and "run `localidx index`" not in after.stdout, after.stdout
    said = "0 files to index (1 binary, 1 lock-file): nothing here for localidx to search"
    assert said in after.stdout, after.stdout
    assert json.loads(run_env(root, env, "status", "--json", "--no-daemon").stdout)["nothing_to_index"] == said
    plain = run_env(root, env, "search", "anything", "--no-daemon")
    assert plain.returncode == 1 and said in plain.stderr and "not indexed" not in plain.stderr, plain.stderr
    answer = run_env(root, env, "search", "anything", "--json", "--no-daemon")
    assert answer.returncode == 1 and json.loads(answer.stdout)["noResultsReason"] == "NOTHING_TO_INDEX"
    context = run_env(root, env, "context", "anything", "--json", "--no-daemon")
    assert context.returncode == 1 and said in json.loads(context.stdout)["warnings"]


def test_an_empty_repository_once_indexed_says_there_was_nothing_to_index(make_repo, tmp_path):
    root = make_repo({}, name="bare")
    git(root, "commit", "-q", "--allow-empty", "-m", "nothing yet")
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    assert "not indexed yet" in assert_one_line_error(run_env(root, env, "search", "x", "--no-daemon"), code=2)
    assert run_env(root, env, "index", "-q", "--no-daemon").returncode == 0
    search = run_env(root, env, "search", "anything", "--no-daemon")  # no chunk table at all: still an answer
    assert search.returncode == 1 and "0 files to index: nothing here" in search.stderr, search.stderr
    status = run_env(root, env, "status", "--no-daemon")
    assert status.returncode == 1 and "0 files to index" in status.stdout and "run `localidx" not in status.stdout


def test_paths_are_printed_and_globs_read_from_where_you_stand(make_repo, tmp_path):
    root = make_repo({"src/utils/combine.ts": "export function combine(a: number) {\n  return a + 1;\n}\n",
                      "src/store.ts": "export function createStore() {\n  return combine(1);\n}\n"})
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    assert run_env(root, env, "index", "-q").returncode == 0
    src = root / "src"
    scoped = run_env(src, env, "search", "combine", "--path", "utils/**", "--no-daemon")
    assert scoped.returncode == 0 and scoped.stdout.startswith("utils/combine.ts:1-3  combine"), scoped.stdout
    below = run_env(src / "utils", env, "search", "combine", "--path", "*.ts", "--no-daemon")  # any depth below here
    assert [line.split()[0] for line in below.stdout.splitlines() if not line.startswith(" ")] == ["combine.ts:1-3"]
    unscoped = run_env(src / "utils", env, "search", "combine", "--no-daemon")
    assert [line.split()[0] for line in unscoped.stdout.splitlines() if not line.startswith(" ")] == [
        "combine.ts:1-3", "../store.ts:1-3"]
    assert run_env(src, env, "search", "combine", "--path", "/utils/**", "--no-daemon").returncode == 1  # from the root
    answer = json.loads(run_env(src, env, "search", "combine", "--json", "--no-daemon").stdout)
    assert answer["root"] == str(root.resolve()) and answer["matches"][0]["path"] == "src/utils/combine.ts"
    vim = run_env(src, env, "search", "combine", "--vimgrep", "--no-daemon")
    assert vim.stdout.splitlines()[0] == "utils/combine.ts:1:1:export function combine(a: number) {  [combine]"


def test_unloadable_model_is_one_line(repo, tmp_path):
    env = {"LOCALIDX_EMBED_MODEL": "no-such-org/no-such-model", "LOCALIDX_HOME": str(tmp_path / "home"),
           "HF_HUB_OFFLINE": "1", "LOCALIDX_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_env(repo, env, "index")
    line = assert_one_line_error(proc, code=2)  # a configuration the user must fix
    assert "no-such-org/no-such-model" in line


def test_search_from_a_subdirectory_with_json_fields_and_stale_flag(repo, tmp_path):
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    assert "not indexed yet" in assert_one_line_error(run_env(repo / "app", env, "search", "users"), code=2)
    assert run_env(repo, env, "index", "-q").returncode == 0
    proc = run_env(repo / "app", env, "search", "list users", "--json", "-k", "3")
    assert proc.returncode == 0, proc.stderr
    matches = json.loads(proc.stdout)["matches"]
    assert matches[0]["path"] == "app/api.py" and "list_users" in [m["symbol"] for m in matches]
    for key in ("path", "start_line", "end_line", "symbol", "kind", "language", "score", "vector_score",
                "bm25_score", "stale", "text"):
        assert key in matches[0]
    assert matches[0]["stale"] is False
    (repo / "app" / "api.py").write_text(APP.replace("newest first", "oldest first"))
    human = run_env(repo, env, "search", "list users", "-k", "1", "--kind", "function")
    assert human.stdout.startswith("app/api.py:7-11  list_users") and "[stale" in human.stdout
    assert "empty query" in assert_one_line_error(run_env(repo, env, "search", "   "))
    assert "unknown kind" in assert_one_line_error(run_env(repo, env, "search", "x", "--kind", "bogus"))


def test_eval_prints_recall_and_mrr(repo, tmp_path):
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    run_env(repo, env, "index", "-q")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "list users", "gold": ["app/api.py"]}\n'
                       '{"query": "small service readme", "gold": ["README.md"]}\n')
    report = json.loads(run_env(repo, env, "eval", str(queries), "--json").stdout)
    assert report["queries"] == 2 and report["recall@10"] == 1.0 and 0 < report["mrr"] <= 1
    human = run_env(repo, env, "eval", str(queries))
    assert "recall@5" in human.stdout and "mrr" in human.stdout
    queries.write_text('{"query": "x"}\nnot json\n')
    assert "q.jsonl:1" in assert_one_line_error(run_env(repo, env, "eval", str(queries)))
    assert "no such file" in assert_one_line_error(run_env(repo, env, "eval", str(tmp_path / "none.jsonl")))


def test_a_repository_package_named_like_a_module_does_not_shadow_ours(make_repo):
    # The hooks run `python -m localidx` from the top of the work tree; a repository's own tomllib/ (or json/, click/)
    # must not be imported in place of the real one.
    root = make_repo({"tomllib/__init__.py": "raise ImportError('the repository copy was imported')\n",
                      "app.py": "def f():\n    return 1\n"})
    proc = run(root, "chunks", "app.py")
    assert proc.returncode == 0, proc.stderr
    assert "app.py:1-2" in proc.stdout


def test_worker_processes_do_not_import_the_repository_either(make_repo, tmp_path):
    # Indexing starts worker processes (`python -c ...` in the repository's directory) once LanceDB is loaded.
    files = {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(12)}
    files["multiprocessing/__init__.py"] = "raise ImportError('the repository copy was imported')\n"
    root = make_repo(files)
    proc = run_env(root, {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}, "index", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files_processed"] == 13


def test_search_files_ranks_each_file_once_by_its_best_match_in_process_and_through_the_daemon(make_repo, tmp_path):
    """`search --files` answers "which file do I open": one line per file, the file with several matching chunks
    ranked by its best one; the daemon gives the same files as the in-process search."""
    repo = make_repo({
        "billing/invoice.py": "".join(f"def invoice_step_{i}(invoice):\n    \"\"\"Invoice total step {i}.\"\"\"\n"
                                      f"    return invoice.total + {i}\n\n\n" for i in range(6)),
        "billing/tax.py": "def tax_rate(region):\n    \"\"\"The tax rate of a region, for the invoice total.\"\"\"\n"
                          "    return 0.2\n",
        "shipping/label.py": "def print_label(parcel):\n    return parcel.address\n",
    })
    env = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(tmp_path / "home")}
    assert run_env(repo, env, "index", "-q").returncode == 0
    proc = run_env(repo, env, "search", "invoice total", "--files", "--json", "-k", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [f["path"] for f in data["files"]] == ["billing/invoice.py", "billing/tax.py"]
    assert data["files"][0]["matches"] > 1 and len(data["matches"]) == 2
    human = run_env(repo, env, "search", "invoice total", "--files", "-k", "2")
    assert human.returncode == 0 and [line.split()[0] for line in human.stdout.splitlines()] == \
        ["billing/invoice.py", "billing/tax.py"]
    assert run_env(repo, env, "daemon", "start").returncode == 0
    try:
        through = json.loads(run_env(repo, env, "search", "invoice total", "--files", "--json", "-k", "2").stdout)
        assert through["files"] == data["files"]
    finally:
        run_env(repo, env, "daemon", "stop")
