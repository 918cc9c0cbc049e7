"""retrieve/expand: neighbour expansion on a real LanceDB index of a real git repository (fake embedder).

What a user would notice in a context pack: the code around a match (LINEAR), its class and sibling methods
(PARENT_SYMBOL) or what it calls and what calls it (CALL_GRAPH) comes right after the match it explains, scored just
under it, never twice, never a whole-file summary, and never more than the profile's limit. The strategies chosen
through profiles are tested end to end in tests/test_context.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from conftest import indexed_once
from localidx.retrieve.expand import NEIGHBOR_SCORE, expand
from localidx.retrieve.guard import check
from localidx.retrieve.profiles import get_profile
from localidx.retrieve.filters import Staleness
from localidx.retrieve.search import COLUMNS, match_from_row
from localidx.store.relations import Relations

SHAPES = '''"""Shapes and the canvas that draws them."""


def area(shape):
    """The area of a rectangle: its width times its height, in square units."""
    width, height = shape.width, shape.height
    if width < 0 or height < 0:
        raise ValueError("a rectangle cannot have a negative side")
    return width * height


def perimeter(shape):
    """The perimeter of a rectangle: twice the sum of its width and height."""
    width, height = shape.width, shape.height
    if width < 0 or height < 0:
        raise ValueError("a rectangle cannot have a negative side")
    return 2 * (width + height)


def describe(shape):
    """A one-line description of a shape with its area and perimeter."""
    surface = area(shape)
    border = perimeter(shape)
    label = getattr(shape, "name", "shape")
    return f"{label}: area {surface}, perimeter {border}"


class Canvas:
    """Keeps the shapes drawn so far and describes each one as it is drawn."""

    def draw(self, shape):
        """Add a shape to the canvas and return its description."""
        self.shapes.append(shape)
        self.history.append(("draw", shape))
        for listener in self.listeners:
            listener.shape_drawn(shape, len(self.shapes))
        if len(self.shapes) > self.limit:
            raise OverflowError("the canvas holds too many shapes to draw another one")
        return describe(shape)

    def clear(self):
        """Remove every shape from the canvas and remember that it was cleared."""
        self.history.append(("clear", len(self.shapes)))
        for listener in self.listeners:
            listener.canvas_cleared(len(self.shapes))
        if self.locked:
            raise PermissionError("a locked canvas cannot be cleared by anyone")
        self.shapes = []
        return self

    def count(self):
        """How many shapes the canvas holds right now, after any clearing."""
        total = len(self.shapes)
        self.history.append(("count", total))
        for listener in self.listeners:
            listener.shapes_counted(total)
        if total > self.limit:
            raise OverflowError("the canvas somehow holds more shapes than its limit")
        return total
'''


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """(index, pinned table) of a repository holding SHAPES, indexed once for the module."""
    with indexed_once(tmp_path_factory, "expand", {"geometry/shapes.py": SHAPES}) as (_root, _settings, index):
        yield index, index.store.snapshot()


def profile(strategy: str, **values):
    name, table = get_profile("balanced")
    return dataclasses.replace(check(name, table, "question").profile, neighbor_strategy=strategy, **values)


def run(shapes, matches: list[dict], strategy: str, **values) -> tuple[list[dict], int]:
    index, table = shapes
    return expand(matches, profile(strategy, **values), index.store, table, Staleness(index),
                  Relations(index.catalog))


def hit(shapes, symbol: str, score: float = 0.8) -> dict:
    index, table = shapes
    rows = [r for r in table.search().select(COLUMNS).limit(None).to_list() if r["symbol"] == symbol]
    assert len(rows) == 1, (symbol, [r["symbol"] for r in table.search().select(COLUMNS).limit(None).to_list()])
    return match_from_row(rows[0], score, None, None, Staleness(index)).to_dict()


def symbols(matches: list[dict]) -> list[str]:
    return [m["symbol"] for m in matches]


def test_linear_adds_the_nearest_chunks_on_each_side_right_after_the_hit(shapes):
    first, last = hit(shapes, "perimeter", 0.8), hit(shapes, "Canvas.count", 0.5)
    out, added = run(shapes, [first, last], "LINEAR", neighbor_hits=1)
    assert added == 2
    assert symbols(out) == ["perimeter", "area", "describe", "Canvas.count"]
    for neighbour in out[1:3]:
        assert neighbour["score"] == pytest.approx(0.8 * NEIGHBOR_SCORE)
        assert neighbour["neighborOfSpanHash"] == first["span_hash"] and neighbour["neighborStrategy"] == "LINEAR"
        assert neighbour["reasons"] == [f"linear neighbour of geometry/shapes.py:{first['start_line']}-"
                                        f"{first['end_line']}"]
    assert all(m["kind"] != "summary" for m in out)  # the whole-file summary contains the hit: never a neighbour


def test_parent_symbol_adds_the_class_skeleton_and_the_nearest_siblings(shapes):
    out, added = run(shapes, [hit(shapes, "Canvas.clear")], "PARENT_SYMBOL")
    assert added == 3
    assert symbols(out)[0] == "Canvas.clear"
    assert symbols(out)[1] == "Canvas"  # the class first, then a sibling on each side
    assert set(symbols(out)[2:]) == {"Canvas.draw", "Canvas.count"}


def test_call_graph_adds_what_the_hit_calls_and_what_calls_it(shapes):
    out, added = run(shapes, [hit(shapes, "describe")], "CALL_GRAPH")
    assert symbols(out)[0] == "describe"
    assert set(symbols(out)[1:]) == {"area", "perimeter", "Canvas.draw"}
    assert added == 3


def test_the_limit_holds_across_hits_and_only_the_first_hits_are_expanded(shapes):
    matches = [hit(shapes, "perimeter", 0.8), hit(shapes, "Canvas.clear", 0.7)]
    out, added = run(shapes, [dict(m) for m in matches], "LINEAR", neighbor_limit=1)
    assert added == 1 and symbols(out) == ["perimeter", "area", "Canvas.clear"]
    out, added = run(shapes, [dict(m) for m in matches], "LINEAR", neighbor_hits=1, neighbor_radius=2)
    assert added == 4  # two on each side of the first hit, none for the second
    assert symbols(out)[-1] == "Canvas.clear"


def test_a_chunk_already_in_the_list_is_not_added_again(shapes):
    matches = [hit(shapes, "perimeter", 0.8), hit(shapes, "area", 0.6)]
    out, added = run(shapes, matches, "LINEAR", neighbor_hits=1)
    assert symbols(out) == ["perimeter", "describe", "area"]
    assert added == 1


def test_off_or_no_room_adds_nothing(shapes):
    matches = [hit(shapes, "perimeter")]
    assert run(shapes, matches, "OFF") == (matches, 0)
    assert run(shapes, matches, "LINEAR", neighbor_limit=0) == (matches, 0)
    assert run(shapes, matches, "LINEAR", neighbor_hits=0) == (matches, 0)
