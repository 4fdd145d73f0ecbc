"""Running checks and computing a claim's status (never written by hand).

The rules, applied to the statement's check outcomes and, when it fails, to its
correction's:

* ``holds``: every check PASS, and the checks span at least two distinct method kinds;
* ``fails``: some check FAIL (each FAIL carries its re-checked counterexample) and no
  correction holds;
* ``holds_with_correction``: the statement fails, and every check of the correction PASS
  with at least two distinct method kinds;
* ``unknown`` otherwise (an UNKNOWN check, a single method kind, no checks).

A check that raises, or returns something other than a :class:`CheckResult`, counts as
UNKNOWN with the error in its detail: never as a pass. Every check runs inside
:func:`theorycheck.claims.float64` (JAX in float64 for that check only; the process
default is untouched).

Examples:
    >>> from theorycheck.claims import Check, CheckResult, Claim, Method, Outcome
    >>> def agree():
    ...     return CheckResult(Outcome.PASS, "ok")
    >>> claim = Claim(
    ...     "demo.two_kinds", "demo", "DERIVED", "a fact",
    ...     (Check("sympy", Method.SYMBOLIC, agree),
    ...      Check("fd", Method.NUMERIC, agree)),
    ... )
    >>> evaluate(claim).status
    <Status.HOLDS: 'holds'>
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from theorycheck.claims._helpers import float64
from theorycheck.claims._types import (
    Check,
    CheckResult,
    Claim,
    Correction,
    Kind,
    Method,
    Outcome,
    Status,
    verdict_of,
)

MIN_KINDS = 2


@dataclasses.dataclass(frozen=True)
class MethodResult:
    """One check's result, with the check's name, kind and run time."""

    method: Method
    name: str
    result: CheckResult
    seconds: float
    error: str | None = None  # the exception, when the check raised

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome

    def to_json(self) -> dict[str, Any]:
        return {
            "method": str(self.method),
            "name": self.name,
            "status": str(self.result.outcome),
            "detail": self.result.detail,
            "counterexample": _plain(self.result.counterexample),
            "data": _plain(self.result.data) or {},
            "seconds": round(self.seconds, 3),
        }


@dataclasses.dataclass(frozen=True)
class CorrectionResult:
    """A correction's checks, run only when the statement fails."""

    statement: str
    status: str  # "holds" | "fails" | "unknown" | "not_run"
    methods: tuple[MethodResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "status": self.status,
            "methods": [m.to_json() for m in self.methods],
        }


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """A claim with its computed status and every check's result."""

    claim: Claim
    status: Status
    methods: tuple[MethodResult, ...]
    correction: CorrectionResult | None
    seconds: float
    #: why the claim was stopped before its checks decided (a deadline, a crash,
    #: ``sys.exit`` in a check); the status is then ``unknown``.
    reason: str | None = None

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def verdict(self) -> str:
        """The status read with the claim's kind (``theorycheck.claims.verdict_of``):
        "fails as stated", "extension fails", "assumption holds at its setting", ..."""
        return verdict_of(self.claim.kind, self.status)

    @property
    def errors(self) -> tuple[MethodResult, ...]:
        """The checks (statement and correction) that raised."""
        extra = self.correction.methods if self.correction else ()
        return tuple(m for m in (*self.methods, *extra) if m.error is not None)

    def to_json(self) -> dict[str, Any]:
        """The docs/design.md claim object."""
        return {
            "id": self.claim.id,
            "source": self.claim.source,
            "provenance": self.claim.provenance,
            "statement": self.claim.statement,
            "status": str(self.status),
            "verdict": self.verdict,
            "correction": self.correction.to_json() if self.correction else None,
            "objection": self.claim.objection,
            "quote": self.claim.quote,
            "location": self.claim.location,
            "kind": self.claim.kind.value,
            "assumptions": list(self.claim.assumptions),
            "extends": self.claim.extends,
            "methods": [m.to_json() for m in self.methods],
            "seconds": round(self.seconds, 3),
            **({"aliases": list(self.claim.aliases)} if self.claim.aliases else {}),
            **({"reason": self.reason} if self.reason is not None else {}),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ClaimResult:
        """The result back from :meth:`to_json` (for the table and the report of a
        run whose claims were evaluated elsewhere); the claim's checks are not
        restored (``checks=()``), their results are.

        Examples:
            >>> from theorycheck.claims import Claim, Status
            >>> claim = Claim("demo.x", "s", "DERIVED", "a fact", ())
            >>> r = ClaimResult(claim, Status.UNKNOWN, (), None, 1.0, reason="hung")
            >>> ClaimResult.from_json(r.to_json()).to_json() == r.to_json()
            True
        """
        corr = obj.get("correction")
        claim = Claim(
            obj["id"],
            obj["source"],
            obj["provenance"],
            obj["statement"],
            (),
            correction=Correction(corr["statement"], ()) if corr else None,
            objection=obj.get("objection"),
            quote=obj.get("quote", ""),
            location=obj.get("location", ""),
            kind=Kind(obj.get("kind", Kind.PROPOSITION)),
            assumptions=tuple(obj.get("assumptions", ())),
            extends=obj.get("extends"),
            aliases=tuple(obj.get("aliases", ())),
        )
        correction = (
            CorrectionResult(
                corr["statement"], corr["status"], _methods(corr["methods"])
            )
            if corr
            else None
        )
        return cls(
            claim,
            Status(obj["status"]),
            _methods(obj.get("methods", ())),
            correction,
            float(obj.get("seconds", 0.0)),
            obj.get("reason"),
        )


def _methods(items: Sequence[Mapping[str, Any]]) -> tuple[MethodResult, ...]:
    return tuple(
        MethodResult(
            Method(m["method"]),
            m["name"],
            CheckResult(
                Outcome(m["status"]),
                m["detail"],
                counterexample=m.get("counterexample"),
                data=m.get("data") or {},
            ),
            float(m.get("seconds", 0.0)),
        )
        for m in items
    )


def _plain(obj: Any) -> Any:
    """Mappings to dicts, tuples to lists, numpy scalars/arrays to Python values."""
    if obj is None:
        return None
    if hasattr(obj, "items"):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _plain(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None  # JSON has no NaN/inf
    if isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)  # Fractions, SymPy numbers: their exact text


def _takes_quick(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == "quick" and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in params
    )


def run_check(check: Check, *, quick: bool = False) -> MethodResult:
    """Runs one check in float64 (scoped); an exception or a wrong return type
    becomes UNKNOWN."""
    start = time.perf_counter()
    error = None
    try:
        with float64():
            result = check.run(quick=quick) if _takes_quick(check.run) else check.run()
        if not isinstance(result, CheckResult):
            raise TypeError(
                f"check returned {type(result).__name__}, not a CheckResult"
            )
    except Exception as exc:  # noqa: BLE001 -- any failure to decide is UNKNOWN
        error = f"{type(exc).__name__}: {exc}"
        tail = traceback.format_exception(exc)[-3:]
        result = CheckResult(
            Outcome.UNKNOWN,
            f"the check raised {error}",
            data={"traceback": "".join(tail)},
        )
    return MethodResult(
        check.method, check.name, result, time.perf_counter() - start, error
    )


def _all_pass_with_kinds(results: Sequence[MethodResult]) -> bool:
    kinds = {r.method for r in results}
    return (
        bool(results)
        and all(r.outcome is Outcome.PASS for r in results)
        and len(kinds) >= MIN_KINDS
    )


def _any_fail(results: Sequence[MethodResult]) -> bool:
    return any(r.outcome is Outcome.FAIL and r.result.counterexample for r in results)


def status_of(
    statement: Sequence[MethodResult], correction: Sequence[MethodResult] | None
) -> Status:
    """The status rules (module docstring) on already-run checks.

    ``correction`` is None when the claim has none (or it was not run).
    """
    if _all_pass_with_kinds(statement):
        return Status.HOLDS
    if _any_fail(statement):
        if correction is not None and _all_pass_with_kinds(correction):
            return Status.HOLDS_WITH_CORRECTION
        return Status.FAILS
    return Status.UNKNOWN


def _correction_status(results: Sequence[MethodResult]) -> str:
    if _all_pass_with_kinds(results):
        return "holds"
    if _any_fail(results):
        return "fails"
    return "unknown"


def _run_correction(correction: Correction, quick: bool) -> CorrectionResult:
    results = tuple(run_check(c, quick=quick) for c in correction.checks)
    return CorrectionResult(correction.statement, _correction_status(results), results)


def evaluate(claim: Claim, quick: bool = False) -> ClaimResult:
    """Runs a claim's checks (and its correction's, when the statement fails).

    Args:
        claim: the claim.
        quick: passed to every check that takes ``quick`` (fewer samples).

    Returns:
        The :class:`ClaimResult` with the computed :class:`Status`.
    """
    start = time.perf_counter()
    results = tuple(run_check(c, quick=quick) for c in claim.checks)
    corr = None
    if claim.correction is not None:
        if _any_fail(results):
            corr = _run_correction(claim.correction, quick)
        else:
            corr = CorrectionResult(claim.correction.statement, "not_run", ())
    ran = corr.methods if corr is not None and corr.status != "not_run" else None
    return ClaimResult(
        claim, status_of(results, ran), results, corr, time.perf_counter() - start
    )
