r"""Structure stage: recognise a family from the derived SymPy form and decide for all
V.

Families (statements and proofs in :mod:`theorycheck.symbolic._structure` and
:mod:`theorycheck.formal._theorems`):

* ``sampled_token``: :math:`H = f''vv^\top - f'S` with :math:`f', f''` functions of
  :math:`\pi_k` only. PSD (V ≥ 3) iff :math:`f' \le 0` and
  :math:`-f' + f''(1-\pi_k)/\pi_k \ge 0`; the exact convex region in :math:`\pi_k`
  follows.
* ``cross_entropy``: :math:`H = c\,S` with constant ``c``; PSD iff ``c ≥ 0``.
* ``regression``: diagonal Hessian with entry ``i`` depending on :math:`z_i` only.
* nonnegative sums of the above (term by term).

A family is accepted only when it is recognised identically at two vocabulary sizes
(V = 3 and V = 4), from the same shape-generic JAX function.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import sympy as sp

from theorycheck import formal, symbolic
from theorycheck.bridge import sympy_from_jax
from theorycheck.symbolic import split_exp_log
from theorycheck.symbolic._derive import is_transcendental, tidy_probability

__all__ = ["Derived", "StructureResult", "analyse_structure", "derive"]

#: mpmath digits for re-checking a transcendental condition at a point.
HIGH_PRECISION = 50


@dataclasses.dataclass(frozen=True)
class Derived:
    """The loss at one V: expression, gradient and Hessian in probability
    coordinates.

    ``gradient_w``/``hessian_w`` are the same forms with every frozen
    (``stop_gradient``) value left as an opaque symbol; ``frozen`` maps those symbols
    to their values in probability coordinates. An identity that holds with the
    symbols free holds for their values (the structure fits use this).
    """

    vocab: int
    logits: tuple[sp.Symbol, ...]
    expr: sp.Expr
    gradient: symbolic.ProbabilityForm
    hessian: symbolic.ProbabilityForm
    hessian_z: sp.Matrix
    gradient_w: symbolic.ProbabilityForm | None = None
    hessian_w: symbolic.ProbabilityForm | None = None
    frozen: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()


def _substitute(form: symbolic.ProbabilityForm, values) -> symbolic.ProbabilityForm:
    """``form`` with the frozen symbols replaced by their values (cells folded)."""
    out = tidy_probability(form.expr.xreplace(dict(values)), fold=False)
    return symbolic.ProbabilityForm(
        out, form.variables, form.shift_invariant, is_transcendental(out)
    )


def derive(loss, vocab: int, sampled: int, exact_inputs) -> Derived:
    """Translates the JAX loss at ``V = vocab`` and derives its logit
    gradient/Hessian.

    Frozen values (masks, weights, targets) are constants of the derivatives: they
    are converted to probability coordinates once each, not once per Hessian entry.
    """
    z = sp.symbols(f"z0:{vocab}", real=True)
    expr = sympy_from_jax(loss, z, sampled=sampled, inputs=exact_inputs)
    hess = symbolic.logit_hessian(expr, z)
    frozen = sorted(expr.atoms(symbolic.Frozen), key=sp.default_sort_key)
    if frozen:
        marks = [sp.Dummy(f"w{j}", real=True) for j in range(len(frozen))]
        body = expr.xreplace(dict(zip(frozen, marks)))
        grad_w = symbolic.to_probability(sp.Matrix(symbolic.logit_gradient(body, z)), z)
        hess_w = symbolic.to_probability(symbolic.logit_hessian(body, z), z)
        used = [(m, f) for m, f in zip(marks, frozen) if m in body.free_symbols]
        values = [
            (m, symbolic.to_probability(symbolic.unfreeze(f), z)) for m, f in used
        ]
        if (
            grad_w.shift_invariant
            and hess_w.shift_invariant
            and all(v.shift_invariant for _, v in values)
        ):
            values = tuple((m, v.expr) for m, v in values)
            return Derived(
                vocab,
                z,
                expr,
                _substitute(grad_w, values),
                _substitute(hess_w, values),
                hess,
                grad_w,
                hess_w,
                values,
            )
    grad = sp.Matrix(symbolic.logit_gradient(expr, z))
    return Derived(
        vocab,
        z,
        expr,
        symbolic.to_probability(grad, z),
        symbolic.to_probability(hess, z),
        hess,
    )


@dataclasses.dataclass(frozen=True)
class StructureResult:
    """Outcome of the structure stage.

    Attributes:
        family: recognised family name, or None.
        status: ``"proved"`` (PSD for every V ≥ 2), ``"refuted"`` (not PSD for any
            V ≥ 3, with ``witness``), or ``"unknown"``.
        condition: exact convex region (text) when known.
        detail: one line for the methods list.
        witness: ``(pi_k, direction_kind)`` where the condition fails, exact.
        fit: the sampled-token fit when recognised.
    """

    family: str | None
    status: str
    condition: str | None
    detail: str
    witness: tuple[Fraction, str] | None = None
    fit: symbolic.SampledTokenFit | None = None


def _solve(cond: sp.Basic, p: sp.Symbol) -> sp.Set:
    """Region of (0, 1) where ``cond`` holds; Piecewise sides are solved branch by
    branch
    (each branch value on its own region), which is far cheaper than solveset on
    them."""
    domain = sp.Interval.open(0, 1)
    if isinstance(cond, sp.And):
        return sp.Intersection(*[_solve(c, p) for c in cond.args])
    if isinstance(cond, sp.Or):
        return sp.Union(*[_solve(c, p) for c in cond.args])
    if (
        isinstance(cond, sp.core.relational.Relational)
        and cond.rhs == 0
        and isinstance(cond.lhs, sp.Piecewise)
    ):
        remaining: sp.Set = domain
        out: sp.Set = sp.S.EmptySet
        for value, branch in cond.lhs.args:
            region = sp.Intersection(
                symbolic.condition_set(branch, p, domain), remaining
            )
            if region != sp.S.EmptySet:
                out = sp.Union(
                    out,
                    symbolic.condition_set(cond.func(value, 0), p, domain).intersect(
                        region
                    ),
                )
            remaining = sp.Complement(remaining, region)
        return out
    return symbolic.condition_set(cond, p, domain)


def _region_text(cond: sp.Basic, p: sp.Symbol) -> str | None:
    try:
        region = _solve(cond, p)
    except (NotImplementedError, TypeError, ValueError, AttributeError):
        return None
    if not isinstance(region, sp.Set) or isinstance(region, sp.ConditionSet):
        return None
    if region == sp.S.EmptySet:
        return "never"
    if region == sp.Interval.open(0, 1):
        return "always"
    pieces = region.args if isinstance(region, sp.Union) else (region,)
    if all(isinstance(r, sp.Interval) for r in pieces):
        return " or ".join(_interval_text(r) for r in pieces)
    return f"pi_k in {region}"


def _interval_text(region: sp.Interval) -> str:
    parts = []
    if region.start > 0:
        parts.append(
            f"pi_k {'>' if region.left_open else '>='} {sp.sstr(region.start)}"
        )
    if region.end < 1:
        parts.append(f"pi_k {'<' if region.right_open else '<='} {sp.sstr(region.end)}")
    return " and ".join(parts)


#: The moderate grid 1/64..63/64 (witnesses float64 can confirm).
_MODERATE = [Fraction(i, 64) for i in range(1, 64)]


def _negative_at(expr: sp.Expr, p: sp.Symbol, grid) -> list[tuple[Fraction, sp.Expr]]:
    """``(x, expr(x))`` for the grid points where ``expr < 0`` at 50 digits."""
    out = []
    for x in grid:
        at = sp.Rational(x.numerator, x.denominator)
        val = sp.N(expr.subs(p, at), HIGH_PRECISION)
        if val.is_real and val < 0:
            out.append((x, val))
    return out


def _scan(cond_expr: sp.Expr, p: sp.Symbol) -> Fraction | None:
    """Finds a grid point in (0, 1) where ``cond_expr < 0`` at high precision."""
    grid = [Fraction(1, 10**e) for e in range(12, 1, -1)]
    grid += _MODERATE
    grid += [1 - Fraction(1, 10**e) for e in range(2, 12)]
    for x in grid:
        if _negative_at(cond_expr, p, [x]):
            return x
    return None


def _interior_witness(expr: sp.Expr, p: sp.Symbol, found: Fraction) -> Fraction:
    """A point where ``expr < 0``, away from the boundary when possible.

    z3 tends to answer a boundary point (e.g. exactly where a mask switches), where
    float64 rounds to the other side and cannot confirm. Among the grid points
    1/64..63/64 where ``expr < 0`` (50 digits), the one with the largest
    ``|expr| p (1 - p)`` (the witness curvature scales with ``p (1 - p)``) is
    preferred; otherwise the solver's point stands.
    """
    bad = _negative_at(expr, p, _MODERATE)
    if not bad:
        return found
    return min(bad, key=lambda xv: xv[1] * float(xv[0] * (1 - xv[0])))[0]


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


def _sampled_token(fit: symbolic.SampledTokenFit, timeout_ms: int) -> StructureResult:
    # A plain real symbol: with positive=True SymPy would fold the assumption p > 0
    # to True before it reaches z3.
    p = sp.Symbol("pi_k", real=True)
    f1 = fit.fprime.xreplace({fit.policy_k: p})
    f2 = fit.fsecond.xreplace({fit.policy_k: p})
    margin = f2 * (1 - p) - f1 * p
    cond3 = symbolic.sampled_token_condition(f1, f2, p, 3)
    cond2 = symbolic.sampled_token_condition(f1, f2, p, 2)
    # solveset is not trusted on transcendental inequalities: regions only when f', f''
    # are rational in pi_k branch by branch (conditions may still hold logs).
    values = [
        b
        for e in (f1, f2)
        for b in ([a for a, _ in e.args] if isinstance(e, sp.Piecewise) else [e])
    ]
    rational = not any(
        p in a.free_symbols for v in values for a in v.atoms(sp.exp, sp.log)
    )
    region3 = _region_text(cond3, p) if rational else None
    region2 = _region_text(cond2, p) if rational else None
    condition = None
    if region3 is not None:
        condition = f"{region3} (V >= 3)"
        if region2 is not None and region2 != region3:
            condition += f"; {region2} (V = 2)"
    claims = [("fprime", -f1 >= 0), ("margin", margin >= 0)]
    results = {}
    for name, claim in claims:
        res = formal.prove(
            claim, [p], assumptions=[p > 0, p < 1], timeout_ms=timeout_ms
        )
        if res.status == "unknown" and "not encodable" in res.detail:
            res = _prove_branchwise(-f1 if name == "fprime" else margin, p, timeout_ms)
        if res.status == "unknown":
            bad = _scan(-f1 if name == "fprime" else margin, p)
            if bad is not None:
                res = formal.ProofResult(
                    "refuted",
                    {p.name: bad},
                    f"grid point re-checked at {HIGH_PRECISION} digits",
                )
        results[name] = res
    detail = (
        f"sampled-token family f(log pi_k): f' = {_short(f1)}, "
        f"f'' = {_short(f2)}; "
        f"z3: f'<=0 {results['fprime'].status}, margin {results['margin'].status}"
    )
    if (
        condition
        and condition.startswith("always")
        and any(r.status == "refuted" for r in results.values())
    ):
        condition = None  # the two routes disagree: report no region
    for name in ("fprime", "margin"):
        if results[name].status == "refuted":
            pk = _interior_witness(
                -f1 if name == "fprime" else margin,
                p,
                results[name].counterexample[p.name],
            )
            return StructureResult(
                "sampled_token", "refuted", condition, detail, (pk, name), fit
            )
    if all(r.status == "proved" for r in results.values()):
        return StructureResult("sampled_token", "proved", "always", detail, None, fit)
    if condition is None and "margin" in results:
        condition = f"{sp.sstr(margin)} >= 0 and {sp.sstr(-f1)} >= 0 (V >= 3)"
    return StructureResult("sampled_token", "unknown", condition, detail, None, fit)


def _short(expr: sp.Expr) -> str:
    text = sp.sstr(expr)
    if len(text) <= 80:
        return text
    if isinstance(expr, sp.Piecewise):
        return f"piecewise ({len(expr.args)} branches)"
    return text[:77] + "..."


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    return symbolic.is_zero(a - b)


def _fit_one(d: Derived, sampled: int):
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


def _fit_whole(d3: Derived, d4: Derived, sampled: int):
    forms = [_fit_one(d, sampled) for d in (d3, d4)]
    if None in forms:
        return None
    a, b = forms
    ren = {b.policy_k: a.policy_k}
    if _same(a.fprime, b.fprime.xreplace(ren)) and _same(
        a.fsecond, b.fsecond.xreplace(ren)
    ):
        return a
    return None


def _term_family(term: sp.Expr, z: tuple[sp.Symbol, ...]) -> tuple[str, bool] | None:
    """(family, convex) of one additive term at this V, or None if unrecognised.

    A term whose frozen value switches with the logits (a detached mask) is not in
    these families' form (its coefficient is not a constant): None, without the
    costly derivation of the mask in every Hessian entry."""
    if any(
        c.free_symbols & set(z)
        for f in term.atoms(symbolic.Frozen)
        for pw in f.atoms(sp.Piecewise)
        for _, c in pw.args
    ):
        return None
    hz = symbolic.logit_hessian(term, z)
    hp = symbolic.to_probability(hz, z)
    if hp.shift_invariant:
        ce = symbolic.fit_cross_entropy(hp.expr, hp.variables)
        if ce is not None and ce.scale.is_number:
            return "cross_entropy", bool(ce.scale >= 0)
    diag = symbolic.fit_regression(hz, z)
    if diag is not None and all(_nonnegative(d, z) for d in diag):
        return "regression", True
    return None


def _nonnegative(expr: sp.Expr, z: tuple[sp.Symbol, ...]) -> bool:
    """Proves ``expr >= 0`` for all real logits (SymPy assumptions, else z3).

    For z3, ``exp(z_i)`` becomes a positive variable ``e_i`` and every transcendental
    constant ``exp(c)`` a free positive variable: a relaxation, so a proof still holds.
    """
    if expr.is_nonnegative:
        return True
    e = sp.symbols(f"e0:{len(z)}", real=True)
    body = split_exp_log(
        sp.expand(
            expr, power_exp=True, mul=False, log=False, multinomial=False, basic=False
        )
    )
    body = body.xreplace({sp.exp(zi): ei for zi, ei in zip(z, e)})
    body = body.xreplace({sp.exp(-zi): 1 / ei for zi, ei in zip(z, e)})
    consts = {
        a: sp.Symbol(f"k{i}", real=True)
        for i, a in enumerate(a for a in body.atoms(sp.exp) if a.is_number)
    }
    body = body.xreplace(consts)
    xs = list(e) + list(consts.values())
    res = formal.prove(
        sp.cancel(body) >= 0, xs, assumptions=[x > 0 for x in xs], timeout_ms=5_000
    )
    return res.status == "proved"


def analyse_structure(
    loss, sampled: int, exact_inputs_fn, *, timeout_ms: int
) -> tuple[StructureResult, dict[int, Derived]]:
    """Runs the structure stage at V = 3 and V = 4.

    Args:
        loss: the JAX loss.
        sampled: ``k`` (must be < 3).
        exact_inputs_fn: ``V -> exact SymPy inputs``.
        timeout_ms: z3 timeout per claim.

    Returns:
        ``(result, derived)`` with the derived forms by ``V`` (reused by later stages).
    """
    # V = 3 first: a family must be recognised there before V = 4 is derived.
    derived = {3: derive(loss, 3, sampled, exact_inputs_fn(3))}
    if _fit_one(derived[3], sampled) is not None:
        derived[4] = derive(loss, 4, sampled, exact_inputs_fn(4))
        fit = _fit_whole(derived[3], derived[4], sampled)
        if fit is not None:
            return _sampled_token(fit, timeout_ms), derived
    families = []
    for v in (3, 4):
        if v not in derived:
            derived[v] = derive(loss, v, sampled, exact_inputs_fn(v))
        terms = [
            t
            for t in sp.Add.make_args(derived[v].expr)
            if t.free_symbols & set(derived[v].logits)
        ]
        families.append([_term_family(t, derived[v].logits) for t in terms])
        if not families[-1] or None in families[-1]:
            return StructureResult(
                None, "unknown", None, "no structural family recognised"
            ), derived
    if set(families[0]) == set(families[1]):
        names = sorted({f[0] for f in families[0]})
        if all(f[1] for f in families[0]):
            return StructureResult(
                "+".join(names),
                "proved",
                "always",
                f"sum of convex terms: {', '.join(names)}",
            ), derived
        return StructureResult(
            "+".join(names),
            "unknown",
            None,
            f"terms {', '.join(names)}; a term is not convex",
        ), derived
    return StructureResult(
        None, "unknown", None, "no structural family recognised"
    ), derived
