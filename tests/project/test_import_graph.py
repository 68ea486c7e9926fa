"""The package's import graph: no circles, layers that point down, no hidden imports.

import-linter (`make contracts`) checks the layers for module-level imports only (TYPE_CHECKING
blocks are excluded there, and it cannot see `importlib`). This test builds the graph itself,
every module of `delta_ops` a node and every import of one an edge, counting imports inside
functions and under ``if TYPE_CHECKING:``, and holds it to the same rules:

* no circle of any length;
* every edge points down the layers pyproject.toml declares for import-linter (siblings
  separated by ``|`` do not import each other);
* no module is imported by name at run time (`importlib.import_module`, `__import__`), so the
  graph above is the whole truth; the one exception is the operations registry, which
  imports each operation's module by the name its `Entry` holds as data: the graph gets an
  edge from the registry to each entry's module, read from `ENTRIES` itself;
* an import of a delta_ops module inside a function says why in a comment just above it (an
  optional extra, start-up cost): the exceptions are named where they are.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE = "delta_ops"
#: the module that imports each operation by the name its entry holds (`Entry.load`)
REGISTRY = "delta_ops.ops.registry"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    local: bool  # inside a function (or a class body's method)


def _modules(root: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges(root: Path, package: str) -> tuple[dict[str, Path], list[Edge]]:
    modules = _modules(root, package)
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        base = module if path.name == "__init__.py" else module.rpartition(".")[0]
        local_nodes = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    origin = ".".join(parts + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                # `from pkg import submodule` imports the submodule; a name imports its module
                names = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
                    for a in node.names
                ]
            for name in names:
                if name.split(".")[0] != package:
                    continue
                target = _resolve(name, modules)
                if target is not None and target != module:
                    edges.append(
                        Edge(module, target, getattr(node, "lineno", 0), id(node) in local_nodes)
                    )
    if package == PACKAGE:
        edges.extend(_registry_edges())
    return modules, edges


def _registry_edges() -> list[Edge]:
    """The registry's imports of the operations' modules: one local edge per entry (the
    registry imports a module when its operation is first looked up)."""
    from delta_ops.ops import registry

    lines = Path(registry.__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "import_module(self.module_path)" in text)
    return [Edge(REGISTRY, entry.module_path, line, local=True) for entry in registry.ENTRIES]


def _circles(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    out: dict[str, set[str]] = {n: set() for n in nodes}
    for edge in edges:
        out[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(out[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return found


def _layer_of(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    """(depth, the sibling's name) of the layer holding `module`; 0 is the top."""
    for depth, siblings in enumerate(layers):
        for sibling in siblings:
            if module == sibling or module.startswith(sibling + "."):
                return depth, sibling
    return None


def _declared_layers() -> list[list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [layered] = [c for c in contracts if c["type"] == "layers"]
    return [[part.strip() for part in layer.split("|")] for layer in layered["layers"]]


def _layer_violations(edges: list[Edge], layers: list[list[str]]) -> list[str]:
    bad = []
    for edge in edges:
        source, target = _layer_of(edge.source, layers), _layer_of(edge.target, layers)
        if source is None or target is None:
            continue  # the package root and its leaf modules (errors, clock, version)
        upward = target[0] < source[0]
        across = target[0] == source[0] and target[1] != source[1]
        if upward or across:
            bad.append(f"{edge.source}:{edge.line} imports {edge.target}")
    return bad


def _unexplained_local_imports(modules: dict[str, Path], edges: list[Edge]) -> list[str]:
    """Function-local imports of delta_ops modules without a comment on the two lines above."""
    bad = []
    for edge in edges:
        if not edge.local:
            continue
        lines = modules[edge.source].read_text().splitlines()
        above = lines[max(0, edge.line - 3) : edge.line - 1]
        if not any(line.strip().startswith("#") for line in above):
            bad.append(f"{edge.source}:{edge.line} imports {edge.target} inside a function")
    return bad


def _dynamic_imports(modules: dict[str, Path], package: str = PACKAGE) -> list[str]:
    """Calls that import a module by a name computed at run time, or one of ours by name."""
    bad = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("import_module", "__import__"):
                continue
            first = node.args[0] if node.args else None
            literal = first.value if isinstance(first, ast.Constant) else None
            if (
                module == REGISTRY
                and first is not None
                and ast.unparse(first) == "self.module_path"
            ):
                continue  # the registry's entries: their edges are added from ENTRIES
            if not isinstance(literal, str) or literal.split(".")[0] == package:
                bad.append(f"{module}:{node.lineno} imports {ast.unparse(first or node)} by name")
    return bad


def test_the_package_has_no_import_circle() -> None:
    modules, edges = _edges(REPO, PACKAGE)
    assert len(modules) > 60 and len(edges) > 300  # the whole package was read
    assert _circles(sorted(modules), edges) == []


def test_every_import_points_down_the_layers() -> None:
    _, edges = _edges(REPO, PACKAGE)
    assert any(e.local for e in edges)  # function-local imports are part of the graph
    assert _layer_violations(edges, _declared_layers()) == []


def test_no_module_is_imported_by_a_name_computed_at_run_time() -> None:
    modules, _ = _edges(REPO, PACKAGE)
    assert _dynamic_imports(modules) == []


def test_imports_inside_functions_say_why() -> None:
    modules, edges = _edges(REPO, PACKAGE)
    assert _unexplained_local_imports(modules, edges) == []


# ------------------------------------------------------------------ the checks can fail
@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A package with a three-module circle closed inside a function, a TYPE_CHECKING import
    up the layers, an unexplained local import and an import by name."""
    package = tmp_path / "toy"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "a.py").write_text("from toy import b\n")
    (package / "b.py").write_text("import toy.c\n")
    (package / "c.py").write_text("def f():\n    from toy.a import x\n")
    (package / "low" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nimport importlib\n"
        "if TYPE_CHECKING:\n    from toy.a import y\n"
        "def g():\n    # the optional extra\n    from toy import b\n"
        "    return importlib.import_module('toy.c')\n"
    )
    return tmp_path


def test_the_checks_see_what_they_forbid(toy: Path) -> None:
    modules, edges = _edges(toy, "toy")
    assert _circles(sorted(modules), edges) == [["toy.a", "toy.b", "toy.c"]]
    layers = [["toy.a"], ["toy.b"], ["toy.c"], ["toy.low"]]
    assert _layer_violations(edges, layers) == [
        "toy.c:2 imports toy.a",
        "toy.low.d:4 imports toy.a",
        "toy.low.d:7 imports toy.b",
    ]
    siblings = [["toy.a", "toy.b"], ["toy.c", "toy.low"]]  # a and b independent
    assert "toy.a:1 imports toy.b" in _layer_violations(edges, siblings)
    assert _unexplained_local_imports(modules, edges) == ["toy.c:2 imports toy.a inside a function"]
    assert _dynamic_imports(modules, "toy") == ["toy.low.d:8 imports 'toy.c' by name"]
