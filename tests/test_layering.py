"""Import-direction checks: symbolic/ never imports jax, numeric/ never sympy or z3,
formal/ never jax. Each check runs in a fresh interpreter (jaxtyping's pattern)."""

import subprocess
import sys

import pytest

RULES = [
    ("theorycheck.symbolic", ("jax",)),
    ("theorycheck.numeric", ("sympy", "z3")),
    ("theorycheck.formal", ("jax",)),
]


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
