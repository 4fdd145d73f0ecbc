r"""Sampled-token family :math:`L = f(\log\pi_k)`: the fit and its decider.

The fit (:func:`fit_whole`) recognises :math:`H = f''vv^\top - f'S` with
:math:`f', f''` functions of :math:`\pi_k` alone, identically at V = 3 and V = 4. The
theorem (:mod:`theorycheck.symbolic._structure`): for V ≥ 3, H ⪰ 0 iff
:math:`f' \le 0` and :math:`f''(1-\pi_k) - f'\pi_k \ge 0`. :func:`sampled_token`
decides both conditions (z3 for rational ones, the interval prover for
transcendental ones, with certificates) and states the convex region.
"""

from __future__ import annotations

import sympy as sp

from theorycheck import formal, symbolic
from theorycheck.convexity._derivation import Derived
from theorycheck.convexity._records import StructureResult
from theorycheck.convexity._regions import (
    HIGH_PRECISION,
    interior_witness,
    negative_at,
    scan,
    solved_region,
    validated_region,
)

__all__ = ["fit_one", "fit_whole", "sampled_token"]


def _prove_branchwise(expr: sp.Expr, p: sp.Symbol, timeout_ms: int):
    """Proves ``expr >= 0`` on (0, 1) for every Piecewise branch value, ignoring the
    branch conditions (a stronger claim, so a proof is sound); constants exactly."""
    expr = sp.piecewise_fold(expr)
    values = [v for v, _ in expr.args] if isinstance(expr, sp.Piecewise) else [expr]
    for value in values:
        if value.is_number:
            if not value.is_nonnegative:
                return formal.ProofResult(
                    "unknown", None, "a branch constant is negative"
                )
            continue
        res = formal.prove(
            value >= 0, [p], assumptions=[p > 0, p < 1], timeout_ms=timeout_ms
        )
        if res.status != "proved":
            return formal.ProofResult("unknown", None, "branchwise: " + res.detail)
    return formal.ProofResult("proved", None, "z3, branch by branch")


def _negative_segment(expr: sp.Expr, p: sp.Symbol, covers: dict):
    """A refutation of ``expr >= 0`` from the validated sign cover (computed once here
    and kept in ``covers`` for the region): the midpoint of a segment the interval
    arguments certify negative, re-checked at 50 digits (as
    :func:`theorycheck.formal.prove_nonnegative` re-checks its own); None when the
    cover is undecided or no such midpoint re-checks."""
    if expr not in covers:
        try:
            covers[expr] = formal.sign_regions(expr, p)
        except (NotImplementedError, TypeError, ValueError):
            covers[expr] = None
    for seg in covers[expr] or ():
        if seg.label != "-":
            continue
        point = formal.UNIT.point((seg.lo + seg.hi) / 2)
        neg = negative_at(expr, p, [point])
        if neg:
            detail = (
                f"g({p} = {float(point):.6g}) = {float(neg[0][1]):.6g} at "
                f"{HIGH_PRECISION} digits (validated sign regions)"
            )
            return formal.ProofResult("refuted", {p.name: point}, detail)
    return None


def _decide(expr: sp.Expr, p: sp.Symbol, timeout_ms: int, covers: dict):
    """``(ProofResult, route, certificate)`` for ``expr >= 0`` on (0, 1): z3, then z3
    branch by branch, then the interval prover, then a grid scan (refutation only).

    Before the interval prover a 50-digit grid scan asks whether ``expr`` is negative
    somewhere: then no proof exists, the region will be computed, and the refutation
    is read from the validated sign cover (:func:`_negative_segment`), which the
    region reuses, instead of bisecting the same cells twice. A cover that does not
    refute falls back to the interval prover as before."""
    res = formal.prove(
        expr >= 0, [p], assumptions=[p > 0, p < 1], timeout_ms=timeout_ms
    )
    if res.status == "unknown" and "not encodable" in res.detail:
        res = _prove_branchwise(expr, p, timeout_ms)
    if res.status != "unknown":
        return res, "z3", None
    if scan(expr, p) is not None:
        refuted = _negative_segment(expr, p, covers)
        if refuted is not None:
            return refuted, "interval", None
    ires = formal.prove_nonnegative(expr, p, formal.UNIT)
    if ires.status == "proved":
        return (
            formal.ProofResult("proved", None, ires.detail),
            "interval",
            (ires.certificate),
        )
    if ires.status == "refuted":
        point = {p.name: ires.counterexample}
        return formal.ProofResult("refuted", point, ires.detail), "interval", None
    bad = scan(expr, p)
    if bad is not None:
        detail = f"grid point re-checked at {HIGH_PRECISION} digits"
        return formal.ProofResult("refuted", {p.name: bad}, detail), "grid", None
    return res, "z3+interval", None


def _is_rational(f1: sp.Expr, f2: sp.Expr, p: sp.Symbol) -> bool:
    """True when f', f'' are rational in ``p`` branch by branch (solveset route)."""
    values = [
        b
        for e in (f1, f2)
        for b in ([a for a, _ in e.args] if isinstance(e, sp.Piecewise) else [e])
    ]
    return not any(p in a.free_symbols for v in values for a in v.atoms(sp.exp, sp.log))


def _region(f1: sp.Expr, f2: sp.Expr, p: sp.Symbol, covers: dict):
    """``(condition text, validated segments or None)``: ``solveset`` when f', f'' are
    rational in ``p``, validated interval regions otherwise (``covers``: sign covers
    already computed, by condition)."""
    segments = None
    if _is_rational(f1, f2, p):
        region3 = solved_region(symbolic.sampled_token_condition(f1, f2, p, 3), p)
        region2 = solved_region(symbolic.sampled_token_condition(f1, f2, p, 2), p)
    else:
        found = validated_region(f1, f2, p, covers)
        region3, region2, segments = found if found is not None else (None, None, None)
    if region3 is None:
        return None, segments
    condition = f"{region3} (V >= 3)"
    if region2 is not None and region2 != region3:
        condition += f"; {region2} (V = 2)"
    return condition, segments


def sampled_token(fit: symbolic.SampledTokenFit, timeout_ms: int) -> StructureResult:
    """Decides the sampled-token theorem's conditions and states the convex region.

    Each condition (:math:`-f' \\ge 0`, margin :math:`\\ge 0`) goes to z3 first; a
    transcendental one (z3 refuses exp/log) to the interval prover, whose proof is a
    certificate. Regions: ``solveset`` when f', f'' are rational in
    :math:`\\pi_k`, validated interval regions otherwise.
    """
    # A plain real symbol: with positive=True SymPy would fold the assumption p > 0
    # to True before it reaches z3.
    p = sp.Symbol("pi_k", real=True)
    f1 = fit.fprime.xreplace({fit.policy_k: p})
    f2 = fit.fsecond.xreplace({fit.policy_k: p})
    margin = f2 * (1 - p) - f1 * p
    exprs = {"fprime": -f1, "margin": margin}
    results, routes, certs, covers = {}, {}, [], {}
    for name, expr in exprs.items():
        results[name], routes[name], cert = _decide(expr, p, timeout_ms, covers)
        if cert is not None:
            certs.append(cert)
    proved = all(r.status == "proved" for r in results.values())
    condition, segments = ("always", None) if proved else _region(f1, f2, p, covers)
    detail = (
        f"sampled-token family f(log pi_k): f' = {_short(f1)}, "
        f"f'' = {_short(f2)}; "
        f"f'<=0 {results['fprime'].status} ({routes['fprime']}), "
        f"margin {results['margin'].status} ({routes['margin']})"
    )
    if certs:
        detail += "; interval certificate: " + "; ".join(c.summary() for c in certs)
    refuted = [n for n in exprs if results[n].status == "refuted"]
    if condition and condition.startswith("always") and refuted:
        condition = None  # the two routes disagree: report no region
    extra = {"certificates": tuple(certs), "region": segments}
    if refuted:
        name = refuted[0]
        pk = interior_witness(exprs[name], p, results[name].counterexample[p.name])
        return StructureResult(
            "sampled_token", "refuted", condition, detail, (pk, name), fit, **extra
        )
    if proved:
        return StructureResult(
            "sampled_token", "proved", "always", detail, None, fit, **extra
        )
    if condition is None:
        condition = f"{sp.sstr(margin)} >= 0 and {sp.sstr(-f1)} >= 0 (V >= 3)"
    return StructureResult(
        "sampled_token", "unknown", condition, detail, None, fit, **extra
    )


def _short(expr: sp.Expr) -> str:
    text = sp.sstr(expr)
    if len(text) <= 80:
        return text
    if isinstance(expr, sp.Piecewise):
        return f"piecewise ({len(expr.args)} branches)"
    return text[:77] + "..."


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    return symbolic.is_zero(a - b)


def fit_one(d: Derived, sampled: int):
    """The sampled-token fit at one V.

    First with frozen values as free symbols (sound: an identity for every value
    holds for the actual one; cheap when a frozen mask has conditions in many
    probabilities), the values substituted afterwards; else on the substituted
    forms directly. ``f'``, ``f''`` must depend on ``pi_k`` alone.
    """
    if d.frozen:
        fit = _fit_forms(d.gradient_w, d.hessian_w, sampled)
        if fit is not None:
            fit = _with_values(fit, dict(d.frozen))
            if fit is not None:
                return fit
    return _fit_forms(d.gradient, d.hessian, sampled)


def _fit_forms(grad, hess, sampled: int):
    if not (hess.shift_invariant and grad.shift_invariant):
        return None
    return symbolic.fit_sampled_token(
        list(grad.expr), hess.expr, hess.variables, sampled
    )


def _with_values(fit: symbolic.SampledTokenFit, values):
    parts = []
    for e in (fit.fprime, fit.fsecond):
        e = e.xreplace(values)
        if e.has(sp.Piecewise):
            folded = symbolic.fold_cells(e, fit.policy_k, sp.Interval.open(0, 1))
            if folded is None:
                return None
            e = folded
        else:
            e = sp.cancel(e)
        if e.free_symbols - {fit.policy_k}:
            return None
        parts.append(e)
    return symbolic.SampledTokenFit(parts[0], parts[1], fit.policy_k)


def fit_whole(d3: Derived, d4: Derived, sampled: int, fit3=None):
    """The fit when it is the same at V = 3 and V = 4 (``fit3``: ``fit_one(d3)``
    when the caller has it already), else None."""
    forms = [fit3 if fit3 is not None else fit_one(d3, sampled), fit_one(d4, sampled)]
    if None in forms:
        return None
    a, b = forms
    ren = {b.policy_k: a.policy_k}
    if _same(a.fprime, b.fprime.xreplace(ren)) and _same(
        a.fsecond, b.fsecond.xreplace(ren)
    ):
        return a
    return None
