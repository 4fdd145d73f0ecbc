"""Import-direction checks.

1. Library rules, each in a fresh interpreter (jaxtyping's pattern): symbolic/ never
   imports jax, numeric/ never sympy or z3, formal/ never jax.
2. Layer order (docs/design.md): no module imports from a layer above its own.
3. Library code imports another package only through its public ``__init__``
   (``from theorycheck.losses import X``, never ``from theorycheck.losses._params``).

Rules 2 and 3 read every ``import`` statement of the package with ``ast``, including
the ones inside functions (commands import lazily), so they see imports that a fresh
interpreter would only load on some code path.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

RULES = [
    ("theorycheck.symbolic", ("jax",)),
    ("theorycheck.numeric", ("sympy", "z3", "torch")),
    ("theorycheck.formal", ("jax",)),
    # torch is an extra: importing the core (and torchfront's __init__) never loads it
    ("theorycheck.torchfront", ("torch",)),
    ("theorycheck.convexity", ("torch",)),
    ("theorycheck.cli", ("torch",)),
]

#: the one package that may import torch (the ``torch`` extra).
TORCH_PACKAGE = "theorycheck.torchfront"

PACKAGE = Path(__file__).resolve().parents[1] / "theorycheck"

# docs/design.md's layers, top first. Imports may point to the same layer or below.
LAYERS: list[set[str]] = [
    {"testing"},  # test helpers and the trainers' oracle: imported by tests only
    {"__main__"},
    {"cli"},  # the dispatcher discovers the commands: they never import it back
    {"commands"},
    {"reproduce"},
    {"experiments"},
    {"probes"},
    {"rl"},
    {"claims"},
    {"convexity"},
    {"torchfront"},  # PyTorch losses, translated to JAX (the only importer of torch)
    {"models"},
    {"losses"},
    {"bridge"},
    {"symbolic", "formal", "numeric"},
    # shared base: the error type, progress reporting, the version, the jaxpr walker
    # (jax only), provenance, and the error contract's base (bounded reading, child
    # processes, environment checks, atomic writes)
    {"_errors", "_progress", "_version", "_jaxpr", "_git", "_provenance"}
    | {"_bounded", "_isolation", "_environment", "_atomic"},
]

# Imports that break a rule in modules being rewritten elsewhere, listed so that the
# tests stay green until the rewrite lands. Each entry is (importing module, imported
# module). Remove an entry when its import is fixed; the test fails on stale entries,
# so this list can only shrink.
ALLOWED: set[tuple[str, str]] = set()


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "theorycheck":
        return None
    if len(parts) == 1:
        return 0  # the package root re-exports; nothing imports it but the top
    for i, names in enumerate(LAYERS):
        if parts[1] in names:
            return i
    raise AssertionError(
        f"{module}: not in docs/design.md's layer list; add it to LAYERS"
    )


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, root: Path) -> list[str]:
    """Every theorycheck module (or package) that ``path`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path, root).split(".")
    is_pkg = path.name == "__init__.py"
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here if is_pkg else here[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                # ``from theorycheck import formal`` imports the module
                # theorycheck.formal; ``from theorycheck.losses import LOSSES`` a name
                sub = root.parent.joinpath(*mod.split("."), a.name)
                is_module = sub.with_suffix(".py").exists() or sub.is_dir()
                out.append(f"{mod}.{a.name}" if is_module else mod)
    return [m for m in out if m.split(".")[0] == "theorycheck"]


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_violations(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """(importer, imported) pairs where the import points to a higher layer."""
    bad = set()
    for path in sorted(root.rglob("*.py")):
        src = _module_name(path, root)
        for mod in _imports(path, root):
            lo, hi = _layer_of(src), _layer_of(mod)
            if hi is not None and lo is not None and hi < lo:
                bad.add((src, mod))
    return bad


def private_violations(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """(importer, imported) pairs that reach into another package's private module."""
    bad = set()
    for path in sorted(root.rglob("*.py")):
        src = _module_name(path, root)
        for mod in _imports(path, root):
            parts = mod.split(".")
            private = any(p.startswith("_") for p in parts[2:])
            if private and len(parts) > 2 and _package_of(mod) != _package_of(src):
                bad.add((src, mod))
    return bad


def _loaded_after_import(module: str, forbidden: tuple[str, ...]) -> list[str]:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        f"print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("module,forbidden", RULES)
def test_layering_forbidden_imports_absent(module, forbidden):
    assert _loaded_after_import(module, forbidden) == []


def test_layering_check_can_fail():
    # Meta-test: the detector does see a forbidden import when there is one.
    assert _loaded_after_import("sympy", ("sympy",)) == ["sympy"]


def test_layering_no_import_from_a_higher_layer():
    assert layer_violations() - ALLOWED == set()


def test_layering_other_packages_only_through_their_init():
    assert private_violations() - ALLOWED == set()


def test_layering_allow_list_has_no_stale_entries():
    assert ALLOWED <= layer_violations() | private_violations()


def test_layering_static_checks_can_fail(tmp_path):
    # Meta-test: a numeric module importing losses (a higher layer) through a
    # private module is caught by both rules; relative imports resolve too.
    pkg = tmp_path / "theorycheck"
    (pkg / "numeric").mkdir(parents=True)
    (pkg / "losses").mkdir()
    for p in (pkg, pkg / "numeric", pkg / "losses"):
        (p / "__init__.py").write_text("")
    (pkg / "losses" / "_params.py").write_text("X = 1\n")
    (pkg / "losses" / "_ok.py").write_text("from ._params import X\n")
    (pkg / "numeric" / "_bad.py").write_text(
        "def f():\n    from theorycheck.losses._params import X\n    return X\n"
    )
    (pkg / "numeric" / "_worse.py").write_text(
        "from theorycheck.losses import _params\n"
    )
    bad = {
        ("theorycheck.numeric._bad", "theorycheck.losses._params"),
        ("theorycheck.numeric._worse", "theorycheck.losses._params"),
    }
    assert layer_violations(pkg) == bad
    assert private_violations(pkg) == bad


def torch_importers(root: Path = PACKAGE) -> set[str]:
    """Modules outside ``TORCH_PACKAGE`` with an ``import torch`` (any, lazy too)."""
    bad = set()
    for path in sorted(root.rglob("*.py")):
        src = _module_name(path, root)
        if src == TORCH_PACKAGE or src.startswith(TORCH_PACKAGE + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "torch" or n.startswith("torch.") for n in names):
                bad.add(src)
    return bad


def test_layering_only_torchfront_imports_torch():
    assert torch_importers() == set()


def test_layering_torch_check_can_fail(tmp_path):
    pkg = tmp_path / "theorycheck"
    (pkg / "numeric").mkdir(parents=True)
    (pkg / "torchfront").mkdir()
    (pkg / "numeric" / "_x.py").write_text("def f():\n    import torch.nn\n")
    (pkg / "torchfront" / "_y.py").write_text("import torch\n")
    assert torch_importers(pkg) == {"theorycheck.numeric._x"}


# Import circles still open in modules being rewritten elsewhere, each as the sorted
# tuple of its modules; the test fails on a stale entry, so this set only shrinks.
ALLOWED_CYCLES: set[tuple[str, ...]] = set()


def _resolve(imported: str, modules: set[str]) -> str | None:
    """The module of ``modules`` that an import of ``imported`` loads (a name
    imported from a module resolves to that module)."""
    parts = imported.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) or None


def import_cycles(root: Path = PACKAGE) -> set[tuple[str, ...]]:
    """Every import circle between the package's modules (a strongly connected
    component of the import graph with more than one module), lazy imports inside
    functions included: each as the sorted tuple of its modules."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph = {
        m: {_resolve(i, set(paths)) for i in _imports(p, root)} - {m, None}
        for m, p in paths.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[tuple[str, ...]] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            comp = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(comp) > 1:
                found.add(tuple(sorted(comp)))

    for v in graph:
        if v not in order:
            visit(v)
    return found


def test_layering_no_import_cycle_inside_the_package():
    assert import_cycles() - ALLOWED_CYCLES == set()


def test_layering_allowed_cycles_are_not_stale():
    assert ALLOWED_CYCLES <= import_cycles()


def test_layering_cycle_check_can_fail(tmp_path):
    # Meta-test: a circle closed by an import inside a function is seen, and a chain
    # without one is not.
    pkg = tmp_path / "theorycheck" / "probes"
    pkg.mkdir(parents=True)
    for p in (pkg.parent, pkg):
        (p / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from theorycheck.probes._b import X\nY = 1\n")
    (pkg / "_b.py").write_text("X = 1\n\ndef f():\n    from ._c import Z\n")
    (pkg / "_c.py").write_text("from theorycheck.probes import _a\nZ = 1\n")
    (pkg / "_d.py").write_text("from theorycheck.probes._a import Y\n")
    root = tmp_path / "theorycheck"
    assert import_cycles(root) == {
        ("theorycheck.probes._a", "theorycheck.probes._b", "theorycheck.probes._c")
    }
    (pkg / "_b.py").write_text("X = 1\n")
    assert import_cycles(root) == set()
