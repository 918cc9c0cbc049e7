"""Benchmark: what an agent pays for each MCP tool's answer, in cl100k tokens (and bytes), as its client receives it.

A real ``localidx mcp`` over stdio, driven by the ``mcp`` SDK's client, in a clone of a repository (default: this
one) indexed with ``--model`` (default static-minilm: cheap). Each tool is called with the same questions, in its
default form and in its others (``detail: "full"``; ``rag_context`` at a few ``maxTokens``); an answer's size is
every text block it carries plus its structured copy, if any (none: every tool answers as text once). Printed per
tool and form: the mean and largest tokens and bytes, and the matches of a search answer.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/mcp_size.py [--repo .] [--work /tmp/lxmcp] [--model static-minilm]

Not a timed test: run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

QUERIES = ["where are the exit codes of the command line decided", "how does the daemon start",
           "context pack token budget", "verify the index is damaged and repair it", "MCP server tools"]


CALLS = [  # (label, tool, extra arguments)
    ("rag_search (brief)", "rag_search", {}),
    ("rag_search (full)", "rag_search", {"detail": "full"}),
    ("rag_search_simple (brief)", "rag_search_simple", {}),
    ("rag_search_global (brief)", "rag_search_global", {}),
    ("rag_context (default, 3000)", "rag_context", {}),
    ("rag_context maxTokens 1000", "rag_context", {"maxTokens": 1000}),
    ("rag_context maxTokens 8000", "rag_context", {"maxTokens": 8000}),
    ("index_status", "index_status", None),
]


def size(result) -> tuple[int, int]:
    """(cl100k tokens, UTF-8 bytes) of everything an answer carries."""
    import json

    from localidx.text.tokens import count

    texts = [getattr(block, "text", "") for block in result.content]
    if result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return sum(count(t) for t in texts), sum(len(t.encode()) for t in texts)


async def measure(work: Path, env: dict) -> None:
    import json

    import mcp
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "localidx", "mcp"], cwd=str(work / "repo"),
                                   env=env)
    rows: dict[str, list[tuple[int, int, int | None]]] = {label: [] for label, _tool, _extra in CALLS}
    async with mcp.Client(params, read_timeout_seconds=300) as client:
        for query in QUERIES:
            for label, tool, extra in CALLS:
                arguments = {} if extra is None else {"rawQuery": query, **extra}
                result = await client.call_tool(tool, arguments)
                if result.is_error:
                    raise SystemExit(f"{label}: {result.content[0].text}")
                tokens, size_bytes = size(result)
                matches = None
                if tool.startswith("rag_search"):
                    matches = len(json.loads(result.content[0].text)["matches"])
                rows[label].append((tokens, size_bytes, matches))
    print(f"{len(QUERIES)} questions; tokens are cl100k over every block of the answer\n")
    print("| tool (form) | mean tokens | max tokens | mean bytes | matches |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, values in rows.items():
        tokens = [v[0] for v in values]
        matches = [v[2] for v in values if v[2] is not None]
        print(f"| {label} | {sum(tokens) / len(tokens):.0f} | {max(tokens)} | "
              f"{sum(v[1] for v in values) / len(values):.0f} | "
              f"{(sum(matches) / len(matches)) if matches else '':{'.1f' if matches else ''}} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lxmcp"))
    parser.add_argument("--model", default="static-minilm")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", str(args.repo), str(args.work / "repo")], check=True)
    run_dir = args.work / "run"
    run_dir.mkdir()
    env = {**os.environ, "LOCALIDX_EMBED_MODEL": args.model, "LOCALIDX_HOME": str(args.work / "home"),
           "LOCALIDX_WATCH": "0", "XDG_RUNTIME_DIR": str(run_dir), "LOCALIDX_REGISTRY": str(args.work / "reg.json")}
    subprocess.run([sys.executable, "-m", "localidx", "index", "-q"], cwd=args.work / "repo", env=env, check=True)
    try:
        asyncio.run(measure(args.work, env))
    finally:
        subprocess.run([sys.executable, "-m", "localidx", "daemon", "stop"], cwd=args.work / "repo", env=env,
                       capture_output=True)


if __name__ == "__main__":
    main()
