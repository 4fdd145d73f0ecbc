r"""The one place the verdict rules live: method records in, one verdict out (pure).

Rules (each has a unit test in ``tests/convexity/test_combine.py``):

1. ``not_convex`` needs a refutation (structure, z3 or search) carrying a re-checked
   counterexample; it wins over every proof. A proof whose scope contains a refuted V
   is withdrawn and a ``consistency`` record names the contradiction; the condition is
   then never ``always``.
2. ``convex`` needs a proof (structure, z3 or composition) and no refutation; a loss
   with kinks outside ``stop_gradient`` (``kinks`` record) is never convex from
   piecewise PSD: only a composition (DCP) proof, which covers kinks, stands beside
   one. A chord (midpoint) violation re-checked exactly refutes like a counterexample.
3. The structure stage's claim for every V stands only when the ``invariance`` record
   confirms that the jaxprs at several V are one program up to the vocabulary
   dimension; otherwise its scope is the V it actually derived.
4. Every record decides the sampled tokens it lists (``tokens``, ``{0}`` unless a
   stage ran at other ``k``); they are extended to every sampled token only when the
   ``tokens`` record confirms that the program is equivariant under relabelling the
   tokens (:mod:`theorycheck.convexity._genericity`). A proof and a refutation
   contradict each other only where both their V and their tokens meet.
5. Otherwise ``unknown``, with a reason that says which: undecided by the provers,
   and whether the search ran without finding a counterexample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from theorycheck.convexity._types import (
    Scope,
    Stage,
    StageRecord,
    StageStatus,
    Verdict,
    scope_text,
)

__all__ = ["Decision", "combine"]

_PROVERS = (Stage.STRUCTURE, Stage.FORMAL, Stage.DCP)
_REFUTERS = (Stage.STRUCTURE, Stage.FORMAL, Stage.SEARCH, Stage.CHORD)


@dataclasses.dataclass(frozen=True)
class Decision:
    """The combined verdict.

    Attributes:
        verdict: convex / not_convex / unknown.
        scope: the V the verdict holds for (for unknown: the V that were checked).
        condition: the convex region, when known and consistent with the verdict.
        counterexample: the re-checked counterexample behind ``not_convex``.
        methods: the input records plus any ``consistency`` records.
        reason: for unknown, which kind (undecided by the provers; searched and found
            nothing); otherwise None.
        text: the scope with its sampled tokens, as printed
            (``all V >= 2, every sampled token``).
    """

    verdict: Verdict
    scope: Scope
    condition: str | None
    counterexample: dict[str, Any] | None
    methods: tuple[StageRecord, ...]
    reason: str | None = None
    text: str = ""


def _effective(rec: StageRecord, invariant: bool) -> Scope:
    """A record's scope; the structure's all-V claim only with one program."""
    if rec.stage is Stage.STRUCTURE and not invariant:
        return rec.decided
    return rec.scope


def _union(scopes) -> Scope:
    out = Scope()
    for s in scopes:
        out = out.union(s)
    return out


def _tokens_meet(a, b) -> bool:
    return a is None or b is None or bool(a & b)


def _meets(p, refs, invariant: bool, every_token: bool) -> bool:
    claimed = _effective(p, invariant)
    return any(
        claimed.meets(_effective(r, invariant))
        and (every_token or _tokens_meet(p.tokens, r.tokens))
        for r in refs
    )


def _conflicts(proofs, invariant: bool, refs, every_token: bool) -> list[StageRecord]:
    out = []
    where = ", ".join(f"{r.method} ({_effective(r, invariant)})" for r in refs)
    for p in proofs:
        claimed = _effective(p, invariant)
        if _meets(p, refs, invariant, every_token):
            out.append(
                StageRecord(
                    "consistency",
                    StageStatus.CONFLICT,
                    f"{p.method} proved convex ({claimed}) but a re-checked "
                    f"counterexample contradicts it: {where}; the counterexample "
                    "wins and the proof is withdrawn",
                    Stage.CONSISTENCY,
                )
            )
    return out


def _always_record(records, condition: str, refs, invariant: bool, every_token: bool):
    """Why an ``always`` region is dropped beside a counterexample: a contradiction
    when the structure's scope contains a refuted V (and token), else a note on its
    scope."""
    refuted = _union(_effective(r, invariant) for r in refs)
    struct = next((r for r in records if r.stage is Stage.STRUCTURE), None)
    where = _effective(struct, invariant) if struct is not None else Scope()
    if not where or _meets(struct, refs, invariant, every_token):
        return StageRecord(
            "consistency",
            StageStatus.CONFLICT,
            f"the structure's region ({condition}) contradicts a re-checked "
            f"counterexample at {refuted}: no region is reported",
            Stage.CONSISTENCY,
        )
    held = scope_text([(where, None if every_token else struct.tokens)])
    return StageRecord(
        "consistency",
        StageStatus.NOTE,
        f"the structure's region ({condition}) holds at {held} only; not reported "
        f"beside the counterexample at {refuted}",
        Stage.CONSISTENCY,
    )


def _unknown_reason(records: Sequence[StageRecord], kinks: bool, proofs) -> str:
    parts = []
    if proofs and kinks:
        parts.append(
            "the Hessian is PSD on every smooth piece, but the loss has kinks "
            "outside stop_gradient, which are not analysed"
        )
    else:
        provers = [r for r in records if r.stage in _PROVERS]
        ran = [r for r in provers if r.status is not StageStatus.SKIPPED]
        parts.append(
            "undecided by the provers"
            if ran
            else "no prover could run (" + "; ".join(r.detail for r in provers) + ")"
            if provers
            else "no prover ran"
        )
    search = [r for r in records if r.stage is Stage.SEARCH]
    if search and all(r.status is StageStatus.UNKNOWN for r in search):
        total = sum(r.samples for r in search)
        parts.append(f"searched without finding a counterexample ({total} samples)")
    elif not search:
        parts.append("no numeric search ran")
    return "; ".join(parts)


def _text(recs, invariant: bool, every_token: bool) -> str:
    return scope_text(
        (_effective(r, invariant), None if every_token else r.tokens) for r in recs
    )


def combine(
    records: Sequence[StageRecord], checked: Scope, checked_tokens: str = ""
) -> Decision:
    """Combines the stages' records into one verdict (the rules in the module doc).

    Args:
        records: every stage's record, in the order the stages ran.
        checked: the V the numeric stages ran at (the scope of an ``unknown``).
        checked_tokens: the sampled tokens they ran at, in words (default: ``k = 0``,
            or every token beside a confirmed ``tokens`` record).

    Returns:
        A :class:`Decision`.
    """
    invariant = any(
        r.stage is Stage.INVARIANCE and r.status is StageStatus.CONFIRMED
        for r in records
    )
    every_token = any(
        r.stage is Stage.TOKENS and r.status is StageStatus.CONFIRMED for r in records
    )
    kinks = any(
        r.stage is Stage.KINKS and r.status is StageStatus.UNKNOWN for r in records
    )
    proofs = [
        r for r in records if r.stage in _PROVERS and r.status is StageStatus.PROVED
    ]
    # A refutation counts with its counterexample; a z3 refutation is re-checked in
    # exact arithmetic before it is reported, so it stands on its own.
    refs = [
        r
        for r in records
        if r.stage in _REFUTERS
        and r.status is StageStatus.REFUTED
        and (r.counterexample is not None or r.stage is Stage.FORMAL)
    ]
    condition = next(
        (r.condition for r in records if r.stage is Stage.STRUCTURE and r.condition),
        None,
    )
    methods = list(records)
    if refs:
        scope = _union(_effective(r, invariant) for r in refs)
        methods += _conflicts(proofs, invariant, refs, every_token)
        if condition is not None and condition.startswith("always"):
            methods.append(
                _always_record(records, condition, refs, invariant, every_token)
            )
            condition = None
        ce = next(
            (
                r.counterexample
                for r in records
                if r.counterexample is not None
                and (r in refs or r.stage is Stage.RECHECK)
            ),
            None,
        )
        text = _text(refs, invariant, every_token)
        return Decision(
            Verdict.NOT_CONVEX, scope, condition, ce, tuple(methods), None, text
        )
    valid = [p for p in proofs if not kinks or p.stage is Stage.DCP]
    if valid:
        scope = _union(_effective(r, invariant) for r in valid)
        text = _text(valid, invariant, every_token)
        return Decision(
            Verdict.CONVEX, scope, condition, None, tuple(methods), None, text
        )
    if condition is not None and condition.startswith(("always", "never")):
        condition = None  # a region that would contradict "unknown"
    reason = _unknown_reason(records, kinks, proofs)
    tokens = "every sampled token" if every_token else "sampled token k = 0"
    text = f"{checked}, {checked_tokens or tokens}"
    return Decision(
        Verdict.UNKNOWN, checked, condition, None, tuple(methods), reason, text
    )
