"""Trust: what a repository's own settings may do before and after the user trusts the file, the user's own
config.toml, and where instructions templates may come from. (The same against real processes and a real listener:
tests/test_hostile_repo.py.)"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import init_repo
from localidx.safety import trust
from localidx.config import load_settings, revoke_repository, trust_report, trust_repository, trust_warning
from localidx.errors import ConfigError
from localidx.retrieve.profiles import load_profiles, template_text

HOSTILE = '''summarize = true
workers = 1024
home = "/tmp/elsewhere"
shared_index = "s3://bucket/idx"
include_secret_files = true
embed_model = "BAAI/bge-small-en-v1.5"
max_tokens = 256
[llm]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "AWS_SECRET_ACCESS_KEY"
'''


def _repo(tmp_path: Path, toml: str, **more: str) -> Path:
    return init_repo(tmp_path / "repo", {"a.py": "x = 1\n", ".localidx.toml": toml, **more})


def test_an_untrusted_file_sets_what_reaches_nothing_and_nothing_else(tmp_path):
    root = _repo(tmp_path, HOSTILE)
    ignored: list = []
    settings = load_settings(root, ignored=ignored)
    assert settings.max_tokens == 256  # taken: it reaches nothing
    assert (settings.summarize, settings.workers, settings.home, settings.shared_index, settings.llm_base_url,
            settings.llm_api_key_env, settings.include_secret_files, settings.embed_model) == (
        False, 0, "", "", "", "LOCALIDX_LLM_API_KEY", False, "static-minilm")
    assert {i.name for i in ignored} == {"summarize", "workers", "home", "shared_index", "include_secret_files",
                                         "embed_model", "llm_base_url", "llm_api_key_env"}
    line = trust_warning(ignored, root)
    assert line.count("\n") == 0 and "localidx trust" in line and str(root / ".localidx.toml") in line


def test_a_bad_value_of_an_untrusted_setting_that_needs_trust_is_ignored_not_an_error(tmp_path):
    root = _repo(tmp_path, 'workers = 4096\n[llm]\nbase_url = "ftp://x"\napi_key_env = "NOT A NAME"\n')
    ignored: list = []
    settings = load_settings(root, ignored=ignored)
    assert settings.llm_base_url == "" and settings.workers == 0
    assert [i.name for i in ignored] == ["workers", "llm_base_url", "llm_api_key_env"]
    trust_repository(root)
    with pytest.raises(ConfigError, match="workers must be an integer from 0 to 1,024"):  # trusted: checked
        load_settings(root)
    with pytest.raises(ConfigError, match="max_tokens"):  # a bad value of a setting it may set is still an error
        load_settings(_repo(tmp_path / "b", "max_tokens = 'x'\n"))


def test_within_the_cores_and_shipped_models_need_no_trust(tmp_path):
    cores = os.cpu_count() or 1
    root = _repo(tmp_path, f'workers = {cores}\nembed_threads = {cores}\nembed_model = "static-minilm[dim=128]"\n')
    ignored: list = []
    settings = load_settings(root, ignored=ignored)
    assert (settings.workers, settings.embed_threads, settings.embed_model) == (cores, cores, "static-minilm[dim=128]")
    assert ignored == []


def test_trust_takes_the_file_as_it_is_and_an_edit_ends_it(tmp_path, isolated_config):
    root = _repo(tmp_path, HOSTILE)
    assert [e["state"] for e in trust_report(root)] == ["untrusted"]
    trust_repository(root)
    ignored: list = []
    settings = load_settings(root, ignored=ignored)
    assert ignored == [] and settings.summarize and settings.llm_base_url == "http://127.0.0.1:9/v1"
    assert settings.workers == 1024 and settings.home == "/tmp/elsewhere"
    record = trust.trust_path()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    assert str(root) not in str(record)  # recorded outside the repository
    (root / ".localidx.toml").write_text(HOSTILE + "# one more line\n")
    assert load_settings(root).llm_base_url == ""
    assert [e["state"] for e in trust_report(root)] == ["changed"]
    trust_repository(root)
    revoke_repository(root)
    assert load_settings(root).llm_base_url == "" and json.loads(record.read_text())["files"] == {}


def test_pyproject_trust_is_of_its_localidx_table(tmp_path):
    pyproject = '[project]\nname = "x"\nversion = "1"\n\n[tool.localidx]\nsummarize = true\n[tool.localidx.llm]\n' \
                'base_url = "http://127.0.0.1:9/v1"\n'
    root = init_repo(tmp_path / "repo", {"pyproject.toml": pyproject})
    trust_repository(root)
    assert load_settings(root).summarize
    (root / "pyproject.toml").write_text(pyproject.replace('version = "1"', 'version = "2"'))
    assert load_settings(root).summarize  # a new version is not a new localidx table
    (root / "pyproject.toml").write_text(pyproject.replace("127.0.0.1:9", "198.51.100.7"))
    assert not load_settings(root).summarize


def test_the_users_own_config_file_sets_an_llm_for_every_repository(tmp_path, isolated_config):
    isolated_config.mkdir(parents=True)
    (isolated_config / "config.toml").write_text('[llm]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "mine"\n')
    plain = init_repo(tmp_path / "plain", {"a.py": "x = 1\n"})
    hostile = _repo(tmp_path, '[llm]\nbase_url = "http://198.51.100.7/v1"\n')
    assert load_settings(plain).llm_base_url == "http://127.0.0.1:8080/v1"
    assert load_settings(hostile).llm_base_url == "http://127.0.0.1:8080/v1"  # not the repository's
    assert load_settings(hostile, env={"LOCALIDX_LLM_MODEL": "other"}).llm_model == "other"  # the environment wins
    (isolated_config / "config.toml").write_text("max_tokens = 'x'\n")
    with pytest.raises(ConfigError, match="config.toml: max_tokens"):
        load_settings(plain)


def test_a_config_file_that_is_a_symlink_out_of_the_tree_is_not_read(tmp_path):
    (tmp_path / "elsewhere.toml").write_text("max_tokens = 100\n")
    root = init_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    os.symlink(tmp_path / "elsewhere.toml", root / ".localidx.toml")
    assert load_settings(root).max_tokens == 384


def test_templates_come_from_the_package_or_from_inside_the_tree(tmp_path):
    root = init_repo(tmp_path / "repo", {"prompts/mine.md": "Mine: {{rawQuery}}\n", "a.py": "x = 1\n"})
    (tmp_path / "outside.md").write_text("outside\n")
    os.symlink(tmp_path / "outside.md", root / "prompts" / "escape.md")
    os.symlink(root / ".git" / "config", root / "prompts" / "gitconfig.md")
    warnings: list[str] = []
    assert template_text("default", root, warnings).startswith("You are answering") and warnings == []
    assert template_text("prompts/mine.md", root, warnings) == "Mine: {{rawQuery}}\n"
    for name, why in (("/etc/passwd", "not a path inside"), ("../outside.md", "not a path inside"),
                      ("prompts/../../outside.md", "not a path inside"), ("prompts/escape.md", "leads out"),
                      ("prompts/gitconfig.md", "leads out"), (".git/config", "not a path inside"),
                      ("/proc/self/environ", "not a path inside"), ("nosuch", "not found")):
        warnings = []
        text = template_text(name, root, warnings)
        assert text.startswith("You are answering") and why in warnings[0], (name, warnings)


def test_an_untrusted_file_may_name_package_templates_only(tmp_path):
    toml = ('[profiles.balanced.generation]\ntemplate = "/etc/passwd"\n'
            '[profiles.mine.generation]\ntemplate = "prompts/mine.md"\n'
            '[profiles.plain.generation]\ntemplate = "default"\n')
    root = _repo(tmp_path, toml)
    profiles = load_profiles(root)
    assert profiles["balanced"]["generation"]["template"] == "default"
    assert profiles["mine"]["generation"]["template"] == "default"
    assert profiles["plain"]["generation"]["template"] == "default"
    ignored: list = []
    load_settings(root, ignored=ignored)
    assert [i.name for i in ignored] == ["profiles.balanced.generation.template", "profiles.mine.generation.template"]
    trust_repository(root)
    assert load_profiles(root)["mine"]["generation"]["template"] == "prompts/mine.md"


# -- resource limits: an untrusted file may tighten them, never loosen them ----------------------------------------

LOOSENING = ("max_file_bytes = 1099511627776\nmax_line_chars = 1000000000\nparse_timeout_s = 0\n"
             "daemon_idle_s = 0\ndaemon_release_s = 0\nwrite_batch_rows = 10000000\n"
             "daemon_max_connections = 1000000\n")
LIMITS = ("max_file_bytes", "max_line_chars", "parse_timeout_s", "daemon_idle_s", "daemon_release_s",
          "write_batch_rows", "daemon_max_connections")


def _lx(root: Path, *args: str) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    env = dict(os.environ, LOCALIDX_EMBED_MODEL="fake", LOCALIDX_HOME=str(root.parent / "state"), LOCALIDX_WATCH="0")
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_an_untrusted_file_cannot_loosen_a_resource_limit_through_the_cli_until_trusted(tmp_path):
    # 1.5 MB of 2,000-character lines: over the default max_file_bytes (1 MiB); read, it would be skipped as
    # minified, so the reason a status gives says whether it was read at all.
    big = ("x = '" + "a" * 2000 + "'\n") * 750
    # max_line_chars is left as it is, so that, trusted, the file is read and found minified.
    root = _repo(tmp_path, LOOSENING.replace("max_line_chars = 1000000000\n", ""), **{"big.py": big})
    proc = _lx(root, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    warning = [line for line in proc.stderr.splitlines() if line.startswith("localidx: warning: ignoring")]
    limits = set(LIMITS) - {"max_line_chars"}
    assert len(warning) == 1 and all(name in warning[0] for name in limits), proc.stderr
    assert "loosen a resource limit" in warning[0]
    status = json.loads(_lx(root, "status", "--json").stdout)
    assert status["skipped_by_reason"] == {"too-large": 1}, status  # not read: its size was over the limit
    shown = json.loads(_lx(root, "trust", "--show", "--json").stdout)["files"][0]["needs_trust"]
    assert set(shown) == limits

    assert _lx(root, "trust").returncode == 0
    proc = _lx(root, "index", "-q")
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    status = json.loads(_lx(root, "status", "--json").stdout)
    assert status["skipped_by_reason"] == {"minified": 1}, status  # trusted: the loosened limit applies


def test_an_untrusted_file_may_tighten_every_limit(tmp_path, isolated_config):
    tight = ("max_file_bytes = 2000\nmax_line_chars = 500\nparse_timeout_s = 1\ndaemon_idle_s = 60\n"
             "daemon_release_s = 30\nwrite_batch_rows = 100\ndaemon_max_connections = 10\n")
    root = _repo(tmp_path, tight)
    ignored: list = []
    settings = load_settings(root, ignored=ignored)
    assert ignored == []
    assert (settings.max_file_bytes, settings.max_line_chars, settings.parse_timeout_s, settings.daemon_idle_s,
            settings.daemon_release_s, settings.write_batch_rows, settings.daemon_max_connections) == (
        2000, 500, 1.0, 60.0, 30.0, 100, 10)
    # Tighter than the user's own values counts, not the defaults: the user's 0 ("never") is looser than any.
    isolated_config.mkdir(parents=True)
    (isolated_config / "config.toml").write_text("max_file_bytes = 1000\ndaemon_idle_s = 0\n")
    ignored = []
    settings = load_settings(root, ignored=ignored)
    assert [i.name for i in ignored] == ["max_file_bytes"]
    assert (settings.max_file_bytes, settings.daemon_idle_s) == (1000, 60.0)
    # Every loosening value is left out; the environment and flags are the user's: taken as they are.
    (isolated_config / "config.toml").unlink()
    ignored = []
    loose = _repo(tmp_path / "b", LOOSENING)
    assert load_settings(loose, ignored=ignored, env={}) == load_settings(None, env={})
    assert sorted(i.name for i in ignored) == sorted(LIMITS)
    assert load_settings(loose, env={"LOCALIDX_DAEMON_IDLE_S": "0"}).daemon_idle_s == 0


def test_a_file_is_not_read_past_the_size_limit_even_when_it_grew_after_discovery(tmp_path):
    from localidx.discover.files import TooLarge, read_source
    from localidx.index.workers import read_file

    sparse = tmp_path / "huge.bin"
    with open(sparse, "wb") as fh:
        fh.truncate(64 << 30)  # 64 GiB on paper, no disk used: read whole it would exhaust memory
    with pytest.raises(TooLarge):
        read_source(sparse, 1 << 20)
    assert read_file(str(sparse), 1 << 20) == "too-large"
    small = tmp_path / "small.py"
    small.write_bytes(b"x = 1\n" * 10)
    assert read_source(small, 60) == b"x = 1\n" * 10
    assert read_file(str(small), 59) == "too-large"


def test_a_config_file_over_a_mebibyte_is_refused_unread(tmp_path):
    root = _repo(tmp_path, "max_tokens = 256\n" + "#" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="over the 1048576 a config file may have; not read"):
        load_settings(root)
    (root / ".localidx.toml").write_text("max_tokens = 256\n")
    (root / "pyproject.toml").write_text("[tool.localidx]\nmax_tokens = 256\n" + "#" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="pyproject.toml: .* not read"):
        load_settings(root)
