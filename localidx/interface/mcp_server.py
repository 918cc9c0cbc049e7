"""The MCP server (``localidx mcp``): read-only tools over stdio, thin adapters over ``localidx.interface.backend``
(and, for
``rag_search_global``, over the retrieval pipeline).

Place in the flow: serve. The tools and what they call:

    rag_search          context/build on the work tree's daemon    the matches: where, what, and the lines that matched
                                                               (``detail: "full"``: each match's text and the
                                                               pipeline's fields, still without the prompt)
    rag_search_simple   context/build, the query alone             the same
    rag_context         context/build                              the pack to paste: the instructions (the whole
                                                               message for a model, within ``maxTokens``), then
                                                               a line of JSON: noResults, warnings, promptTokens
    index_status        index/status                               the status report
    rag_search_global   retrieve.context.build_context_all_repos   as rag_search, over every registered index (in
                                                               process)

Invariants:
- The per-repository tools go through the daemon (``localidx.interface.backend``'s "start" policy: started on first use,
  restarted once after an edit of the settings), so this process does not import lancedb or fastembed for them;
  only ``rag_search_global`` loads the pipeline. When the daemon cannot be started (its socket directory is refused,
  it fails at start), or it runs with settings other than this server's environment gives (``client.OtherSettings``:
  it is left running for its other users), the tool is answered in this process instead, with a warning that says
  why and what to do.
- Settings an untrusted repository file sets and localidx does not take (``localidx.config.trust_warning``) are
  said in every answer's ``warnings``: the agent's user learns it, and how to trust the file.
- Tool inputs are pydantic-validated and closed (unknown arguments are refused). They name a profile, never raw
  tuning values (top-k, weights): those live in profiles. The one number an agent gives is ``maxTokens``, the size
  of the pack it can afford (``rag_context``), because only the agent knows its context.
- A failure (no daemon, index not ready, a usage error such as an unknown profile) is a tool error whose text is the
  one-line message; it never ends the server. Nothing but the protocol goes to stdout: logs go to stderr (the SDK's
  stdio transport also points fd 1 at stderr while it serves, so a stray print cannot corrupt the stream).
- Agents pay for every byte: every answer says each thing once, as text (no structured copy beside it); a search
  answer is one compact JSON text, brief by default (``BRIEF_MATCHES`` matches, their location and a few matching
  lines: about 1,000 cl100k tokens), the code itself only on request (``detail: "full"``); the prompt built from
  it comes only from ``rag_context``, once, and never over its ``maxTokens`` (its JSON line adds about 25). The
  first per-repository call starts the work tree's daemon, which outlives the session until it has been idle for
  ``daemon_idle_s``; the tools' descriptions say so.
- Text enters as valid Unicode: a frame's lone surrogate escapes (``"\\ud83d"``, a string cut inside an emoji) are
  replaced before the SDK parses it (its parser refuses them and answers nothing, so the client would hang), and
  tool arguments go through ``localidx.text.safe.valid_text``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import TextContent, ToolAnnotations
from pydantic import ConfigDict, Field

from localidx import __version__
from localidx.errors import LocalidxError
from localidx.protocol import MAX_QUERY_CHARS
from localidx.records import KINDS
from localidx.retrieve.guard import MAX_CONTEXT_TOKENS, MIN_CONTEXT_TOKENS
from localidx.text.safe import valid_text

log = logging.getLogger(__name__)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

RawQuery = Annotated[str, Field(min_length=1, description=(
    "The question or search text: natural language, identifiers or both; a whole bug report or log is fine "
    f"(text over {MAX_QUERY_CHARS} characters is cut, with a warning)."))]
Profile = Annotated[str | None, Field(min_length=1, max_length=64,
                                      description="A retrieval profile by name (e.g. balanced); left out: the "
                                                  "repository's default. Profiles, not raw numbers, tune retrieval.")]
ConversationContext = Annotated[
    list[str] | None,
    Field(max_length=50, description="Recent conversation turns, oldest first, to resolve references like 'it'."),
]
Language = Annotated[str | None, Field(min_length=1, max_length=64,
                                       description="Only chunks in this language (python, go, markdown, ...).")]
PathGlob = Annotated[str | None, Field(min_length=1, max_length=1024,
                                       description="Only paths matching this glob (gitignore style), e.g. src/**.")]
Kind = Annotated[Literal[KINDS] | None, Field(description="Only chunks of this kind.")]
MaxTokens = Annotated[int | None, Field(ge=MIN_CONTEXT_TOKENS, le=MAX_CONTEXT_TOKENS, description=(
    "The most tokens (cl100k) the pack may take: the instructions, the question, the code, the file list and the "
    "call relations together; left out: the profile's (3000 in balanced)."))]
Detail = Annotated[Literal["brief", "full"], Field(description=(
    "brief (default): each match's location, symbol, score and the lines that matched (a few per match); full: "
    "each match's whole text and the pipeline's fields as well."))]

DAEMON_NOTE = (" The first call starts a localidx daemon for this repository (a few seconds); it keeps running "
               "after the client disconnects and stops after an hour without requests (`localidx daemon stop` stops it now).")
# The fields of a context/build response that repeat the matches' text (the prompt built from them).
PROMPT_FIELDS = ("augmentedPrompt", "instructions")
BRIEF_MATCHES = 10  # matches in a brief search answer
# The budget of the pack a search tool ranks: room for every hit the profile keeps (topK), so a search answer
# lists the ranked matches rather than what fits a prompt.
SEARCH_TOKENS = 16000


class Repository:
    """The work tree this server answers for, and the way to its daemon."""

    def __init__(self, root: Path, in_git: bool):
        self.root = root
        self.in_git = in_git

    def context(self, **options) -> dict:
        """``context/build`` (``Backend.context``'s options) through the work tree's daemon."""
        return self._answer(lambda backend: backend.context(**options))

    def status(self) -> dict:
        """``index/status`` through the work tree's daemon."""
        return self._answer(lambda backend: backend.status())

    def _answer(self, operation: Callable[[Any], dict]) -> dict:
        """``operation`` on the daemon's backend (the daemon started when none runs; in this process when it cannot
        start); errors become one-line tool errors. The answer's ``warnings`` say what was not taken from an
        untrusted repository file, and why the daemon was not used."""
        from localidx.config import load_settings, trust_warning
        from localidx.errors import ConfigError
        from localidx.interface.backend import Backend
        from localidx.interface.client import DaemonTimeout, DaemonUnavailable

        notes: list[str] = []
        try:
            ignored: list = []
            # Per call: after an edit of .localidx.toml, the backend restarts a daemon that runs with the old settings.
            settings = load_settings(self.root, ignored=ignored)
            notes += [w for w in [trust_warning(ignored, self.root)] if w]
            try:
                backend = Backend(self.root, self.in_git, settings, daemon="start")
                answer = operation(backend)
                if backend.other_settings:  # answered here: the daemon others use runs with other settings
                    notes.append(f"answered without the daemon: {backend.other_settings}")
            except (DaemonUnavailable, ConfigError) as exc:
                if isinstance(exc, DaemonTimeout) or (isinstance(exc, ConfigError) and "socket" not in str(exc)):
                    raise
                log.warning("the daemon could not start (%s); answering in this process", exc)
                notes.append(f"answered without the daemon, which could not start ({exc}); "
                             f"`localidx daemon logs` shows why")
                answer = operation(Backend(self.root, self.in_git, settings, daemon="running"))
        except LocalidxError as exc:
            raise ToolError(str(exc) + "".join(f" ({note})" for note in notes)) from None
        except OSError as exc:
            raise ToolError(f"cannot reach the daemon for {self.root}: {exc.strerror or exc}") from None
        if notes:
            answer = {**answer, "warnings": [*answer.get("warnings", []), *notes]}
        return answer


def _context_options(query: str, profile: str | None = None, conversation: list[str] | None = None,
                     language: str | None = None, path: str | None = None, kind: str | None = None,
                     max_tokens: int | None = None) -> dict:
    """The query and options of a context pack from tool arguments (left-out arguments are left out), as valid
    Unicode: a lone surrogate in a JSON string (``"\\ud800"``) would fail the tokenizer and the JSON answer."""
    options: dict[str, Any] = {"query": valid_text(query)}
    if max_tokens is not None:
        options["max_tokens"] = max_tokens
    for name, value in (("profile", profile), ("conversation_context", conversation), ("language", language),
                        ("path_glob", path), ("kind", kind)):
        if value is not None:
            options[name] = [valid_text(v) for v in value] if isinstance(value, list) else valid_text(value)
    return options


def citations(response: dict) -> list[str]:
    """Each excerpt's ``[repo:]path:start-end``, once, in the pack's order."""
    out = []
    for m in response.get("matches", []):
        cite = f"{m['path']}:{m['start_line']}-{m['end_line']}"
        if m.get("repo"):
            cite = f"{m['repo']}:{cite}"  # a match labelled with its repository (as the pipeline cites it)
        if cite not in out:
            out.append(cite)
    return out


def context_pack(response: dict) -> list[TextContent]:
    """A context/build response as ``rag_context`` answers it: the instructions (the whole message for a model: the
    template, the question and the numbered excerpts under their ``path:start-end`` citations), then one line of
    JSON saying whether anything matched, the warnings and the pack's size. The prompt is said once."""
    import json

    stats = response.get("stats") or {}
    meta = {"noResults": response.get("noResults", not response.get("matches")),
            "noResultsReason": response.get("noResultsReason"), "warnings": response.get("warnings", []),
            "promptTokens": stats.get("promptTokens"), "maxTokens": stats.get("budget")}
    return [TextContent(type="text", text=response.get("instructions", "")),
            TextContent(type="text", text=json.dumps(meta, ensure_ascii=False, separators=(",", ":")))]


def search_answer(response: dict, query: str, detail: str = "brief") -> list[TextContent]:
    """A search tool's answer as one compact JSON text. ``brief``: per match its location, symbol, kind, score and
    the lines holding the query's terms (``localidx.interface.highlight``); ``full``: the matches whole and the
    response's
    other fields. Neither repeats the matches' text in the prompt fields (``rag_context`` builds the prompt)."""
    import json

    if detail == "full":
        answer = {key: value for key, value in response.items() if key not in PROMPT_FIELDS}
    else:
        from localidx.interface.highlight import query_terms, snippet

        terms = query_terms(response.get("query") or query)
        matches = []
        found = response.get("matches", [])
        # The ranked hits, not the context expansion added around them.
        for m in ([m for m in found if not m.get("neighborStrategy")] or found)[:BRIEF_MATCHES]:
            brief = {"path": m["path"], "start_line": m["start_line"], "end_line": m["end_line"],
                     "symbol": m.get("symbol") or m.get("title") or "", "kind": m.get("kind", ""),
                     "score": round(float(m.get("score") or 0.0), 3),
                     "lines": [f"{line.number}: {line.text}" for line in snippet(m.get("text", ""), m["start_line"],
                                                                                  terms)]}
            if m.get("repo"):
                brief = {"repo": m["repo"], **brief}
            if m.get("index"):
                brief["index"] = m["index"]  # rag_search_global: "local" or "shared" (the org index)
            matches.append(brief)
        answer = {"rawQuery": response.get("rawQuery", query), "matches": matches,
                  "warnings": response.get("warnings", []), "noResults": response.get("noResults", not matches),
                  "noResultsReason": response.get("noResultsReason"), "profile": response.get("profile"),
                  "detail": "brief: call again with detail \"full\" for each match's whole text"}
        if len(found) > len(matches):
            answer["more"] = len(found) - len(matches)
    return [TextContent(type="text", text=json.dumps(answer, ensure_ascii=False, separators=(",", ":")))]


def _tools(repo: Repository) -> list[Callable]:
    """The tool functions, bound to ``repo``; their names, signatures and docstrings are what clients see."""

    def rag_search(rawQuery: RawQuery, profile: Profile = None, conversationContext: ConversationContext = None,
                   language: Language = None, path: PathGlob = None, kind: Kind = None,
                   detail: Detail = "brief") -> list[TextContent]:
        """Search this repository's code and docs with the retrieval pipeline (hybrid search, rerank, neighbour
        expansion): the ranked matches as path, start_line-end_line, symbol and the lines that matched; detail
        "full" adds each match's whole text. rag_context builds a prompt to paste."""
        return search_answer(repo.context(**_context_options(rawQuery, profile, conversationContext, language, path,
                                                             kind, SEARCH_TOKENS)), rawQuery, detail)

    def rag_search_simple(rawQuery: RawQuery, detail: Detail = "brief") -> list[TextContent]:
        """Search this repository with the default profile and no filters: the query alone (answers as
        rag_search)."""
        return search_answer(repo.context(**_context_options(rawQuery, max_tokens=SEARCH_TOKENS)), rawQuery, detail)

    def rag_context(rawQuery: RawQuery, profile: Profile = None, conversationContext: ConversationContext = None,
                    language: Language = None, path: PathGlob = None, kind: Kind = None,
                    maxTokens: MaxTokens = None) -> list[TextContent]:
        """Build a context pack ready to paste, within maxTokens: the instructions for the model (the question and
        the numbered excerpts, each under its path:start-end citation, best first), then a line of JSON with
        noResults, warnings and promptTokens."""
        return context_pack(repo.context(**_context_options(rawQuery, profile, conversationContext, language, path,
                                                            kind, maxTokens)))

    def index_status() -> list[TextContent]:
        """The state of this repository's index (READY, STALE, EMPTY, INDEXING), what it holds, and its daemon."""
        import json

        return [TextContent(type="text", text=json.dumps(repo.status(), ensure_ascii=False, separators=(",", ":")))]

    def rag_search_global(rawQuery: RawQuery, profile: Profile = None,
                          conversationContext: ConversationContext = None, language: Language = None,
                          path: PathGlob = None, kind: Kind = None, detail: Detail = "brief") -> list[TextContent]:
        """Search every repository its owner shared for cross-repository search (`localidx repos share`) together;
        each match is labelled with its repository (answers as rag_search)."""
        try:
            from localidx.config import load_settings
            from localidx.retrieve.context import build_context_all_repos

            # This repository's settings (its default profile, its LLM), as `localidx context --all-repos` does.
            response = build_context_all_repos(**_context_options(rawQuery, profile, conversationContext, language,
                                                                  path, kind, SEARCH_TOKENS),
                                               settings=load_settings(repo.root))
        except LocalidxError as exc:
            raise ToolError(str(exc)) from None
        return search_answer(response, rawQuery, detail)

    return [rag_search, rag_search_simple, rag_context, index_status, rag_search_global]


DAEMON_TOOLS = ("rag_search", "rag_search_simple", "rag_context", "index_status")


def _closed_tool(fn: Callable) -> Tool:
    """The SDK's tool for ``fn``, with an argument model that refuses unknown arguments (``additionalProperties:
    false`` in the schema): a client passing ``topK`` hears that it is not accepted instead of being ignored."""
    # Text alone, never a structured copy beside it: an agent would pay for the answer twice.
    tool = Tool.from_function(fn, annotations=READ_ONLY, structured_output=False,
                              description=(fn.__doc__ or "").strip() + (DAEMON_NOTE if fn.__name__ in DAEMON_TOOLS
                                                                        else ""))
    loose = tool.fn_metadata.arg_model
    closed = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid"), "__module__": __name__})
    tool.fn_metadata.arg_model = closed
    tool.parameters = closed.model_json_schema(by_alias=True)
    return tool


def create_server(root: Path, in_git: bool) -> MCPServer:
    """The MCP server for the work tree at ``root``."""
    repo = Repository(root, in_git)
    return MCPServer(
        "localidx",
        instructions=(f"Code search over the repository at {root} (and, with rag_search_global, every repository "
                      "indexed on this machine). Answers cite path:start-end; use rag_context for a pack to paste."),
        version=__version__,
        tools=[_closed_tool(fn) for fn in _tools(repo)],
        log_level="WARNING",
    )


_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.S)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _is_surrogate(match: re.Match | None, low: int, high: int) -> bool:
    return bool(match and match.group(1) and low <= int(match.group(1), 16) <= high)


def repair_surrogate_escapes(line: str) -> str:
    """A JSON line with every lone surrogate escape (``"\\ud83d"`` alone: a client that cut a string inside an
    emoji) replaced by ``\\ufffd``. The SDK's JSON parser refuses such a frame and answers nothing, so the client
    would wait forever; valid pairs and everything else are left as they are."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    escapes = list(_JSON_ESCAPE.finditer(line))
    out, last = [], 0
    for i, m in enumerate(escapes):
        before = escapes[i - 1] if i and escapes[i - 1].end() == m.start() else None
        after = escapes[i + 1] if i + 1 < len(escapes) and escapes[i + 1].start() == m.end() else None
        high, low = _is_surrogate(m, 0xD800, 0xDBFF), _is_surrogate(m, 0xDC00, 0xDFFF)
        lone = (high and not _is_surrogate(after, 0xDC00, 0xDFFF)) or (low and not _is_surrogate(before, 0xD800,
                                                                                                  0xDBFF))
        if lone:
            out.append(line[last:m.start()] + "\\ufffd")
            last = m.end()
    return "".join(out) + line[last:]


class _RepairedLines:
    """The client's stream, line by line, through ``repair_surrogate_escapes``."""

    def __init__(self, stream):
        self.stream = stream

    def readline(self, *args) -> str:
        return repair_surrogate_escapes(self.stream.readline(*args))

    def close(self) -> None:
        self.stream.close()


async def _run_stdio(server: MCPServer) -> None:
    import io

    import anyio
    from mcp.server.stdio import stdio_server

    # The wire is read from a private copy of fd 0, and fd 0 itself points at the null device while serving (as
    # the SDK does for the stream it claims), so a child process never reads the client's frames.
    wire = io.TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8", errors="replace")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    async with stdio_server(stdin=anyio.wrap_file(_RepairedLines(wire))) as (read_stream, write_stream):
        low = server._lowlevel_server  # noqa: SLF001 - MCPServer.run_stdio_async, with our stdin
        await low.run(read_stream, write_stream, low.create_initialization_options())


def serve(root: Path, in_git: bool) -> None:
    """Serve MCP over stdin/stdout until the client closes the stream. Logs go to stderr."""
    import anyio

    debug = os.environ.get("LOCALIDX_DEBUG") == "1"
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if debug else logging.WARNING,
                        format="localidx mcp: %(levelname)s %(name)s: %(message)s")
    anyio.run(_run_stdio, create_server(root, in_git))
