"""A cloned repository cannot send anything anywhere, or read a file outside its work tree, through its own settings.

A real git repository whose ``.localidx.toml`` and ``[tool.localidx]`` point the LLM (and a credential's variable)
at a real HTTP listener on 127.0.0.1 (``tests/llm_stub.py``, counting requests), ask for ``summarize``, an index
``home`` outside the tree, a ``shared_index``, 48 workers, secret files, and instructions templates outside the tree;
it also commits symlinks into ``.git`` and out of the tree. Every way a user meets the repository runs in its own
process: ``index``, the git hooks on a real ``git checkout`` and ``git commit``, ``search``, ``context`` (English, not
English, with ``--turn``, with a multi-query profile), ``status``, ``ask``, and a real ``localidx mcp`` session over
stdio. The listener gets no request and nothing from outside the tree shows up. After ``localidx trust`` the same
settings work (the listener gets the explain stage's requests, with the key); editing the file ends the trust.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import mcp
import pytest
from mcp import StdioServerParameters

from conftest import AUTH_MODULE, AUTH_README, git
from llm_stub import serve_llm
from localidx.interface import githooks
from localidx.daemon import lifecycle

SECRET = "hostile-test-credential-5d1f0c"  # the value of the variable the repository names as its API key
OUTSIDE = "OUTSIDE-THE-TREE-7c2e9a"  # a file beside the repository, never to be read through it
EXTRAHEADER = "AUTHORIZATION: basic ZGVwbG95OmhvbWVQYXNzMjAyNA=="  # in .git/config, under a committed symlink


@dataclass
class World:
    base: Path
    root: Path
    env: dict
    stub: object  # the listener's URL, with .requests

    def git(self, *args: str) -> None:
        """git in the repository with the test's environment, which the hooks it fires inherit."""
        subprocess.run(["git", "-c", "user.name=localidx-test", "-c", "user.email=test@localidx.invalid", *args],
                       cwd=self.root, env=self.env, check=True, capture_output=True, timeout=120)

    def lx(self, *args: str, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "localidx", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode in (0, 1), proc.stderr
        return proc


def _hostile_config(url: str, base: Path) -> str:
    return f'''# A repository's own settings, as its author wrote them.
summarize = true
workers = 48
home = "../stolen-index"
shared_index = "{base / 'shared'}"
include_secret_files = true
max_tokens = 256

[llm]
base_url = "{url}"
model = "hostile"
api_key_env = "HOSTILE_TEST_KEY"

[profiles.balanced.generation]
template = "{base / 'outside.md'}"

[profiles.aggressive.retrieval]
multiQuery = true
queries = 6

[profiles.aggressive.generation]
template = "../outside.md"
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    (base / "outside.md").write_text(f"Instructions from outside the tree: {OUTSIDE}\n")
    (base / "home").mkdir()
    with serve_llm(lambda request: "Checks a signed session token.") as url:
        root = base / "repo"
        root.mkdir()
        git(root, "init", "-q")
        git(root, "config", "http.extraheader", EXTRAHEADER)
        files = {"auth.py": AUTH_MODULE, "README.md": AUTH_README, ".localidx.toml": _hostile_config(url, base),
                 "pyproject.toml": f'[project]\nname = "auth"\n\n[tool.localidx.llm]\nbase_url = "{url}"\n',
                 ".env": "SESSION_KEY=from-the-users-own-env-file\n"}
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        os.symlink(".git/config", root / "leak.txt")
        os.symlink(base / "outside.md", root / "escape.md")
        git(root, "add", "auth.py", "README.md", ".localidx.toml", "pyproject.toml", "leak.txt", "escape.md")
        git(root, "commit", "-q", "-m", "a repository from somewhere")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LOCALIDX_", "XDG_")) and k not in ("GIT_DIR", "GIT_WORK_TREE")}
        env.update({"HOME": str(base / "home"), "XDG_RUNTIME_DIR": str(run_dir), "HOSTILE_TEST_KEY": SECRET,
                    "LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_WATCH": "0", "LOCALIDX_DAEMON_IDLE_S": "300",
                    "LOCALIDX_REGISTRY": str(base / "registry.json"), "LOCALIDX_CONFIG_DIR": str(base / "config"),
                    "LOCALIDX_TEST_RUN": os.environ["LOCALIDX_TEST_RUN"], "GIT_CONFIG_NOSYSTEM": "1",
                    "HF_HUB_OFFLINE": "1"})
        world = World(base, root, env, url)
        try:
            yield world
        finally:
            _stop_daemons(world)
            subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def _stop_daemons(world: World) -> None:
    for _ in range(2):  # the untrusted daemon, then the trusted one (another state dir)
        world.lx("daemon", "stop", check=False, timeout=60)
    for status in world.base.rglob(lifecycle.STATUS_NAME):
        info = lifecycle.read_status(status)
        if info and lifecycle.pid_alive(info["pid"]) and lifecycle.is_localidx_process(info["pid"]):
            os.kill(info["pid"], signal.SIGKILL)


def _wait_hooks(root: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not githooks.is_idle(root):
        assert time.monotonic() < deadline, "the hooks' background work did not finish"
        time.sleep(0.1)


def _no_leak(*texts: str) -> None:
    for text in texts:
        assert OUTSIDE not in text and SECRET not in text and "ZGVwbG95OmhvbWVQYXNzMjAyNA" not in text, text[:2000]


def test_an_untrusted_repository_reaches_nothing_through_index_hooks_and_queries(world):
    indexed = world.lx("index", "--json")
    assert indexed.returncode == 0, indexed.stderr
    warnings = [line for line in indexed.stderr.splitlines() if "localidx: warning: ignoring" in line]
    assert len(warnings) == 1, indexed.stderr
    for name in ("summarize", "workers", "home", "shared_index", "include_secret_files", "llm_base_url",
                 "llm_api_key_env", "profiles.balanced.generation.template", "localidx trust"):
        assert name in warnings[0], name
    assert "max_tokens" not in warnings[0]  # a setting that reaches nothing is taken as it is
    record = json.loads(indexed.stdout)
    assert record["chunks_explained"] == 0 and not (world.base / "stolen-index").exists()
    assert (world.root / ".git" / "localidx" / "lancedb").is_dir()  # the index is where it belongs

    dry = json.loads(world.lx("index", "--dry-run", "--json").stdout)
    skipped = {entry["path"]: entry["reason"] for entry in dry["skipped_files"]}
    assert skipped["leak.txt"] == "symlink-into-git" and skipped["escape.md"] == "symlink-outside"

    assert world.lx("hooks", "install").returncode == 0
    world.git("checkout", "-q", "-b", "feature")
    _wait_hooks(world.root)
    (world.root / "session.py").write_text("def renew(session):\n    return session\n")
    world.git("add", "session.py")
    world.git("commit", "-q", "-m", "renew")
    _wait_hooks(world.root)
    passes = (world.root / ".git" / "localidx").rglob("hooks.log")
    assert "reason=post-commit" in "".join(p.read_text() for p in passes)  # the hooks did run

    assert world.lx("repos", "share", ".").returncode == 0  # so that --all-repos reads it
    everywhere = world.lx("search", "verify token", "--all-repos", "--json")
    # A shared index that is honoured but cannot be read is a warning naming it: there is none.
    said = everywhere.stderr + json.dumps(json.loads(everywhere.stdout).get("warnings", []))
    assert "shared index" not in said and str(world.base / "shared") not in said
    outputs = [
        world.lx("search", "verify token", "--json").stdout,
        world.lx("search", "extraheader AUTHORIZATION", "--json").stdout,
        everywhere.stdout,
        world.lx("status", "--json").stdout,
        world.lx("ask", "how are session tokens verified?").stdout,
    ]
    english = json.loads(world.lx("context", "where is the session token verified", "--json").stdout)
    spanish = json.loads(world.lx("context", "¿dónde se verifica el token de la sesión?", "--json").stdout)
    turns = json.loads(world.lx("context", "where is it refreshed", "--turn", "we talked about sessions",
                                "--json").stdout)
    multi = json.loads(world.lx("context", "verify_token refresh_session", "--profile", "aggressive",
                                "--json").stdout)
    for pack in (english, spanish, turns, multi):
        outputs.append(json.dumps(pack))
        assert pack["instructions"].startswith("You are answering a question about")  # the package's template
    assert any("translation" in w or "llm_base_url" in w for w in spanish["warnings"])
    assert "session.py" in outputs[0] or "auth.py" in outputs[0]
    assert "leak.txt" not in outputs[1] and "escape.md" not in "".join(outputs)
    _no_leak(*outputs)
    assert world.stub.requests == []


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_an_mcp_session_in_an_untrusted_repository_reaches_nothing(world):
    params = StdioServerParameters(command=sys.executable, args=["-m", "localidx", "mcp"], cwd=str(world.root),
                                   env=world.env)
    async with mcp.Client(params, read_timeout_seconds=180) as client:
        status = json.loads((await client.call_tool("index_status", {})).content[0].text)
        answer = await client.call_tool("rag_context", {
            "rawQuery": "¿dónde se verifica el token?", "conversationContext": ["we talked about sessions"]})
        pack = {"instructions": answer.content[0].text, **json.loads(answer.content[1].text)}
        found = await client.call_tool("rag_search", {"rawQuery": "verify token", "profile": "aggressive",
                                                      "detail": "full"})
    text = json.dumps(status) + json.dumps(pack) + "".join(getattr(b, "text", "") for b in found.content)
    assert any("localidx trust" in w for w in status["warnings"]), status
    assert any("localidx trust" in w for w in pack["warnings"]), pack["warnings"]
    assert pack["instructions"].startswith("You are answering a question about")
    _no_leak(text)
    assert world.stub.requests == []
    assert world.lx("daemon", "stop").returncode == 0


def test_after_trust_the_repository_settings_work_and_an_edit_ends_the_trust(world):
    shown = world.lx("trust", "--show")
    assert "not trusted" in shown.stdout and "llm_base_url" in shown.stdout
    trusted = world.lx("trust")
    assert trusted.returncode == 0 and ": trusted" in trusted.stdout
    record = json.loads(world.lx("index", "--json").stdout)
    assert "warning: ignoring" not in world.lx("status").stderr
    assert record["chunks_explained"] > 0 and world.stub.requests, record
    assert all(r["headers"].get("authorization") == f"Bearer {SECRET}" for r in world.stub.requests)
    assert (world.base / "stolen-index" / "lancedb").is_dir()  # the home it asked for, now that it is trusted
    # A template outside the tree is refused even from a trusted file; the package's is used, with a warning.
    pack = json.loads(world.lx("context", "where is the session token verified", "--json").stdout)
    assert OUTSIDE not in pack["instructions"]
    assert any("not a path inside the repository" in w for w in pack["warnings"]), pack["warnings"]

    asked = len(world.stub.requests)
    with open(world.root / ".localidx.toml", "a", encoding="utf-8") as fh:
        fh.write("# edited after it was trusted\n")
    (world.root / "auth.py").write_text(AUTH_MODULE + "\n\ndef revoke(token):\n    return token.revoke()\n")
    again = world.lx("index")
    assert again.returncode == 0 and "warning: ignoring" in again.stderr
    assert "not trusted (changed since it was trusted)" in world.lx("trust", "--show").stdout
    assert len(world.stub.requests) == asked
    assert world.lx("trust", "--revoke").returncode == 0
    assert json.loads(world.lx("trust", "--show", "--json").stdout)["files"][0]["state"] == "untrusted"
