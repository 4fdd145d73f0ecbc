"""The torchfront package has no import cycle (a module-level or a deferred import
inside a function both count)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "theorycheck" / "torchfront"
PREFIX = "theorycheck.torchfront"


def _edges() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == PREFIX:
                    names = {a.name for a in node.names} & modules
                elif node.module.startswith(PREFIX + "."):
                    names = {node.module.split(".")[2]}
                else:
                    names = set()
                edges[path.stem] |= names - {path.stem}
    edges.pop("__init__", None)
    return edges


def test_no_import_cycle():
    edges = _edges()
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(edges.get(module, ())):
            assert state.get(nxt) != 1, " -> ".join([*stack, module, nxt])
            if nxt not in state:
                visit(nxt, [*stack, module])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])


def test_the_cycle_finder_sees_deferred_imports():
    assert "_forms" in _edges()["_front"]  # imported inside load()
