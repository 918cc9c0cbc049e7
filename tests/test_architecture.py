"""The package's import structure: no import cycle, counting the imports inside functions too; no import of
another module's private name; a bottom layer that imports nothing above it; imports that run down the layers but
for the two named in docs/architecture.md; and a package root a reader can take in (at most ten modules beside the
step folders, no module over 900 lines).

An import inside a function is a dependency all the same (it runs when the function is called, which is how a heavy
or late dependency is taken), so the layering is checked over every import statement: a lower module never imports
one above it, not even late, except where this file and the architecture document both name it. This keeps each
idea in one place, importable by its public name.
The bottom layer is the vocabulary every step shares (errors, printable text, TOML, token counts, the chunk records,
import statements): any module may import it, and importing it runs nothing else of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "localidx"
BOTTOM = frozenset({"localidx", "localidx.errors", "localidx.imports", "localidx.records", "localidx.text.safe",
                    "localidx.text.tokens", "localidx.tomlfile"})
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# The layers, lowest first, as docs/architecture.md draws them. A place is a module at the package's root or a
# folder; a module may import its own layer and the layers below it.
LAYERS = (
    ("localidx", "errors", "records", "imports", "tomlfile", "lazylog", "text"),  # the bottom
    ("safety", "embed"),  # they import the bottom only
    ("config", "gitrepo", "paths", "protocol", "llm"),  # the services every step asks
    ("languages", "discover"),
    ("chunk",),  # parse -> chunkers -> finalize -> enrich
    ("store",),
    ("index",),  # the single writer and what reports on it
    ("cluster",),
    ("retrieve",),
    ("daemon",),
    ("interface", "__main__"),
)
# The only imports that run up the layers: each inside a function, each explained in docs/architecture.md.
UPWARD = frozenset({
    ("localidx.discover.root", "localidx.index.registry"),  # outside git, the nearest indexed directory
    ("localidx.store.index", "localidx.index.explain"),  # the explanations are part of a chunk table's identity
})
MAX_ROOT_MODULES = 10  # beside __init__.py and __main__.py
MAX_LINES = 900


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imported(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement names (``from localidx.index import registry`` names
    ``localidx.index.registry`` and the package ``localidx.index``, whose ``__init__`` runs first)."""
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


def _place(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if _place(module) in layer)


def _upward(modules: dict[str, Path], top_level_only: bool = False) -> set[tuple[str, str]]:
    """(importer, imported) for every import of a module in a higher layer; a package named only as the way to one
    of its modules (``from localidx.index import registry``) counts as that module."""
    found = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in (tree.body if top_level_only else ast.walk(tree)):
            targets = _imported(node, modules) - {name}
            targets -= {t for t in targets if any(o.startswith(t + ".") for o in targets)}
            found |= {(name, t) for t in targets if _layer(t) > _layer(name)}
    return found


def test_the_package_root_holds_the_foundations_only():
    root_modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(root_modules) <= MAX_ROOT_MODULES, root_modules


def test_no_module_is_over_900_lines():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_every_place_has_a_layer():
    placed = {place for layer in LAYERS for place in layer}
    assert {_place(name) for name in _modules()} - placed == set()  # a new folder is given its layer here


def test_imports_run_down_the_layers_but_the_named_few():
    modules = _modules()
    assert _upward(modules) == UPWARD
    assert _upward(modules, top_level_only=True) == set()  # those few are late: importing the module runs none
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for importer, imported in sorted(UPWARD):
        short = (importer.removeprefix("localidx."), imported.removeprefix("localidx."))
        assert any(short[0] in line and short[1] in line for line in text.splitlines()), short


def test_the_layer_check_finds_an_import_that_runs_up(tmp_path):
    (tmp_path / "localidx" / "store").mkdir(parents=True)
    (tmp_path / "localidx" / "store" / "a.py").write_text("def f():\n    from localidx.interface import cli\n",
                                                          encoding="utf-8")
    (tmp_path / "localidx" / "interface").mkdir()
    (tmp_path / "localidx" / "interface" / "cli.py").write_text("", encoding="utf-8")
    modules = {"localidx.store.a": tmp_path / "localidx" / "store" / "a.py",
               "localidx.interface.cli": tmp_path / "localidx" / "interface" / "cli.py"}
    assert _upward(modules) == {("localidx.store.a", "localidx.interface.cli")}
    assert _upward(modules, top_level_only=True) == set()
