"""The records that flow from the chunker to the store: ``Chunk``, ``FileContext``, ``Endpoint``, and the kinds and
levels a chunk may have.

Place in the flow: the bottom layer, beside errors.py and text.py. Parsing, chunking, [META], the store, the retrieve
layer, the daemon, the CLI and the MCP server all speak of chunks in these terms, so this module imports nothing of
the package (importing it runs no chunker code).

A ``Chunk`` is born as a draft (kind, lines, text, symbol facts) in one of the chunkers under ``localidx.chunk``;
``localidx.chunk.finalize`` then gives it its identity (``id``, ``span_hash``, ``content_hash``), its token count and
its [META] ``header`` from ``localidx.chunk.enrich``; ``search_text`` is the header plus the text. Nothing downstream
edits a chunk.

Invariants:
- ``start_line``/``end_line`` are 1-based and inclusive, and always refer to the original file, also after redaction.
- ``text`` is already redacted (``localidx.safety.redact``): no secret value leaves the chunker.
- ``kind`` is one of ``KINDS``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Kinds named plainly; "module" is module-level code between symbols, "window" a line window of an unknown text file.
# "group": tiny siblings of different kinds merged into one chunk (its ``symbols`` list them).
CODE_KINDS = ("function", "method", "class", "struct", "interface", "enum", "trait", "impl", "module", "group")
KINDS = CODE_KINDS + ("summary", "config", "heading", "content", "window", "error")

# Levels that are not nesting depths.
LEVEL_CONTENT = -1
LEVEL_ERROR = -99


@dataclass(slots=True)
class Chunk:
    path: str  # relative to the repository root, forward slashes
    language: str
    kind: str
    start_line: int
    end_line: int
    text: str
    symbol: str = ""  # qualified name: "AuthHandler.revoke"; "" for module code, windows, docs content
    name: str = ""  # the bare name: "revoke"
    title: str = ""  # a one-line human label
    parent: str = ""  # qualified name of the enclosing symbol, "" at top level
    signature: str = ""
    doc: str = ""
    level: int = 0  # nesting depth for code; heading level (H1 = 1) for docs; LEVEL_CONTENT; LEVEL_ERROR
    start_byte: int = 0
    end_byte: int = 0
    chunk_index: int = 0  # position of a part when a symbol was split; 0 otherwise
    overlap_lines: int = 0  # lines this part repeats from the previous part
    symbols: list[str] = field(default_factory=list)  # the symbols a merged chunk holds
    calls: list[str] = field(default_factory=list)  # names called from this chunk's code
    decorators: list[str] = field(default_factory=list)
    tags: dict = field(default_factory=dict)
    parent_id: str | None = None
    # Draft-only link to the parent chunk by its position in the same file's list; finalize() turns it into parent_id.
    parent_index: int | None = None
    # Filled by finalize():
    id: str = ""
    span_hash: str = ""
    content_hash: str = ""
    token_count: int = 0
    header: str = ""  # the [META] lines (localidx.chunk.enrich)

    @property
    def search_text(self) -> str:
        """What BM25 and the embedder read: the [META] header, a newline, the text (derived, so not stored twice)."""
        return f"{self.header}\n{self.text}" if self.header else self.text

    def to_dict(self) -> dict:
        record = asdict(self)
        del record["parent_index"]
        record["search_text"] = self.search_text
        return record


@dataclass
class Endpoint:
    """An HTTP route found in a file: ``METHOD /path -> handler``."""

    method: str  # "GET", "POST", ... or "ANY"
    path: str
    handler: str = ""  # qualified name of the handling symbol when known
    line: int = 0

    def render(self) -> str:
        tail = f" -> {self.handler}" if self.handler else ""
        return f"{self.method} {self.path}{tail}"


@dataclass
class FileContext:
    """What the [META] header may say about a file as a whole (shared by all its chunks)."""

    path: str
    language: str
    imports: list[str] = field(default_factory=list)  # import statements' text, redacted
    module_doc: str = ""
    endpoints: list[Endpoint] = field(default_factory=list)
    invalid_utf8: bool = False
    # The file's redacted lines joined by "\n", and where each line starts in it: a chunk whose text is a run of
    # whole lines of this text can be answered from facts found once per file (``localidx.chunk.enrich``).
    text: str = ""
    line_starts: list[int] = field(default_factory=list)
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # per-file facts, filled by enrich
