"""Benchmark: the bytes an agent pays for one MCP search answer, in the shape the search tools answered before (the
whole context/build response as structured content, and again as indented JSON text: the SDK's default for a tool
returning a dict), in the new default (``detail: "brief"``) and in full (``detail: "full"``).

A real ``localidx mcp`` over stdio, driven by the ``mcp`` SDK's client, in a clone of a repository (default: this
one) indexed with ``--model`` (default static-minilm: cheap); "before" is computed from the same call's full answer
plus the two prompt fields the tool no longer sends, serialised as the old server did. Per query it prints the three
sizes and how many code lines (over 20 characters) occur more than once in each answer.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/mcp_size.py [--repo .] [--work /tmp/lxmcp] [--model static-minilm]

Not a timed test: run it, read it, quote it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

QUERIES = ["where are the exit codes of the command line decided", "how does the daemon start",
           "context pack token budget", "verify the index is damaged and repair it", "MCP server tools"]


def repeated(text: str) -> int:
    lines = [line.strip() for line in text.replace("\\n", "\n").splitlines() if len(line.strip()) > 20]
    return sum(1 for line in set(lines) if lines.count(line) > 1)


async def measure(work: Path, env: dict) -> None:
    import mcp
    import pydantic_core
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "localidx", "mcp"], cwd=str(work / "repo"),
                                   env=env)
    rows = []
    async with mcp.Client(params, read_timeout_seconds=300) as client:
        for query in QUERIES:
            brief = await client.call_tool("rag_search_simple", {"rawQuery": query})
            full = await client.call_tool("rag_search_simple", {"rawQuery": query, "detail": "full"})
            pack = await client.call_tool("rag_context", {"rawQuery": query})
            brief_text, full_text = brief.content[0].text, full.content[0].text
            old = json.loads(full_text)
            old.update({key: pack.structured_content[key] for key in ("augmentedPrompt", "instructions")})
            old_text = pydantic_core.to_json(old, indent=2).decode() + json.dumps(old, ensure_ascii=False)
            rows.append((query, len(old_text.encode()), len(full_text.encode()), len(brief_text.encode()),
                         repeated(old_text), repeated(full_text), repeated(brief_text),
                         len(json.loads(brief_text)["matches"])))
    print(f"{'query':<52} {'before':>8} {'full':>8} {'brief':>8}  repeated lines (before/full/brief)  matches")
    for q, before, full_b, brief_b, r0, r1, r2, n in rows:
        print(f"{q[:52]:<52} {before:>8} {full_b:>8} {brief_b:>8}  {r0:>5}/{r1}/{r2}  {n:>20}")
    tot = [sum(r[i] for r in rows) / len(rows) for i in (1, 2, 3)]
    print(f"{'mean bytes':<52} {tot[0]:>8.0f} {tot[1]:>8.0f} {tot[2]:>8.0f}  "
          f"brief/before {tot[2] / tot[0]:.3f}, full/before {tot[1] / tot[0]:.3f}")


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
