r"""Term families: sums of cross-entropy terms and one-variable (regression) terms.

* ``cross_entropy``: :math:`H = c\,S` with a constant ``c``; PSD iff ``c ≥ 0``.
* ``regression``: a diagonal Hessian whose entry ``i`` depends on :math:`z_i` only
  (:math:`L = \sum_i g_i(z_i)`). The regression terms' diagonals are added per
  coordinate before deciding, so a convex square that outweighs a concave bump in the
  same coordinate is still recognised. Each coordinate's total :math:`g_i''(z_i) \ge 0`
  on the whole real line is decided by SymPy's assumptions, z3 on the
  :math:`e^{z_i}` relaxation, or the interval prover on the compactified line
  :math:`z_i = \operatorname{atanh} u` (exp, log, cosh, tanh, softplus/logaddexp,
  powers), whose proof is a certificate.

A nonnegative sum of PSD terms is PSD for every V; a term the families do not cover
leaves the stage ``unknown``.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from theorycheck import formal, symbolic
from theorycheck.symbolic import split_exp_log

__all__ = ["TermVerdict", "decide_terms"]


@dataclasses.dataclass(frozen=True)
class TermVerdict:
    """Families of the additive terms at one V and whether their sum is PSD."""

    families: frozenset[str]
    convex: bool
    certificates: tuple[formal.Certificate, ...] = ()
    detail: str = ""


def _classify(term: sp.Expr, z: tuple[sp.Symbol, ...]):
    """``("cross_entropy", scale)``, ``("regression", diagonal)`` or None.

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
            return "cross_entropy", ce.scale
    diag = symbolic.fit_regression(hz, z)
    if diag is not None:
        return "regression", diag
    return None


def _nonnegative_z3(expr: sp.Expr, z: tuple[sp.Symbol, ...]) -> bool:
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
    if body.has(*z):
        return False
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


def _coordinate(expr: sp.Expr, z: tuple[sp.Symbol, ...]):
    r"""``(convex, certificate, note)`` for one coordinate's :math:`g''(z_i) \ge 0`."""
    if expr == 0 or _nonnegative_z3(expr, z):
        return True, None, "z3"
    (zi,) = expr.free_symbols & set(z) or (None,)
    if zi is None or expr.free_symbols - {zi}:
        return False, None, "not one variable"
    res = None
    for form in sorted(_forms(expr), key=sp.count_ops):
        res = formal.prove_nonnegative(form, zi, formal.LINE)
        if res.status == "proved":
            return True, res.certificate, "interval"
        if res.status == "refuted":
            break
    return False, None, f"interval: {res.status} ({res.detail})"


def _forms(expr: sp.Expr):
    r"""``expr`` and exact rewritings of it (tried by the interval prover, the one
    with the fewest operations first, ``expr`` first among equals).

    Ratios such as :math:`\sinh^2/\cosh^2` lose all information towards
    :math:`\pm\infty` in interval arithmetic (∞/∞): on
    :math:`1 - \sinh^2(z - 1/2)/\cosh^2(z - 1/2)` the prover spends its whole cell
    budget in vain, while the exponential form over one denominator, or SymPy's
    simplification (:math:`1/\cosh^2(z - 1/2)`), is proved in one cell. Each
    rewriting is SymPy's exact identity; it is also compared with ``expr`` at three
    points at 30 digits before use.
    """
    yield expr
    x = next(iter(expr.free_symbols))
    for rewrite in (lambda e: sp.cancel(e.rewrite(sp.exp)), sp.simplify):
        form = rewrite(expr)
        if form == expr:
            continue
        if all(
            abs(sp.N((form - expr).xreplace({x: sp.Rational(t, 3)}), 30)) < 1e-25
            for t in (-5, 1, 4)
        ):
            yield form


def decide_terms(expr: sp.Expr, z: tuple[sp.Symbol, ...]) -> TermVerdict | None:
    """Classifies the additive terms of ``expr`` and decides their sum's PSD-ness.

    Args:
        expr: the loss at one V (SymPy, in ``z``).
        z: the logit symbols.

    Returns:
        A :class:`TermVerdict`, or None when a term is in no family.

    Examples:
        >>> z = sp.symbols("z0:3", real=True)
        >>> v = decide_terms(sp.log(sp.cosh(z[0])) + z[1] ** 2, z)
        >>> sorted(v.families), v.convex, len(v.certificates)
        (['regression'], True, 1)
    """
    terms = [t for t in sp.Add.make_args(expr) if t.free_symbols & set(z)]
    if not terms:
        return None
    names, convex, diag = set(), True, [sp.Integer(0)] * len(z)
    for t in terms:
        found = _classify(t, z)
        if found is None:
            return None
        names.add(found[0])
        if found[0] == "cross_entropy":
            convex = convex and bool(found[1] >= 0)
        else:
            diag = [a + b for a, b in zip(diag, found[1])]
    certs, notes = [], []
    if "regression" in names:
        for i, d in enumerate(diag):
            ok, cert, note = _coordinate(d, z)
            convex = convex and ok
            if cert is not None:
                certs.append(cert)
            if not ok:
                notes.append(f"g''(z{i}) >= 0: {note}")
    detail = "; ".join(notes)
    return TermVerdict(frozenset(names), convex, tuple(certs), detail)
