"""The per-user registry of indexes: real repositories indexed with the fake embedder, the CLI as a user runs it.

``conftest.isolated_registry`` points LOCALIDX_REGISTRY at a file of each test's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localidx.config import load_settings
from localidx.index import registry
from localidx.index.indexer import run_index
from localidx.paths import index_paths

AUTH = "def verify_token(token, secret):\n    return sign(token.payload, secret) == token.signature\n"
BILLING = "def invoice_total(lines):\n    return sum(line.amount for line in lines)\n"


def settings_for(root: Path):
    return load_settings(root, {"embed_model": "fake", "home": str(root.parent / f"{root.name}-index")})


def index(root: Path):
    return run_index(root, True, settings_for(root))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake"}
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture
def two_repos(make_repo):
    auth = make_repo({"auth.py": AUTH}, name="auth")
    billing = make_repo({"billing.py": BILLING}, name="billing")
    index(auth)
    index(billing)
    return auth, billing


def test_indexing_registers_each_repository_and_repos_lists_them(two_repos, isolated_registry):
    auth, billing = two_repos
    proc = cli("repos", "--json", cwd=auth)
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    assert listing["registry"] == str(isolated_registry)
    by_name = {e["name"]: e for e in listing["repos"]}
    assert set(by_name) == {"auth", "billing"}
    assert by_name["auth"]["root"] == str(auth.resolve())
    assert by_name["auth"]["index"] == str(index_paths(auth, True, settings_for(auth).home).state)
    assert by_name["billing"]["model"] == "fake-bow-64"
    assert by_name["auth"]["last_indexed_at"] >= by_name["auth"]["registered_at"] > 0

    human = cli("repos", cwd=billing)
    assert human.returncode == 0 and human.stderr == ""
    assert [line.split()[:2] for line in human.stdout.splitlines()] == [["auth", str(auth.resolve())],
                                                                       ["billing", str(billing.resolve())]]


def test_same_directory_names_are_told_apart_and_keep_their_names(tmp_path, make_repo):
    first = make_repo({"a.py": AUTH}, name="one")
    second = make_repo({"b.py": BILLING}, name="two")
    apps = []
    for parent in (first, second):
        app = parent / "nested" / "app"
        shutil.copytree(parent, app, ignore=shutil.ignore_patterns("nested"))
        apps.append(app)
    for app in apps:
        index(app)
    index(apps[0])  # a second run keeps the entry's name
    names = {e.root: e.name for e in registry.entries()}
    assert names == {str(apps[0].resolve()): "app", str(apps[1].resolve()): "app~2"}


def test_an_incremental_run_that_changes_nothing_does_not_rewrite_the_registry(make_repo, isolated_registry):
    root = make_repo({"auth.py": AUTH})
    index(root)
    before = isolated_registry.stat()
    entry = registry.entries()[0]
    stats = index(root)
    assert stats.files_unchanged == 1 and stats.chunks_written == 0
    after = isolated_registry.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    time.sleep(0.01)
    (root / "auth.py").write_text(AUTH + "\n\ndef revoke(token):\n    return None\n")
    index(root)
    assert registry.entries()[0].last_indexed_at > entry.last_indexed_at
    assert registry.entries()[0].registered_at == entry.registered_at


def test_repositories_that_are_gone_are_pruned(two_repos, isolated_registry):
    auth, billing = two_repos
    shutil.rmtree(billing)
    proc = cli("repos", "--json", cwd=auth)
    assert proc.returncode == 0, proc.stderr
    assert [e["name"] for e in json.loads(proc.stdout)["repos"]] == ["auth"]
    assert proc.stderr.strip() == (f"localidx: warning: removed billing from the repository registry: its work tree "
                                   f"{billing.resolve()} is gone")
    assert [e["name"] for e in json.loads(isolated_registry.read_text())["repos"]] == ["auth"]

    shutil.rmtree(auth.parent / "auth-index")  # the index deleted, the work tree still there
    found, warnings = registry.load()
    assert found == [] and "its index under" in warnings[0]


def test_a_corrupt_registry_is_one_warning_and_is_rewritten_by_the_next_index(make_repo, isolated_registry):
    root = make_repo({"auth.py": AUTH})
    index(root)
    isolated_registry.write_text('{"version": 1, "repos": [{"name": ')
    proc = cli("repos", cwd=root)
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[0] == (f"localidx: warning: the repository registry {isolated_registry} is "
                                           f"corrupt; treating it as empty (the next `localidx index` rewrites it)")
    assert "Traceback" not in proc.stderr and proc.stdout == ""

    proc = cli("index", "--quiet", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is corrupt" in proc.stderr  # said once, then rewritten
    assert [e.name for e in registry.entries()] == ["repo"]
    assert json.loads(isolated_registry.read_text())["version"] == registry.FORMAT_VERSION

    isolated_registry.write_text('["not", "a", "registry"]')
    found, warnings = registry.load()
    assert found == [] and "is not a localidx registry" in warnings[0]


REGISTER_MANY = """
import sys
from pathlib import Path
from localidx.index import registry
from localidx.paths import index_paths

base = Path(sys.argv[1])
for n in range(int(sys.argv[2])):
    root = base / f"{base.name}-{n}"
    root.mkdir()
    registry.register(root, index_paths(root, False, str(base / "state")), "fake-bow-64")
"""


def test_concurrent_registrations_from_two_processes_keep_every_entry(tmp_path, make_repo, isolated_registry):
    # Two real indexers at once...
    roots = [make_repo({"auth.py": AUTH}, name="left"), make_repo({"billing.py": BILLING}, name="right")]
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": "fake"}
    procs = [subprocess.Popen([sys.executable, "-m", "localidx", "index", "--quiet"], cwd=root, env=env,
                              stderr=subprocess.PIPE, text=True) for root in roots]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert sorted(e.name for e in registry.entries()) == ["left", "right"]

    # ...and two processes registering as fast as they can.
    count = 40
    bases = [tmp_path / "p", tmp_path / "q"]
    for base in bases:
        base.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", REGISTER_MANY, str(base), str(count)], env=env,
                              stderr=subprocess.PIPE, text=True) for base in bases]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    names = {e["name"] for e in json.loads(isolated_registry.read_text())["repos"]}
    assert names == {"left", "right"} | {f"{b.name}-{n}" for b in bases for n in range(count)}
    assert not [p for p in isolated_registry.parent.iterdir() if p.name.endswith(".tmp")]


def test_open_all_opens_every_index_read_only_with_one_embedder_and_skips_broken_ones(two_repos, make_repo):
    from localidx.retrieve import search

    auth, billing = two_repos
    broken = make_repo({"x.py": AUTH}, name="broken")
    index(broken)
    (broken / ".localidx.toml").write_text("max_tokens = 'many'\n")
    for name in ("auth", "billing", "broken"):
        registry.share(name)

    opened, warnings = registry.open_all(settings_loader=settings_for)
    try:
        assert [name for name, _ in opened] == ["auth", "billing"]
        assert len(warnings) == 1 and warnings[0].startswith("skipped broken (") and "max_tokens" in warnings[0]
        assert opened[0][1].embedder is opened[1][1].embedder
        top = {name: search(idx, "invoice total", k=1)[0].path for name, idx in opened}
        assert top == {"auth": "auth.py", "billing": "billing.py"}
    finally:
        for _, idx in opened:
            idx.close()


def test_repos_remove_by_name_or_path(two_repos):
    auth, billing = two_repos
    proc = cli("repos", "remove", "billing", cwd=auth)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"removed billing ({billing.resolve()}) from the registry")
    assert cli("repos", "remove", ".", cwd=auth).returncode == 0
    assert registry.entries() == []
    proc = cli("repos", "remove", "nothing", cwd=auth)
    assert proc.returncode == 2
    assert proc.stderr == "localidx: error: no registered repository named or at 'nothing' (registered: none)\n"


def test_a_registry_that_cannot_be_written_never_fails_indexing(make_repo, tmp_path, monkeypatch):
    root = make_repo({"auth.py": AUTH})
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("LOCALIDX_REGISTRY", str(blocker / "registry.json"))
    proc = cli("index", "--quiet", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"could not update the repository registry {blocker / 'registry.json'}: ")
    assert proc.stderr.count("\n") == 1


def test_search_in_a_subdirectory_of_an_indexed_directory_outside_git_reads_its_index(tmp_path, isolated_registry,
                                                                                      monkeypatch):
    """Outside git, the indexed directory is the root for its subdirectories, as a work tree's root is inside git."""
    from conftest import write_files

    monkeypatch.setenv("LOCALIDX_HOME", str(tmp_path / "home"))  # outside git the index lives there
    root = tmp_path / "plain"
    write_files(root, {"src/auth/tokens.py": AUTH, "billing.py": BILLING})
    assert cli("index", "--quiet", cwd=root).returncode == 0
    proc = cli("search", "verify token", cwd=root / "src" / "auth")
    assert proc.returncode == 0, proc.stderr
    assert "not indexed" not in proc.stderr and proc.stdout.startswith("tokens.py:1-2  verify_token")  # from here


def test_each_state_home_has_a_registry_of_its_own(make_repo, tmp_path, monkeypatch):
    """Two terminals with two LOCALIDX_HOMEs: each lists its own index, and a home whose index is removed prunes
    only its own entry (one registry for every home listed both and let one home remove the other's)."""
    monkeypatch.delenv(registry.REGISTRY_ENV)
    root = make_repo({"app.py": "def main():\n    return 1\n"})
    homes = {name: tmp_path / name for name in ("first", "second")}

    def lx(home: Path, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "LOCALIDX_HOME": str(home), "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_DAEMON": "never"}
        return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=300)

    for home in homes.values():
        assert lx(home, "index", "-q").returncode == 0
    for home in homes.values():
        listed = json.loads(lx(home, "repos", "--json").stdout)
        assert listed["registry"] == str(home / "registry.json")
        assert [(r["root"], r["index"]) for r in listed["repos"]] == [(str(root.resolve()), str(home))]
    shutil.rmtree(homes["first"])
    assert json.loads(lx(homes["second"], "repos", "--json").stdout)["repos"][0]["index"] == str(homes["second"])
