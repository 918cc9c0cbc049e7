"""A query that is a name finds the name's definition first: in each search mode, in the files view, in context packs.

What a user would notice: `localidx search Response` answers with `class Response`, not with the functions that
use Response most; `Client` beats `ClientState`; the source definition comes before a test's copy of the name;
`class Response`, `Client.send`, `pkg.models.Response`, `send(` and `opendataset` find theirs too; questions still
rank as they did.
"""

from __future__ import annotations

import pytest

from conftest import indexed_once
from localidx.retrieve.context import build_for_repository
from localidx.retrieve.search import search_response
from localidx.retrieve.transforms import name_query

_USES = "\n".join(
    f"def handle_{n}(request):\n"
    f"    \"\"\"Turn the request into a Response; a Response for every Response case.\"\"\"\n"
    f"    response = Response(request.status)\n"
    f"    if isinstance(response, Response):\n"
    f"        return Response(response.status)\n"
    f"    return response\n\n"
    for n in range(12))

FILES = {
    "pkg/models.py": (
        "class Response:\n"
        "    \"\"\"What a server answered.\"\"\"\n\n"
        "    def __init__(self, status):\n"
        "        self.status = status\n"
        "        self.headers = {}\n"
        "        self.body = b''\n\n"
        "    def is_error(self):\n"
        "        return self.status >= 400\n\n\n"
        "def open_dataset(path):\n"
        "    \"\"\"Read a dataset from a file.\"\"\"\n"
        "    return load_rows(path)\n"
    ),
    "pkg/handlers.py": "from pkg.models import Response\n\n\n" + _USES,
    "pkg/client.py": (
        "class ClientState:\n"
        "    \"\"\"The Client's state: a Client is open, or the Client is closed.\"\"\"\n"
        "    OPEN = 'open'  # a Client\n"
        "    CLOSED = 'closed'  # a Client\n\n\n"
        "class Client:\n"
        "    \"\"\"Sends requests.\"\"\"\n\n"
        "    def send(self, request):\n"
        "        return self.transport.handle(request)\n"
    ),
    "tests/test_models.py": (
        "class Response:\n"
        "    \"\"\"A stand-in Response for the Response tests.\"\"\"\n"
        "    status = 200\n\n\n"
        "def test_response_is_error():\n"
        "    assert Response().status == 200\n"
    ),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    with indexed_once(tmp_path_factory, "names", FILES) as opened:
        yield opened


def _first(index, query, **options) -> dict:
    return search_response(index, query, **options)["matches"][0]


@pytest.mark.parametrize("mode", ["bm25", "hybrid", "vector"])
def test_a_bare_class_name_finds_its_source_definition_first_in_every_mode(repo, mode):
    _root, _settings, index = repo
    for k in (1, 5, 10):
        first = _first(index, "Response", mode=mode, k=k)
        assert (first["path"], first["symbol"], first["start_line"]) == ("pkg/models.py", "Response", 1)
        assert first["definition"] is True


def test_a_name_beats_longer_names_that_contain_it(repo):
    _root, _settings, index = repo
    first = _first(index, "Client", mode="bm25")
    assert (first["path"], first["symbol"]) == ("pkg/client.py", "Client")


@pytest.mark.parametrize("query, symbol", [
    ("class Response", "Response"), ("Client.send", "Client.send"), ("pkg.client.Client.send", "Client.send"),
    ("send(", "Client.send"), ("def open_dataset", "open_dataset"), ("opendataset", "open_dataset"),
    ("OpenDataset", "open_dataset"), ("models.Response", "Response"),
])
def test_keywords_qualified_names_calls_and_case_variants_find_the_definition(repo, query, symbol):
    _root, _settings, index = repo
    first = _first(index, query)
    assert first["symbol"] == symbol and not first["path"].startswith("tests/")


def test_the_files_view_and_the_context_pack_put_the_defining_file_first(repo):
    _root, settings, index = repo
    files = search_response(index, "Response", files=True, k=5)["files"]
    assert files[0]["path"] == "pkg/models.py"
    pack = build_for_repository(index, "Response", settings=settings)
    assert (pack["matches"][0]["path"], pack["matches"][0]["symbol"]) == ("pkg/models.py", "Response")


def test_the_test_copy_of_a_name_comes_after_the_source_definition(repo):
    _root, _settings, index = repo
    found = search_response(index, "Response", k=10, mode="bm25")["matches"]
    definitions = [m["path"] for m in found if m["definition"]]
    assert definitions[:2] == ["pkg/models.py", "tests/test_models.py"]


def test_questions_and_reports_are_not_read_as_names():
    assert name_query("where are redirects followed") is None
    assert name_query("how does the client send a request?") is None
    assert name_query("Traceback (most recent call last):\n  File \"x.py\", line 1") is None
    assert name_query("Response").names == (("Response",),)
    assert name_query("class Response").wants == "type"
    assert name_query("serde::Deserialize").names == (("serde", "Deserialize"),)
    assert name_query("Foo#bar open_dataset(").names == (("Foo", "bar"), ("open_dataset",))


def test_a_question_ranks_without_definitions_put_first(repo):
    _root, _settings, index = repo
    found = search_response(index, "which status makes an error", k=5, mode="bm25")["matches"]
    assert not any(m["definition"] for m in found)


# Names with characters beyond letters, digits and `_`: Haskell's primes, Elixir's, Julia's and Ruby's `!` and `?`,
# PowerShell's Verb-Noun and scoped names; and names defined in several chunks of one file (Julia's methods, a type
# and its constructors). Each sits beside a name or callers that outrank it when the query drops those characters.
_HASKELL_USES = "\n".join(
    f"attrValue{n} :: [(String, String)] -> String\n"
    f"attrValue{n} attrs = maybe \"none\" id (findText \"key{n}\" attrs) ++ maybe \"\" id (findText \"alt\" attrs)\n"
    for n in range(6))

_POWERSHELL_USES = "\n".join(
    f"function Show-Thing{n} {{\n"
    f"    param([string]$Name)\n"
    f"    # Get-Thing finds the thing; Get-Thing again for its parent thing.\n"
    f"    $thing = Get-Thing -Name $Name\n"
    f"    $parent = Get-Thing -Name $thing.Parent\n"
    f"    $secret = Get-Secret -Name $Name\n"
    f"    Write-Output \"$($thing.Name) in $($parent.Name) with $secret\"\n"
    f"}}\n"
    for n in range(6))

NAME_FILES = {
    "src/Attr.hs": (
        "module Attr where\n\n"
        "-- | The text of an attribute, if the element has it.\n"
        "findText :: String -> [(String, String)] -> Maybe String\n"
        "findText name attrs = lookup name attrs\n\n"
        "-- | The text of an attribute, or the empty text.\n"
        "findText' :: String -> [(String, String)] -> String\n"
        "findText' name attrs = case findText name attrs of\n"
        "  Just text -> text\n"
        "  Nothing -> \"\"\n\n"
        + _HASKELL_USES
    ),
    "lib/orders.ex": (
        "defmodule Shop.Orders do\n"
        "  @moduledoc \"Orders of the shop.\"\n\n"
        "  def fetch_order(repo, id) do\n"
        "    case repo.get(id) do\n"
        "      nil -> {:error, :not_found}\n"
        "      order -> {:ok, order}\n"
        "    end\n"
        "  end\n\n"
        "  def fetch_order!(repo, id) do\n"
        "    case fetch_order(repo, id) do\n"
        "      {:ok, order} -> order\n"
        "      {:error, reason} -> raise ArgumentError, \"no order #{id}: #{inspect(reason)}\"\n"
        "    end\n"
        "  end\n\n"
        "  def total(repo, id), do: fetch_order!(repo, id).lines |> Enum.map(& &1.price) |> Enum.sum()\n\n"
        "  def ship(repo, id) do\n"
        "    order = fetch_order!(repo, id)\n"
        "    # fetch_order! raises for an unknown order: fetch_order! is what shipping wants\n"
        "    repo.update(%{order | shipped: true, lines: fetch_order!(repo, id).lines})\n"
        "  end\n"
        "end\n"
    ),
    "src/Things.ps1": (
        "function Get-Thing {\n"
        "    <#\n"
        "    .SYNOPSIS\n"
        "    Reads one thing from the store.\n"
        "    #>\n"
        "    param([string]$Name)\n"
        "    $store = Join-Path $PSScriptRoot 'things'\n"
        "    Get-Content -Path (Join-Path $store $Name) | ConvertFrom-Json\n"
        "}\n\n"
        "function script:Get-Secret {\n"
        "    param([string]$Name)\n"
        "    $vault = Join-Path $PSScriptRoot 'vault'\n"
        "    Get-Content -Path (Join-Path $vault $Name) -Raw\n"
        "}\n"
    ),
    "src/Show.ps1": _POWERSHELL_USES,
    "src/heaps.jl": (
        "\"\"\"\n"
        "    heappush!(xs, x, o=Forward)\n\n"
        "Push `x` onto the heap `xs` kept in order `o`.\n"
        "\"\"\"\n"
        "function heappush!(xs::AbstractArray, x, o::Ordering=Forward)\n"
        "    push!(xs, x)\n"
        "    percolate_up!(xs, length(xs), o)\n"
        "    return xs\n"
        "end\n\n"
        "heappush!(h::BinaryHeap, x) = (heappush!(h.valtree, x, h.ordering); h)\n"
        "heappush!(h::MinHeap, x) = (heappush!(h.valtree, x, Forward); h)\n"
        "heappush!(h::MaxHeap, x) = (heappush!(h.valtree, x, Reverse); h)\n\n"
        "\"\"\"A heap whose values are kept in a tree of nodes, with the ordering of its heappush! and pop!.\"\"\"\n"
        "mutable struct NodeHeap{T}\n"
        "    valtree::Vector{T}\n"
        "    ordering::Ordering\n"
        "    count::Int\n"
        "end\n\n"
        "NodeHeap{T}() where {T} = NodeHeap{T}(T[], Forward, 0)\n"
        "NodeHeap(xs::Vector{T}) where {T} = NodeHeap{T}(heapify(xs), Forward, length(xs))\n"
        "NodeHeap(xs::Vector{T}, o::Ordering) where {T} = NodeHeap{T}(heapify(xs, o), o, length(xs))\n"
    ),
}


@pytest.fixture(scope="module")
def names_repo(tmp_path_factory):
    with indexed_once(tmp_path_factory, "odd-names", NAME_FILES) as opened:
        yield opened


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
@pytest.mark.parametrize("query, path, line", [
    ("findText'", "src/Attr.hs", 8), ("findtext'", "src/Attr.hs", 8), ("findText'(", "src/Attr.hs", 8),
    ("findText", "src/Attr.hs", 4),
    ("fetch_order!", "lib/orders.ex", 11), ("def fetch_order!", "lib/orders.ex", 11),
    ("fetchorder!", "lib/orders.ex", 11), ("Orders.fetch_order!", "lib/orders.ex", 11),
    ("Get-Thing", "src/Things.ps1", 1), ("function Get-Thing", "src/Things.ps1", 1), ("getthing", "src/Things.ps1", 1),
    ("Get-Secret", "src/Things.ps1", 11), ("script:Get-Secret", "src/Things.ps1", 11),
])
def test_names_with_primes_bangs_dashes_and_scopes_find_their_definition_first(names_repo, mode, query, path, line):
    _root, _settings, index = names_repo
    first = _first(index, query, mode=mode)
    assert first["path"] == path and first["start_line"] <= line <= first["end_line"], first
    assert first["definition"] is True


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
@pytest.mark.parametrize("query, line", [("heappush!", 6), ("NodeHeap", 16)])
def test_a_name_defined_in_several_chunks_of_a_file_finds_the_first(names_repo, mode, query, line):
    """A function's first method (the one with the docstring), a type before its constructors: the later chunks
    that say the name more often come after."""
    _root, _settings, index = names_repo
    found = search_response(index, query, k=10, mode=mode)["matches"]
    assert found[0]["path"] == "src/heaps.jl" and found[0]["start_line"] <= line <= found[0]["end_line"], found[0]
    assert [m["definition"] for m in found if m["path"] == "src/heaps.jl"].count(True) == 1


def test_a_name_keeps_the_characters_its_language_allows():
    assert name_query("findAttrText'").names == (("findAttrText'",),)
    assert name_query("heappush!(").names == (("heappush!",),)
    assert name_query("empty?").names == (("empty?",),)
    assert name_query("function Remove-GitBranch").names == (("Remove-GitBranch",),)
    assert name_query("script:Get-Secret").names == (("script", "Get-Secret"),)
    assert name_query("Map.foldl'").names == (("Map", "foldl'"),)
    assert name_query("read-") is None and name_query("-rf") is None and name_query("what's") is None
