"""The package's import structure: no import cycle, counting the imports inside functions too; no import of
another module's private name; and a bottom layer that imports nothing above it.

An import inside a function is a dependency all the same (it runs when the function is called, which is how a heavy
or late dependency is taken), so the layering is checked over every import statement: a lower module never imports
one above it, not even late. This keeps each idea in one place, importable by its public name.
The bottom layer is the vocabulary every step shares (errors, printable text, TOML, token counts, the chunk records,
import statements): any module may import it, and importing it runs nothing else of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "localidx"
BOTTOM = frozenset({"localidx", "localidx.errors", "localidx.imports", "localidx.records", "localidx.text.safe",
                    "localidx.text.tokens", "localidx.tomlfile"})


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imported(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement names (``from localidx.text import tokens`` names ``localidx.text.tokens``)."""
    targets: list[str] = []
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("localidx"):
        targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    elif isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    return {t for t in targets if t in modules}


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere: at the top, inside a function or under ``if``."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            edges[name].update(_imported(node, modules) - {name})
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_edges_count_imports_inside_functions(tmp_path):
    (tmp_path / "localidx").mkdir()
    (tmp_path / "localidx" / "a.py").write_text("def f():\n    from localidx import b\n", encoding="utf-8")
    (tmp_path / "localidx" / "b.py").write_text("import localidx.a\n", encoding="utf-8")
    modules = {"localidx.a": tmp_path / "localidx" / "a.py", "localidx.b": tmp_path / "localidx" / "b.py"}
    assert _edges(modules) == {"localidx.a": {"localidx.b"}, "localidx.b": {"localidx.a"}}
    assert _cycle(_edges(modules)) is not None


def test_no_import_cycle_counting_imports_inside_functions():
    modules = _modules()
    assert len(modules) > 50  # the walk found the package
    assert _cycle(_edges(modules)) is None


def test_no_module_imports_another_modules_private_name():
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("localidx"):
                found += [f"{name} imports {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []


def test_the_bottom_layer_imports_nothing_above_it():
    modules = _modules()
    assert BOTTOM <= modules.keys()  # a renamed bottom module must be renamed here too
    upward = []
    for name in sorted(BOTTOM):
        # Every import, also inside functions: a late import upward is still a dependency upward.
        for node in ast.walk(ast.parse(modules[name].read_text(encoding="utf-8"))):
            upward += [f"{name} imports {target}" for target in sorted(_imported(node, modules) - BOTTOM)]
    assert upward == []
