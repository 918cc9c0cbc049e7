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
