"""parse: source bytes -> Symbol records through the language's queries, as the chunker and call relations read them.

What a user would notice: a method is found under its class by its qualified name, a decorator and a docstring travel
with their function, calls are credited to the function that makes them ("who calls X" depends on it), an HTTP route
names its handler, a syntax error elsewhere costs no good function, and a parse that runs too long stops with an
error instead of hanging the indexer.
"""

from __future__ import annotations

import pytest

from localidx.chunk.parse import ParseError, clean_doc, normalize_verb, parse
from localidx.languages import language_for_path

ORDERS = b'''"""Orders service."""
import os
from app.db import save


@app.route("/orders", methods=["POST"])
def create_order(payload):
    """Create an order from a payload."""
    order = build(payload)
    save(order)
    return order


class OrderBook:
    """Keeps orders."""

    def add(self, order):
        self.orders.append(order)
        validate(order)

    @property
    def size(self):
        return len(self.orders)


setup_logging()
'''


@pytest.fixture(scope="module")
def orders():
    return parse(language_for_path("svc/orders.py"), ORDERS)


def _by_name(parsed) -> dict:
    return {s.qualified: s for s in parsed.symbols}


def test_symbols_come_in_file_order_with_methods_under_their_class(orders):
    assert [(s.kind, s.qualified) for s in orders.symbols] == [
        ("function", "create_order"), ("class", "OrderBook"), ("method", "OrderBook.add"), ("method", "OrderBook.size")]
    book = orders.symbols.index(_by_name(orders)["OrderBook"])
    children = [orders.symbols[i].name for i in orders.symbols[book].children]
    assert children == ["add", "size"]
    assert all(orders.symbols[i].parent == book for i in orders.symbols[book].children)
    # A parent encloses its children.
    parent = orders.symbols[book]
    assert all(parent.start_line <= orders.symbols[i].start_line <= orders.symbols[i].end_line <= parent.end_line
               for i in parent.children)


def test_decorators_and_docstrings_travel_with_their_function(orders):
    symbols = _by_name(orders)
    create = symbols["create_order"]
    assert create.start_line == 6  # the decorator's line, not the def's: the chunk shows the route
    assert create.decorators == ['@app.route("/orders", methods=["POST"])']
    assert create.doc == "Create an order from a payload."
    assert create.signature == "def create_order(payload)"
    assert symbols["OrderBook.size"].decorators == ["@property"]
    assert symbols["OrderBook"].doc == "Keeps orders."


def test_calls_are_credited_to_the_innermost_symbol_and_module_calls_to_none(orders):
    symbols = _by_name(orders)
    assert {"build", "save"} <= set(symbols["create_order"].calls)
    assert symbols["OrderBook.add"].calls == ["append", "validate"]
    assert "validate" not in symbols["OrderBook"].calls  # the method's call is not the class's
    assert orders.module_calls == [(26, "setup_logging")]


def test_imports_module_doc_and_routes_are_file_facts(orders):
    assert orders.imports == [(2, 2, "import os"), (3, 3, "from app.db import save")]
    assert orders.module_doc == "Orders service."
    [route] = orders.endpoints
    assert (route.method, route.path, route.handler, route.line) == ("POST", "/orders", "create_order", 6)
    assert _by_name(orders)["create_order"].endpoints == [route]
    assert orders.has_errors is False


def test_a_syntax_error_costs_no_good_function():
    parsed = parse(language_for_path("broken.py"), b"def broken(:\n    return 1\n\n\ndef fine():\n    return 2\n")
    assert parsed.has_errors is True
    assert ("fine", 5) in [(s.name, s.start_line) for s in parsed.symbols]


def test_another_grammar_reads_through_its_own_queries():
    source = b"export class Cart {\n  total(items: number[]) { return sum(items); }\n}\nfunction sum(xs) { return 0; }\n"
    parsed = parse(language_for_path("web/cart.ts"), source)
    assert [(s.kind, s.qualified) for s in parsed.symbols] == [
        ("class", "Cart"), ("method", "Cart.total"), ("function", "sum")]
    assert _by_name(parsed)["Cart.total"].calls == ["sum"]


def test_a_parse_past_its_deadline_is_an_error_not_a_hang():
    with pytest.raises(ParseError, match="timed out"):
        parse(language_for_path("big.py"), ORDERS * 2000, timeout_s=1e-9)
    assert len(parse(language_for_path("big.py"), ORDERS * 3, timeout_s=0).symbols) == 12  # 0: no deadline


def test_doc_comments_are_cleaned_and_route_verbs_normalised():
    assert clean_doc('"""  Sum the\n    lines.  """') == "Sum the lines."
    assert clean_doc(["/// Adds two numbers.", "/// <summary>Fast.</summary>"]) == "Adds two numbers. Fast."
    assert [normalize_verb(v) for v in ("get", "PostMapping", "HttpDelete", "MapPut", "HandleFunc", "route")] == [
        "GET", "POST", "DELETE", "PUT", "ANY", "ANY"]
