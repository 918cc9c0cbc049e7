"""Parse: source bytes -> tree-sitter tree -> Symbol records, through the language's query files.

Second step of the flow (discover -> parse -> chunk -> enrich -> embed -> store). Every fact about a language comes
from captures in ``languages/queries/<lang>-*.scm``; this module names no grammar node type. The captures it reads:

- ``@definition.<kind>`` with ``@name`` (and optional ``@body``, ``@doc``) — a symbol; kinds outside ``SYMBOL_KINDS``
  are ignored. A function nested directly in a class-like symbol becomes a ``method``.
- ``@doc`` (and ``@decorator``, ``@leading``) before a definition, in its pattern — doc comments, attributes and other
  lines that belong to it (a separate type signature); only the run adjacent to the definition is kept, and the
  symbol then starts at the first of them so they travel with it.
- ``@reference.call`` with ``@name`` — a call, attributed to the innermost symbol around it.
- ``@import``, ``@decorator``, ``@doc.module`` — file and symbol facts for [META].
- ``@reparse`` (with optional ``@reparse.macro`` around it) — a region the grammar reads as opaque tokens, such as a
  Rust macro invocation's token tree holding items (``cfg_rt! { pub struct JoinHandle ... }``). The text inside it
  (between its delimiters) is parsed again with the same grammar, positions kept as the file's, and read through the
  same queries; what it defines is a symbol like any other, with ``macro`` set to the text from the start of
  ``@reparse.macro`` to the region (``cfg_rt!``). Regions found inside such a region are parsed the same way, up to
  ``MAX_REPARSE_DEPTH`` levels; all of it shares the file's parse time limit.

A language whose table entry names ``conditionals`` (a preprocessor's block lines: C, C++) gets one more chance when
its tree has errors: the file is parsed again with each conditional block's first branch only, and the definitions
found only there are added (``_add_first_branch_symbols``).
- ``@route`` with ``@route.path`` (and optional ``@route.verb``, ``@route.method``, ``@route.handler``) — an HTTP
  endpoint, given to the symbol that holds it or that it names as handler.

Invariants: symbols are ordered by start byte, each parent encloses its children, lines are 1-based and inclusive.
"""

from __future__ import annotations

import bisect
import logging
import re
import sys
import time
from dataclasses import dataclass, field

from localidx.languages import LanguageSpec
from localidx.records import Endpoint

log = logging.getLogger(__name__)

SYMBOL_KINDS = ("function", "method", "class", "struct", "interface", "enum", "trait", "impl", "module")
# Symbols whose functions are methods and whose members are chunked separately under a skeleton.
CLASS_LIKE = frozenset(("class", "struct", "interface", "enum", "trait", "impl"))
CONTAINERS = CLASS_LIKE | {"module"}

# How deep re-parsed regions nest (a macro inside a macro's tokens inside another's): deeper ones stay module code.
MAX_REPARSE_DEPTH = 4
HTTP_METHODS = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"))
# Route verbs across frameworks: GetMapping (Spring), HttpGet (ASP.NET), MapGet (minimal APIs), HandleFunc (Go).
_VERB_AFFIXES = re.compile(r"^(?:http|map)(?=[A-Z])|(?:mapping|func|handler)$", re.IGNORECASE)

# Comment markers at a line's start: `///`, `/**`, `#`, `%`, `--` (with Haddock's `-- |` and `-- ^`, LuaDoc's `---`),
# `{-` and `(**` that open block comments, `<#` and `#>` of PowerShell's, `=begin`/`=end` of Ruby's.
_DOC_MARKERS = re.compile(r"^\s*(?:=begin|=end|///?!?|/\*\*?|\*/|\*|<#|#>|#+|--+(?:\s?[|^])?|\{-+\s?\|?|\(\*\*?|%)\s?",
                          re.MULTILINE)
_XML_DOC_TAGS = re.compile(
    r"</?(?:summary|remarks|returns|param|paramref|typeparam|typeparamref|see|seealso|para|c|code|example|exception|"
    r"value|inheritdoc|list|item|description|term)\b[^>]*>"
)
_METHOD_IN_PATH = re.compile(r"^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+(?=/)")
_DOC_TAIL = re.compile(r"\s*(?:\*/|\*\)|-\}|#>)\s*$")
_QUOTES = re.compile(r"""^(?:[rRbBuUfF]{0,2})('''|\"\"\"|'|\"|`)(.*)\1$""", re.DOTALL)


class ParseError(Exception):
    """The file could not be parsed (no grammar, a timeout); the chunker turns this into a sentinel chunk."""


@dataclass
class Symbol:
    kind: str
    name: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    name_line: int
    body_start_line: int | None = None  # first line of the body; None when the query gives no @body
    body_end_line: int | None = None
    body_node: object = field(default=None, repr=False, compare=False)
    doc: str = ""
    signature: str = ""
    decorators: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)
    parent: int | None = None  # index into ParsedFile.symbols
    children: list[int] = field(default_factory=list)
    qualified: str = ""
    macro: str = ""  # the macro or preprocessor region it was re-parsed from (``cfg_rt!``); "" when parsed in place

    @property
    def is_container(self) -> bool:
        return self.kind in CONTAINERS

    @property
    def split_lines(self) -> list[int]:
        """Lines where a statement of the body starts: where an oversize symbol reads best when cut. Computed only
        when asked, since only oversize symbols are cut."""
        if self.body_node is None:
            return []
        return sorted({child.start_point[0] + 1 for child in self.body_node.named_children})


@dataclass
class ParsedFile:
    language: str
    symbols: list[Symbol]
    imports: list[tuple[int, int, str]]  # (start_line, end_line, text)
    module_doc: str
    endpoints: list[Endpoint]
    module_calls: list[tuple[int, str]]  # (line, name) of calls made outside any symbol
    has_errors: bool  # the grammar recovered from syntax errors somewhere


def _end_line(node) -> int:
    """1-based inclusive last line: a node ending at column 0 ends on the line before."""
    row, col = node.end_point
    return max(node.start_point[0] + 1, row if col == 0 else row + 1)


def _content_end_line(data: bytes, node) -> int:
    """``_end_line`` of the node's text without trailing whitespace: some grammars end a definition where the next
    one's indentation ends (tree-sitter-scala's expression bodies), which would make the two overlap."""
    end = node.end_byte
    if end <= node.start_byte or data[end - 1 : end] not in (b" ", b"\t", b"\n", b"\r"):
        return _end_line(node)
    content_end = len(data[node.start_byte : end].rstrip()) + node.start_byte
    return max(node.start_point[0] + 1, node.end_point[0] + 1 - data.count(b"\n", content_end, end))


def clean_doc(texts: str | list[str]) -> str:
    """Docstrings or doc comments without quotes, comment markers and XML doc tags, whitespace collapsed per
    paragraph; several comments (a run of ``//`` lines) are cleaned one by one and joined."""
    cleaned = []
    for text in [texts] if isinstance(texts, str) else texts:
        text = text.strip()
        quoted = _QUOTES.match(text)
        if quoted:
            text = quoted.group(2)
        text = _DOC_TAIL.sub("", text)
        text = _DOC_MARKERS.sub("", text)
        cleaned.append(_XML_DOC_TAGS.sub("", text))
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", "\n".join(cleaned))]
    return "\n".join(p for p in paragraphs if p)[:1000]


def normalize_verb(verb: str) -> str:
    """``get`` -> GET, ``PostMapping``/``HttpPost``/``MapPost`` -> POST, ``route``/``HandleFunc``/``path`` -> ANY."""
    core = _VERB_AFFIXES.sub("", verb).upper()
    return core if core in HTTP_METHODS else "ANY"


def _text(data: bytes, node) -> str:
    # Slice the source ourselves: on a tree parsed through a read callback, Node.text goes back through the callback.
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _strip_quotes(text: str) -> str:
    quoted = _QUOTES.match(text.strip())
    return quoted.group(2) if quoted else text.strip()


def _parse_tree(spec: LanguageSpec, data: bytes, timeout_s: float, ranges: list | None = None):
    import tree_sitter

    parser = tree_sitter.Parser(spec.ts_language(), included_ranges=ranges)
    if timeout_s <= 0:
        return parser.parse(data)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    parsing = True
    step = 64 * 1024

    def read(offset: int, _point) -> bytes:
        # tree-sitter pulls the source through this callback as it lexes, so a deadline checked here bounds the parse.
        # The tree keeps the callback to read node text later (query predicates such as #match? do): past the parse
        # it must serve the bytes whatever the time, or that read gets nothing forever (found on a real repository:
        # a small C++ file hung a worker once a slow query compile had outlasted the parse deadline).
        nonlocal timed_out
        if parsing and time.monotonic() > deadline:
            timed_out = True
            return b""
        return data[offset : offset + step]

    tree = parser.parse(read)
    parsing = False
    if timed_out or tree is None:
        raise ParseError(f"parser timed out after {timeout_s:g} s")
    return tree


def parse(spec: LanguageSpec, data: bytes, timeout_s: float = 5.0) -> ParsedFile:
    """Parse ``data`` with the language's grammar and read its symbols through its queries."""
    import tree_sitter

    try:
        tree = _parse_tree(spec, data, timeout_s)
        query = spec.query()
    except ParseError:
        raise
    except Exception as exc:  # a grammar that cannot load, crashes or rejects its queries is a sentinel, not a stop
        raise ParseError(f"parser failed: {exc}") from exc
    root = tree.root_node
    found = _Found()
    regions = _read(query, root, data, found, macro="", module_level=True)
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    depth = 0
    while regions and depth < MAX_REPARSE_DEPTH:
        # Each pass parses the regions the previous one found (a macro inside a macro is the next pass's).
        depth += 1
        nested: list[tuple[object, str]] = []
        for region, label in dict(((n.start_byte, n.end_byte), (n, lbl)) for n, lbl in regions).values():
            subtree = _reparse(spec, data, region, deadline)
            if subtree is not None:
                nested += _read(query, subtree.root_node, data, found, macro=label, module_level=False)
        regions = nested
    if root.has_error and spec.conditionals:
        _add_first_branch_symbols(spec, data, query, found, deadline, _error_span(root))
    by_name_node, calls, decorators = found.by_name_node, found.calls, found.decorators
    routes, imports, module_doc = found.routes, found.imports, found.module_doc

    symbols = sorted(by_name_node.values(), key=lambda s: (s.start_byte, -s.end_byte))
    _nest(symbols)
    starts = [s.start_byte for s in symbols]
    module_calls = []
    for offset, line, name in calls:
        owner = _innermost(symbols, starts, offset)
        if owner is not None:
            symbols[owner].calls.append(name)
        else:
            module_calls.append((line, name))
    for start, end, text in dict.fromkeys(decorators):
        owner = _innermost(symbols, starts, start)
        if owner is not None:
            symbols[owner].decorators.append(" ".join(text.split()))
    endpoints = _place_routes(symbols, starts, routes)
    for sym in symbols:
        sym.calls = list(dict.fromkeys(sym.calls))
    imports = sorted(set(imports))
    return ParsedFile(
        language=spec.name,
        symbols=symbols,
        imports=imports,
        module_doc=module_doc,
        endpoints=endpoints,
        module_calls=module_calls,
        has_errors=root.has_error,
    )


@dataclass
class _Found:
    """What the queries found in a file, across its tree and the trees of its re-parsed regions."""

    by_name_node: dict[int, Symbol] = field(default_factory=dict)  # one symbol per name node, however many
    seen_nodes: set[tuple[int, int]] = field(default_factory=set)  # patterns matched it
    calls: list[tuple[int, int, str]] = field(default_factory=list)
    decorators: list[tuple[int, int, str]] = field(default_factory=list)
    routes: list[tuple[int, int, Endpoint]] = field(default_factory=list)
    imports: list[tuple[int, int, str]] = field(default_factory=list)
    module_doc: str = ""


def _read(query, root, data: bytes, found: _Found, macro: str, module_level: bool,
          byte_range: tuple[int, int] | None = None) -> list[tuple[object, str]]:
    """Add what ``query`` captures under ``root`` to ``found``; return the ``@reparse`` regions it names, each with
    its label (the text from the start of ``@reparse.macro`` to the region: ``cfg_rt!``).

    ``macro`` is the label of the region ``root`` was parsed from ("" for the file itself): symbols found here carry
    it. A file's module doc is read only at ``module_level``; ``byte_range`` limits the matches to those that
    intersect it."""
    import tree_sitter

    regions: list[tuple[object, str]] = []
    # Pattern index -> its role; every match of a pattern has the same role (a definition pattern's kind can vary
    # with alternations, so that one is read per match).
    roles: dict[int, str] = {}
    cursor = tree_sitter.QueryCursor(query)
    if byte_range is not None:
        cursor.set_byte_range(*byte_range)
    for pattern, caps in cursor.matches(root):
        role = roles.get(pattern)
        if role is None:
            role = roles[pattern] = _role(caps)
        if role == "reference.call":  # most matches are calls
            if "name" in caps:
                node = caps["reference.call"][0]
                name = sys.intern(_text(data, caps["name"][-1]))  # the same few names recur in every chunk
                found.calls.append((node.start_byte, node.start_point[0] + 1, name))
        elif role == "definition":
            definition = next(k for k in caps if k.startswith("definition."))
            kind = definition.split(".", 1)[1]
            if kind not in SYMBOL_KINDS or "name" not in caps:
                continue
            _add_symbol(caps, kind, definition, data, found.by_name_node, found.seen_nodes, macro)
            for node in caps.get("decorator", []):
                found.decorators.append((node.start_byte, node.end_byte, _text(data, node)))
        elif role == "reparse":
            node = caps["reparse"][0]
            outer = caps.get("reparse.macro", [node])[0]
            label = " ".join(data[outer.start_byte : node.start_byte].decode("utf-8", "replace").split())
            regions.append((node, label[:80]))
        elif role == "route" and "route.path" in caps:
            node = caps["route"][0]
            path = _strip_quotes(_text(data, caps["route.path"][0]))
            verb = _text(data, caps["route.verb"][0]) if "route.verb" in caps else ""
            methods = [_strip_quotes(_text(data, n)).upper() for n in caps.get("route.method", [])]
            pattern_method = _METHOD_IN_PATH.match(path)
            if pattern_method and not methods:
                # Go 1.22 ServeMux patterns carry the method: "GET /healthz".
                methods, path = [pattern_method.group(1)], path[pattern_method.end():]
            handler = _text(data, caps["route.handler"][0]) if "route.handler" in caps else ""
            for method in methods or [normalize_verb(verb)]:
                endpoint = Endpoint(method=method, path=path, handler=handler, line=node.start_point[0] + 1)
                found.routes.append((node.start_byte, node.end_byte, endpoint))
        elif role == "import":
            for node in caps["import"]:
                text = _text(data, node).strip()
                found.imports.append((node.start_point[0] + 1, _end_line(node), text))
        elif role == "decorator":
            node = caps["decorator"][0]
            found.decorators.append((node.start_byte, node.end_byte, _text(data, node)))
        elif role == "doc.module" and module_level and not found.module_doc:
            found.module_doc = clean_doc([_text(data, n) for n in caps["doc.module"]])
    return regions


def _reparse(spec: LanguageSpec, data: bytes, node, deadline: float | None):
    """The tree of the text inside ``node`` (between its opening and closing delimiter tokens, when it has them),
    parsed on its own with the language's grammar; its positions are the file's. None when the time is up or the
    region is empty."""
    import tree_sitter

    first, last = (node.children[0], node.children[-1]) if node.child_count >= 2 else (None, None)
    if first is not None and not first.is_named and not last.is_named:
        start_byte, start_point, end_byte, end_point = first.end_byte, first.end_point, last.start_byte, last.start_point
    else:
        start_byte, start_point, end_byte, end_point = node.start_byte, node.start_point, node.end_byte, node.end_point
    if not data[start_byte:end_byte].strip():
        return None
    timeout_s = 0.0
    if deadline is not None:
        timeout_s = deadline - time.monotonic()
        if timeout_s <= 0:
            return None
    try:
        return _parse_tree(spec, data, timeout_s, [tree_sitter.Range(start_point, end_point, start_byte, end_byte)])
    except ParseError:
        log.debug("a re-parsed region ran out of time: its definitions stay module code")
        return None


def _first_branch_ranges(data: bytes, conditionals: tuple[str, ...]) -> list:
    """The file's byte ranges without preprocessor directive lines (and their ``\\`` continuations) and without the
    lines of any branch after the first of a conditional block: the file as one configuration of it compiles."""
    import tree_sitter

    directives = re.compile(b"|".join(b"(?P<%s>%s)" % (k, p.encode()) for k, p in zip((b"o", b"s", b"c"), conditionals)),
                            re.MULTILINE)
    ranges = []
    skipping: list[bool] = []  # per open block: whether its current branch is left out
    kept_from = 0  # where the text kept since the last directive starts (a line start)
    for match in directives.finditer(data):
        line_start = data.rfind(b"\n", 0, match.start()) + 1
        if line_start != match.start() and data[line_start : match.start()].strip():
            continue  # not at a line's start (a pattern without ^)
        line_end = match.end()
        while True:  # the directive's line, and the lines a trailing backslash continues it on
            newline = data.find(b"\n", line_end)
            if newline == -1:
                line_end = len(data)
                break
            line_end = newline + 1
            if not data[max(line_start, newline - 2) : newline].rstrip(b"\r").endswith(b"\\"):
                break
        if not any(skipping) and line_start > kept_from:
            ranges.append((kept_from, line_start))
        if match.lastgroup == "o":
            skipping.append(False)
        elif match.lastgroup == "s" and skipping:
            skipping[-1] = True
        elif match.lastgroup == "c" and skipping:
            skipping.pop()
        kept_from = line_end
    if not any(skipping) and kept_from < len(data):
        ranges.append((kept_from, len(data)))

    out = []
    row = last = 0  # rows counted incrementally: the ranges are in order
    for a, b in ranges:
        start_row = row = row + data.count(b"\n", last, a)
        row += data.count(b"\n", a, b)
        last = b
        end = (row, b - data.rfind(b"\n", 0, b) - 1)
        out.append(tree_sitter.Range((start_row, a - data.rfind(b"\n", 0, a) - 1), end, a, b))
    return out


def _error_span(root) -> tuple[int, int]:
    """The bytes from the first error of the tree to the end of its last (only subtrees with errors are walked)."""
    start, end = root.end_byte, root.start_byte
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            start, end = min(start, node.start_byte), max(end, node.end_byte)
            continue
        stack.extend(child for child in node.children if child.has_error)
    return (start, max(start, end))


def _add_first_branch_symbols(spec: LanguageSpec, data: bytes, query, found: _Found, deadline: float | None,
                              span: tuple[int, int]) -> None:
    """Symbols the grammar missed because a preprocessor block cut a definition in two (braces that open in one
    ``#if`` branch and close in another), read from the file parsed with each block's first branch only. A definition
    the first tree lacks is added, one it read only in part (from a later branch's header on) is replaced, and only
    where it nests cleanly with the symbols already found."""
    ranges = _first_branch_ranges(data, spec.conditionals)
    if not ranges:
        return
    timeout_s = 0.0
    if deadline is not None:
        timeout_s = deadline - time.monotonic()
        if timeout_s <= 0:
            return
    try:
        tree = _parse_tree(spec, data, timeout_s, ranges)
    except ParseError:
        return
    view = _Found()
    # Only where the first tree went wrong: elsewhere both trees read the same text the same way.
    _read(query, tree.root_node, data, view, macro="", module_level=False, byte_range=span)
    for key, sym in view.by_name_node.items():
        if key in found.by_name_node:
            continue
        namesakes = [k for k, s in found.by_name_node.items()
                     if s.name == sym.name and s.start_byte < sym.end_byte and sym.start_byte < s.end_byte]
        if any(not (sym.start_byte <= found.by_name_node[k].start_byte
                    and found.by_name_node[k].end_byte <= sym.end_byte) for k in namesakes):
            continue  # the first tree's reading is as wide: keep it
        if any(s.start_byte < sym.start_byte < s.end_byte < sym.end_byte
               or sym.start_byte < s.start_byte < sym.end_byte < s.end_byte
               for k, s in found.by_name_node.items() if k not in namesakes):
            continue  # it would cross a symbol of the first tree: nesting would break
        for k in namesakes:  # a part of this definition (its second branch's header on): the whole replaces it
            del found.by_name_node[k]
        found.by_name_node[key] = sym


_ROLES = ("reference.call", "route", "import", "decorator", "doc.module", "reparse")


def _role(caps) -> str:
    if any(k.startswith("definition.") for k in caps):
        return "definition"
    return next((r for r in _ROLES if r in caps), "")


def _add_symbol(caps, kind, definition, data, by_name_node, seen_nodes, macro: str = "") -> None:
    node = caps[definition][0]
    name_node = caps["name"][0]
    body = caps.get("body", [None])[0]
    sym = Symbol(
        kind=kind,
        name=_text(data, name_node),
        start_byte=node.start_byte,
        end_byte=node.end_byte,
        start_line=node.start_point[0] + 1,
        end_line=_content_end_line(data, node),
        name_line=name_node.start_point[0] + 1,
        macro=macro,
    )
    if body is not None:
        sym.body_start_line = body.start_point[0] + 1
        sym.body_end_line = _content_end_line(data, body)
        sym.body_node = body
    sym.signature = _signature(data, name_node, body, node)
    _attach_leading(sym, caps.get("doc", []), [*caps.get("decorator", []), *caps.get("leading", [])], node, data)
    twin = by_name_node.get(name_node.start_byte)
    if twin is None:
        if (node.start_byte, node.end_byte) in seen_nodes:
            return  # one node matched under two names: the first pattern in the query file wins
        seen_nodes.add((node.start_byte, node.end_byte))
        by_name_node[name_node.start_byte] = sym
        return
    # The same definition matched twice (a decorated wrapper and the bare definition, an export and a plain
    # pattern): keep the widest range and the richest facts under its one name node.
    wide, narrow = (twin, sym) if twin.end_byte - twin.start_byte >= sym.end_byte - sym.start_byte else (sym, twin)
    if wide.body_start_line is None:
        wide.body_start_line, wide.body_end_line = narrow.body_start_line, narrow.body_end_line
        wide.body_node = narrow.body_node
    wide.doc = wide.doc or narrow.doc
    wide.signature = wide.signature or narrow.signature
    if wide.kind == "function" and narrow.kind != "function":
        wide.kind = narrow.kind
    seen_nodes.add((node.start_byte, node.end_byte))
    by_name_node[name_node.start_byte] = wide


def _signature(data: bytes, name_node, body, node) -> str:
    # From the start of the line that names the symbol to the last token before its body (comments between them are
    # not signature); without a body, or with a body before the name (typedef struct {...} t), the naming line.
    line_start = data.rfind(b"\n", 0, name_node.start_byte) + 1
    line_start = max(line_start, node.start_byte)
    if body is not None and body.start_byte > name_node.start_byte:
        before = body.prev_sibling
        while before is not None and before.is_extra:
            before = before.prev_sibling
        end = before.end_byte if before is not None and before.end_byte > name_node.start_byte else body.start_byte
    else:
        if body is not None:
            line_start = node.start_byte
        end = data.find(b"\n", max(name_node.end_byte, line_start))
        end = node.end_byte if end == -1 else min(end, node.end_byte)
    text = " ".join(data[line_start:end].decode("utf-8", "replace").split())
    return text.rstrip("{:= ").strip()[:300]


def _attach_leading(sym: Symbol, doc_nodes, decorator_nodes, node, data: bytes) -> None:
    """Give the symbol the doc comments (and decorators/attributes, or a type signature) written just above it.

    Only the run of such nodes that ends on the line just above the definition belongs to it; the symbol then starts
    at the first of them, so its comment and attributes travel with its chunk."""
    if not doc_nodes and not decorator_nodes:
        return
    inside = [n for n in doc_nodes if n.start_byte >= node.start_byte]
    leading = sorted((n for n in [*doc_nodes, *decorator_nodes] if n.end_byte <= node.start_byte),
                     key=lambda n: n.start_byte)
    run = []
    next_line = sym.start_line
    for n in reversed(leading):
        if _end_line(n) < next_line - 1:
            break
        run.insert(0, n)
        next_line = n.start_point[0] + 1
    if run:
        sym.start_line = run[0].start_point[0] + 1
        sym.start_byte = run[0].start_byte
    doc_ids = {(n.start_byte, n.end_byte) for n in doc_nodes}
    texts = [_text(data, n) for n in run + inside if (n.start_byte, n.end_byte) in doc_ids]
    if texts:
        sym.doc = clean_doc(texts)


def _nest(symbols: list[Symbol]) -> None:
    stack: list[int] = []
    for i, sym in enumerate(symbols):
        while stack and symbols[stack[-1]].end_byte < sym.end_byte:
            stack.pop()
        if stack:
            parent = symbols[stack[-1]]
            sym.parent = stack[-1]
            parent.children.append(i)
            if sym.kind == "function" and parent.kind in CLASS_LIKE:
                sym.kind = "method"
        sym.qualified = f"{symbols[sym.parent].qualified}.{sym.name}" if sym.parent is not None else sym.name
        stack.append(i)


def _innermost(symbols: list[Symbol], starts: list[int], offset: int) -> int | None:
    i = bisect.bisect_right(starts, offset) - 1
    while i is not None and i >= 0:
        if symbols[i].end_byte > offset:
            return i
        i = symbols[i].parent
    return None


def _place_routes(symbols, starts, routes) -> list[Endpoint]:
    by_name: dict[str, int] = {}
    for i, sym in enumerate(symbols):
        by_name.setdefault(sym.name, i)
    found = []
    for start, _end, endpoint in routes:
        # A handler named in the route wins (routes registered in a setup function); else the symbol around it.
        owner = by_name.get(endpoint.handler.rsplit(".", 1)[-1]) if endpoint.handler else None
        if owner is None:
            owner = _innermost(symbols, starts, start)
        if owner is not None:
            symbols[owner].endpoints.append(endpoint)
            endpoint.handler = symbols[owner].qualified
        found.append(endpoint)
    return found
