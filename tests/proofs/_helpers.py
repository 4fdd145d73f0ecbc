"""Loading the proofs/ claims and mutating one of their formulas."""

from __future__ import annotations

import inspect
from pathlib import Path

from theorycheck.claims import Outcome, discover, run_check

PROOFS = Path(__file__).resolve().parents[2] / "proofs"


def claims(folder: str) -> dict:
    """The claims under proofs/<folder>, by id."""
    return {c.claim.id: c.claim for c in discover([PROOFS / folder])}


def module_of(claim):
    """The module that defines a claim's checks (where its formulas live)."""
    return inspect.getmodule(claim.checks[0].run)


def outcome(check, quick: bool = True) -> Outcome:
    result = run_check(check, quick=quick)
    return result.outcome


def check_named(claim, prefix: str, *, correction: bool = False):
    checks = claim.correction.checks if correction else claim.checks
    (found,) = [c for c in checks if c.name.startswith(prefix)]
    return found
