"""The MCP server as an MCP client meets it: the SDK's own client talking to a real ``localidx mcp`` subprocess over
stdio, in real git repositories indexed with the fake embedder, through a real daemon.

The repositories are indexed once per module; the daemon the first tool call starts is shared by the tests and
stopped (killed if it will not go) at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import mcp
import pytest
from mcp import StdioServerParameters

from conftest import AUTH_MODULE, AUTH_README, git
from localidx.config import load_settings
from localidx.daemon import lifecycle
from localidx.records import KINDS

AUTH = AUTH_MODULE
README = AUTH_README
BILLING = (
    "def invoice_total(lines):\n"
    '    """The sum of an invoice\'s line amounts, tax included."""\n'
    "    return sum(line.amount * (1 + line.tax_rate) for line in lines)\n"
)
TOOLS = {"rag_search", "rag_search_simple", "rag_context", "index_status", "rag_search_global"}
FILTERS = {"rawQuery", "profile", "conversationContext", "language", "path", "kind"}
RESPONSE = {"matches", "rerankApplied", "contextMissing", "noResults", "noResultsReason", "appliedModules", "warnings",
            "profile", "query", "subQueries", "stats"}  # detail "full": all but the prompt built from the matches
BRIEF = {"rawQuery", "matches", "warnings", "noResults", "noResultsReason", "profile", "detail"}
CITATION = re.compile(r"^[\w./-]+:\d+-\d+$")
CALL_TIMEOUT_S = 120.0


@dataclass
class World:
    alpha: Path  # auth.py, README.md
    beta: Path  # billing.py
    broken: Path  # a .localidx.toml no Settings can be made from
    env: dict


def _make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    git(root, "init", "-q")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def _run(env: dict, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcp")
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))  # short: AF_UNIX paths stay under 104 bytes
    env = {name: value for name, value in os.environ.items()
           if name not in (lifecycle.SOCK_ENV, lifecycle.FAKE_VERSION_ENV, "LOCALIDX_DEBUG")}
    env.update({"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(base / "home"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_DAEMON_IDLE_S": "300", "XDG_RUNTIME_DIR": str(run_dir), "HF_HUB_OFFLINE": "1",
                "LOCALIDX_REGISTRY": str(base / "registry.json"), "GIT_CONFIG_NOSYSTEM": "1"})
    alpha = _make_repo(base / "alpha", {"auth.py": AUTH, "README.md": README})
    beta = _make_repo(base / "beta", {"billing.py": BILLING})
    broken = _make_repo(base / "broken", {"x.py": AUTH, ".localidx.toml": "max_tokens = 'many'\n"})
    for root in (alpha, beta):
        proc = _run(env, root, "index", "--quiet")
        assert proc.returncode == 0, proc.stderr
        proc = _run(env, root, "repos", "share", ".")  # rag_search_global reads shared repositories only
        assert proc.returncode == 0, proc.stderr
    try:
        yield World(alpha, beta, broken, env)
    finally:
        for root in (alpha, beta):
            paths = lifecycle.daemon_paths(root, True, load_settings(root, env=env))
            status = lifecycle.read_status(paths.status)
            try:
                _run(env, root, "daemon", "stop", timeout=60)
            except subprocess.TimeoutExpired:
                pass
            if status and lifecycle.pid_alive(status["pid"]):
                os.kill(status["pid"], signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def server(world: World, cwd: Path | None = None, *args: str) -> mcp.Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "localidx", "mcp", *args],
                                   cwd=str(cwd or world.alpha), env=world.env)
    return mcp.Client(params, read_timeout_seconds=CALL_TIMEOUT_S)


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def ok(client: mcp.Client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is None and len(result.content) == 1  # one compact JSON text, said once
    return json.loads(text_of(result))


async def context_of(client: mcp.Client, arguments: dict) -> tuple[str, dict, int]:
    """rag_context's (instructions, the JSON line after them, the cl100k tokens of the whole answer)."""
    from localidx.text.tokens import count

    result = await client.call_tool("rag_context", arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is None and len(result.content) == 2
    instructions, meta = (block.text for block in result.content)
    return instructions, json.loads(meta), count(instructions) + count(meta)


async def fails(client: mcp.Client, tool: str, arguments: dict) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text_of(result)


@pytest.mark.anyio
async def test_tools_are_listed_with_closed_inputs_that_take_profiles_not_tuning_values(world):
    async with server(world) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            schema = tool.input_schema
            assert schema["additionalProperties"] is False, tool.name
            assert set(schema["properties"]) <= FILTERS | {"detail", "maxTokens"}, tool.name
            assert tool.annotations.read_only_hint is True and tool.description
            assert tool.output_schema is None, tool.name  # text alone: no structured copy to pay for twice
        for name in ("rag_search", "rag_context", "rag_search_global"):
            schema = tools[name].input_schema
            extra = {"maxTokens"} if name == "rag_context" else {"detail"}
            assert set(schema["properties"]) == FILTERS | extra and schema["required"] == ["rawQuery"]
            assert schema["properties"]["kind"]["anyOf"][0]["enum"] == list(KINDS)
        assert set(tools["rag_search_simple"].input_schema["properties"]) == {"rawQuery", "detail"}
        assert tools["index_status"].input_schema["properties"] == {}

        message = await fails(client, "rag_search", {"rawQuery": "verify token", "topK": 50})
        assert "topK" in message and "Extra inputs are not permitted" in message
        message = await fails(client, "rag_search_simple", {"rawQuery": "verify token", "maxTokens": 9000})
        assert "maxTokens" in message


@pytest.mark.anyio
async def test_rag_search_finds_the_right_file_through_the_daemon_and_applies_filters(world):
    async with server(world) as client:
        found = await ok(client, "rag_search", {"rawQuery": "where is the session token signature verified?",
                                                "detail": "full"})
        assert set(found) >= RESPONSE and not set(found) & {"augmentedPrompt", "instructions"}
        assert found["matches"][0]["path"] == "auth.py"
        assert "verify_token" in found["matches"][0]["text"]
        assert "profile:balanced" in found["appliedModules"] and found["noResults"] is False

        docs = await ok(client, "rag_search", {"rawQuery": "tokens verified secret", "language": "markdown"})
        assert docs["matches"] and {m["path"] for m in docs["matches"]} == {"README.md"}
        code = await ok(client, "rag_search", {"rawQuery": "refresh the session expiry", "kind": "function",
                                               "path": "*.py", "profile": "balanced",
                                               "conversationContext": ["We are looking at auth.py."]})
        assert code["matches"] and all(m["path"] == "auth.py" for m in code["matches"])
        assert code["profile"] == "balanced"

        simple = await ok(client, "rag_search_simple", {"rawQuery": "refresh session expiry"})
        assert set(simple) == BRIEF and simple["matches"][0]["path"] == "auth.py"


@pytest.mark.anyio
async def test_rag_context_is_a_pack_to_paste_that_cites_path_and_lines_within_its_budget(world):
    # Before: the prompt twice (augmentedPrompt, and inside instructions), and the whole answer again as structured
    # content: four copies of the code, about 10k tokens a call.
    async with server(world) as client:
        instructions, meta, tokens = await context_of(client, {"rawQuery": "How is a session token verified?"})
        small = await context_of(client, {"rawQuery": "How is a session token verified?", "maxTokens": 200})
        message = await fails(client, "rag_context", {"rawQuery": "token", "maxTokens": 100})
    assert set(meta) == {"noResults", "noResultsReason", "warnings", "promptTokens", "maxTokens"}
    assert meta["noResults"] is False and meta["noResultsReason"] is None and meta["maxTokens"] == 3000
    assert "How is a session token verified?" in instructions and "def verify_token" in instructions
    citations = re.findall(r"^\[\d+\] (\S+)", instructions, re.M)
    assert citations and citations[0].startswith("auth.py:") and all(CITATION.match(c) for c in citations)
    assert instructions.count("def verify_token") == 1  # said once
    assert instructions.startswith("You are answering a question about the alpha repository.")
    assert tokens <= 1.1 * 3000
    instructions, meta, tokens = small
    assert meta["promptTokens"] <= 200 and tokens <= 1.1 * 200 + 30 and "[1] auth.py:" in instructions
    assert "maxTokens" in message and "greater than or equal to 200" in message


@pytest.mark.anyio
async def test_index_status_reports_the_repository_the_server_was_started_for(world, tmp_path):
    async with server(world) as client:
        status = await ok(client, "index_status", {})
    assert status["state"] == "READY" and status["files"] == 2 and status["root"] == str(world.alpha)
    assert status["daemon"]["pid"] > 0

    async with server(world, tmp_path, "--repo", str(world.beta)) as client:  # started outside any repository
        status = await ok(client, "index_status", {})
    assert status["root"] == str(world.beta) and status["files"] == 1


@pytest.mark.anyio
async def test_invalid_inputs_are_tool_errors_and_the_server_keeps_answering(world):
    async with server(world) as client:
        message = await fails(client, "rag_search", {"rawQuery": ""})
        assert "rawQuery" in message and "at least 1 character" in message
        message = await fails(client, "rag_context", {})
        assert "rawQuery" in message and "Field required" in message
        message = await fails(client, "rag_search", {"rawQuery": "verify token", "kind": "gizmo"})
        assert "kind" in message and "'function'" in message
        message = await fails(client, "rag_search", {"rawQuery": "verify token", "profile": "no-such-profile"})
        assert "no-such-profile" in message and "\n" not in message  # the daemon's usage error, one line
        message = await fails(client, "no_such_tool", {})
        assert "no_such_tool" in message

        found = await ok(client, "rag_search_simple", {"rawQuery": "verify_token signature"})
    assert found["matches"][0]["path"] == "auth.py"


@pytest.mark.anyio
async def test_a_repository_that_cannot_be_served_gives_one_line_errors_not_a_dead_server(world):
    async with server(world, world.broken) as client:
        for tool, arguments in (("index_status", {}), ("rag_search", {"rawQuery": "verify token"})):
            message = await fails(client, tool, arguments)
            assert message.startswith(f"Error executing tool {tool}: ")
            assert "max_tokens" in message and "\n" not in message
        assert set(t.name for t in (await client.list_tools()).tools) == TOOLS


@pytest.mark.anyio
async def test_rag_search_global_labels_each_match_with_its_repository(world):
    async with server(world, world.beta) as client:
        found = await ok(client, "rag_search_global", {"rawQuery": "verify_token invoice_total"})
        full = await ok(client, "rag_search_global", {"rawQuery": "verify_token invoice_total", "detail": "full"})
    # Brief by default, as rag_search (before: the whole response, prompt included, 61 KB on a real machine).
    assert set(found) == BRIEF and all("text" not in m for m in found["matches"])
    repos = {m["repo"]: m["path"] for m in found["matches"]}
    assert repos.get("alpha") in ("auth.py", "README.md") and repos.get("beta") == "billing.py"
    assert set(full) >= RESPONSE and not set(full) & {"augmentedPrompt", "instructions"}
    assert {m["repo"] for m in full["matches"]} == {"alpha", "beta"}


PROBE = """
import asyncio, sys
from pathlib import Path
import mcp
from localidx.interface.mcp_server import create_server

async def main():
    async with mcp.Client(create_server(Path.cwd(), True)) as client:
        for tool, arguments in (("rag_search", {"rawQuery": "verify token"}), ("rag_context", {"rawQuery": "token"}),
                                ("index_status", {})):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
    heavy = [name for name in ("lancedb", "fastembed", "onnxruntime", "pyarrow", "tree_sitter") if name in sys.modules]
    print("HEAVY=" + ",".join(heavy))

asyncio.run(main())
"""


def test_the_per_repository_tools_leave_lancedb_and_the_model_to_the_daemon(world):
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=world.alpha, env=world.env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY="


def _repeated_lines(text: str) -> list[str]:
    """Lines of code (over 20 characters) that occur more than once in ``text`` (JSON-escaped newlines split)."""
    lines = [line.strip() for line in text.replace("\\n", "\n").splitlines() if len(line.strip()) > 20]
    return sorted({line for line in lines if lines.count(line) > 1})


@pytest.mark.anyio
async def test_a_search_answer_is_small_says_each_thing_once_and_the_server_names_its_version(world):
    # Before: the chunks' text three times (matches, augmentedPrompt, instructions) and again in a structured copy;
    # serverInfo.version was empty and nothing said that the daemon outlives the session.
    from localidx import __version__

    async with server(world) as client:
        assert client.server_info.version == __version__
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "keeps running after the client disconnects" in tools["rag_search_simple"].description
        brief = await client.call_tool("rag_search_simple", {"rawQuery": "verify the session token"})
        full = await client.call_tool("rag_search_simple", {"rawQuery": "verify the session token",
                                                            "detail": "full"})
    for result in (brief, full):
        assert not result.is_error and result.structured_content is None and len(result.content) == 1
        assert _repeated_lines(text_of(result)) == []
    answer = json.loads(text_of(brief))
    assert answer["matches"][0]["path"] == "auth.py" and "text" not in answer["matches"][0]
    assert any("verify_token" in line for line in answer["matches"][0]["lines"])
    assert len(text_of(brief).encode()) <= 8192 and len(text_of(brief)) < len(text_of(full))
    assert "def verify_token" in json.loads(text_of(full))["matches"][0]["text"]


@pytest.fixture(scope="module")
def code_world(tmp_path_factory):
    """A repository of real code (localidx's retrieval and daemon modules) indexed with the shipped static model,
    whose similarity floor tells nonsense from a question, as a user's index does; its own home, registry and
    daemon (stopped at the end)."""
    import shutil

    base = tmp_path_factory.mktemp("mcpcode")
    run_dir = Path(tempfile.mkdtemp(prefix="lx-", dir="/tmp"))
    package = Path(__file__).resolve().parent.parent / "localidx"
    root = base / "code"
    for part in ("retrieve", "daemon"):
        shutil.copytree(package / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    env = {name: value for name, value in os.environ.items()
           if name not in (lifecycle.SOCK_ENV, lifecycle.FAKE_VERSION_ENV, "LOCALIDX_DEBUG")}
    env.update({"LOCALIDX_EMBED_MODEL": "static-minilm", "LOCALIDX_HOME": str(base / "home"), "LOCALIDX_WATCH": "0",
                "LOCALIDX_DAEMON_IDLE_S": "300", "XDG_RUNTIME_DIR": str(run_dir), "HF_HUB_OFFLINE": "1",
                "LOCALIDX_REGISTRY": str(base / "registry.json"), "GIT_CONFIG_NOSYSTEM": "1"})
    proc = _run(env, root, "index", "--quiet")
    assert proc.returncode == 0, proc.stderr
    proc = _run(env, root, "repos", "share", ".")  # rag_search_global reads shared repositories only
    assert proc.returncode == 0, proc.stderr
    try:
        yield World(root, root, root, env)
    finally:
        status = lifecycle.read_status(lifecycle.daemon_paths(root, True, load_settings(root, env=env)).status)
        try:
            _run(env, root, "daemon", "stop", timeout=60)
        except subprocess.TimeoutExpired:
            pass
        if status and lifecycle.pid_alive(status["pid"]):
            os.kill(status["pid"], signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)


@pytest.mark.anyio
async def test_nonsense_finds_nothing_from_every_tool_as_search_says(code_world):
    # Before: rag_search and rag_context answered `nonsensequxzz` with 10-12 matches and noResults false, where
    # `localidx search` said "no matches".
    search = _run(code_world.env, code_world.alpha, "search", "nonsensequxzz")
    assert search.returncode == 1 and "no matches" in search.stderr
    async with server(code_world) as client:
        for tool in ("rag_search", "rag_search_simple", "rag_search_global"):
            answer = await ok(client, tool, {"rawQuery": "nonsensequxzz"})
            assert answer["noResults"] is True and answer["matches"] == [], tool
        instructions, meta, _tokens = await context_of(client, {"rawQuery": "nonsensequxzz"})
        assert meta["noResults"] is True and "nothing in code matched" in instructions
        real = await ok(client, "rag_search", {"rawQuery": "context pack token budget"})
    assert real["noResults"] is False and real["matches"]


@pytest.mark.anyio
async def test_answers_fit_what_an_agent_can_afford(code_world):
    """Sizes in cl100k tokens, as an agent's model counts them: a brief search of 10 matches within 1,500, a pack
    within 1.1 times its maxTokens at every size, a status within 1,200."""
    from localidx.text.tokens import count

    async with server(code_world) as client:
        for tool in ("rag_search", "rag_search_global"):
            result = await client.call_tool(tool, {"rawQuery": "how is the context pack cut to the token budget"})
            answer = json.loads(text_of(result))
            assert len(answer["matches"]) == 10 and count(text_of(result)) <= 1500, (tool, count(text_of(result)))
        for budget in (500, 2000, 8000):
            instructions, meta, tokens = await context_of(client, {"rawQuery": "how does the daemon route a request",
                                                                   "maxTokens": budget})
            assert meta["promptTokens"] <= budget and tokens <= 1.1 * budget, (budget, tokens)
            assert meta["maxTokens"] == budget and instructions.count("[1] ") == 1
        status = await client.call_tool("index_status", {})
        assert count(text_of(status)) <= 1200
