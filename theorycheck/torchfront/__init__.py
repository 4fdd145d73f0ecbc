"""PyTorch losses for the convexity checker and ``coefficient``: a translation of the
traced ATen graph into JAX (the formula the bridge reads), gated against torch
autograd in float64 before any verdict.

Importing this package does not import torch; :func:`load` does (and says how to
install it when it is missing).
"""

from theorycheck.torchfront._cache import clear as clear_cache
from theorycheck.torchfront._coefficient import compare_rule, torch_coefficient
from theorycheck.torchfront._front import (
    command_spec,
    imports_torch,
    load,
    split_function,
)
from theorycheck.torchfront._loss import INSTALL_HINT, TorchLoss


def assert_matches_rule(fn, rule: str, **options) -> dict:
    """Asserts that a trainer's PyTorch loss function is registry rule ``rule``,
    per token and per reduction (``theorycheck.torchfront._oracle``; imports
    torch)."""
    from theorycheck.torchfront._oracle import assert_matches_rule as check

    return check(fn, rule, **options)


def gate_summary() -> str | None:
    """One line for every program the gate passed in this process (``None``: no
    PyTorch loss was translated; torch is imported only when one was)."""
    import sys

    gate = sys.modules.get("theorycheck.torchfront._gate")
    return None if gate is None else gate.gate_summary()


__all__ = [
    "assert_matches_rule",
    "INSTALL_HINT",
    "TorchLoss",
    "clear_cache",
    "command_spec",
    "compare_rule",
    "gate_summary",
    "imports_torch",
    "load",
    "split_function",
    "torch_coefficient",
]
