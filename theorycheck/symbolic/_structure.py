r"""Structure theorems for logit Hessians: sampled-token, cross-entropy and regression
forms.

**Sampled-token family** :math:`L = f(\log\pi_k)`. With :math:`v = e_k - \pi`,
:math:`S = \operatorname{diag}\pi - \pi\pi^\top` (so :math:`\nabla\log\pi_k = v`,
:math:`\nabla^2\log\pi_k = -S`) the chain rule gives

.. math::
    H = f''\,v v^\top - f'\,S, \qquad
    w^\top H w = f''\,a^2 - f'\,\mathrm{Var}_\pi(w), \quad a = w_k - \langle\pi,
    w\rangle .

By the law of total variance (split token ``k`` from the rest, with :math:`p = \pi_k`
and
:math:`\sigma^2\ge 0` the variance of ``w`` inside the rest),
:math:`\mathrm{Var}_\pi(w) = \tfrac{p}{1-p}a^2 + (1-p)\sigma^2`, so

.. math::
    w^\top H w = a^2\Big(f'' - f'\tfrac{p}{1-p}\Big) - f'(1-p)\,\sigma^2 .

For :math:`V \ge 3`, :math:`\sigma^2` is free, hence **H ⪰ 0 iff** :math:`f' \le 0` and
:math:`-f' + f''\,(1-\pi_k)/\pi_k \ge 0`. For :math:`V = 2`, :math:`\sigma^2 = 0` and
H ⪰ 0 iff :math:`f''(1-\pi_k) - f'\pi_k \ge 0`. This module states the forms; the
project proves them in :mod:`theorycheck.formal` (z3) and checks them numerically.

**Cross-entropy family** :math:`L = \sum_i c_i \log\pi_i + \ell(z)` with constant
(frozen)
:math:`c` and linear :math:`\ell`: :math:`H = -(\sum_i c_i)\,S`, PSD iff
:math:`\sum_i c_i \le 0` (SFT, LCO-KLD, any soft target). **Regression family**:
a diagonal Hessian (:math:`L = \sum_i g_i(z_i)`), PSD iff every :math:`g_i'' \ge 0`
(LCO-MSE, LCO-LCH). These structural facts are DERIVED here; the LCO paper's own Lemma
4.6 text is NOT FOUND (docs/papers.md §2.5).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import sympy as sp

from theorycheck.symbolic._cells import condition_set, fold_cells, piecewise_cells

__all__ = [
    "CrossEntropyFit",
    "condition_set",
    "SampledTokenFit",
    "fit_cross_entropy",
    "fit_regression",
    "fit_sampled_token",
    "is_zero",
    "sampled_token_condition",
    "sampled_token_hessian",
    "sampled_token_identity",
    "total_variance_gap",
]


def _live_branches(pw: sp.Piecewise) -> list[sp.Expr]:
    """Branch values of ``pw`` minus those whose region is provably empty.

    Pruning runs only for conditions in one positive symbol (probability coordinates);
    otherwise every branch is kept (more branches to check is the safe side).
    """
    syms = set().union(*[sp.sympify(c).free_symbols for _, c in pw.args])
    values = [b for b, _ in pw.args]
    if len(syms) != 1:
        return values
    (x,) = syms
    if not x.is_positive:
        return values
    try:
        return [pw.args[i][0] for i in _live_indices(pw.args, x)]
    except (NotImplementedError, TypeError, ValueError):
        return values


@functools.lru_cache(maxsize=1024)
def _live_indices(args: tuple, x: sp.Symbol) -> tuple[int, ...]:
    domain = sp.Interval.open(0, sp.oo)
    remaining: sp.Set = domain
    live = []
    for i, (_, cond) in enumerate(args):
        region = condition_set(cond, x, domain)
        if sp.Intersection(region, remaining) != sp.S.EmptySet:
            live.append(i)
        remaining = sp.Complement(remaining, region)
    return tuple(live)


def is_zero(expr: sp.Expr) -> bool:
    """True only when ``expr`` is identically zero (branch by branch for Piecewise;
    branches whose region is provably empty are skipped)."""
    cells = piecewise_cells(expr) if expr.has(sp.Piecewise) else None
    if cells is not None:
        return all(sp.cancel(sp.together(value)) == 0 for _, value in cells)
    expr = sp.piecewise_fold(expr)
    if isinstance(expr, sp.Piecewise):
        return all(is_zero(branch) for branch in _live_branches(expr))
    return sp.cancel(sp.together(expr)) == 0


def _cancel(expr: sp.Expr) -> sp.Expr:
    """``cancel`` applied branch by branch (split into cells, else Piecewise folded)."""
    folded = fold_cells(expr) if expr.has(sp.Piecewise) else None
    if folded is not None:
        return folded
    expr = sp.piecewise_fold(expr)
    if isinstance(expr, sp.Piecewise):
        return sp.Piecewise(*[(sp.cancel(b), c) for b, c in expr.args])
    return sp.cancel(expr)


def sampled_token_hessian(
    fprime: sp.Expr, fsecond: sp.Expr, policy: Sequence[sp.Expr], sampled: int
) -> sp.Matrix:
    r"""The logit Hessian of :math:`L = f(\log\pi_k)`: :math:`f''vv^\top - f'S`.

    Args:
        fprime: :math:`f'(\log\pi_k)`.
        fsecond: :math:`f''(\log\pi_k)`.
        policy: ``V`` probabilities :math:`\pi`.
        sampled: the index ``k``.

    Returns:
        The ``V x V`` matrix.

    Examples:
        >>> p = sp.symbols("p0:2", positive=True)
        >>> sampled_token_hessian(-1, 0, p, 0)
        Matrix([
        [-p0**2 + p0,      -p0*p1],
        [     -p0*p1, -p1**2 + p1]])
    """
    n = len(policy)
    v = [(1 if i == sampled else 0) - policy[i] for i in range(n)]
    return sp.Matrix(
        n,
        n,
        lambda i, j: (
            fsecond * v[i] * v[j]
            - fprime * ((policy[i] if i == j else 0) - policy[i] * policy[j])
        ),
    )


def sampled_token_condition(
    fprime: sp.Expr, fsecond: sp.Expr, policy_k: sp.Expr, vocab: int
) -> sp.Basic:
    r"""The exact PSD condition of :math:`f''vv^\top - f'S` at :math:`\pi_k`.

    .. math::
        V \ge 3:\; f' \le 0 \;\wedge\; -f' + f''\frac{1-\pi_k}{\pi_k} \ge 0; \qquad
        V = 2:\; f''(1-\pi_k) - f'\pi_k \ge 0

    Args:
        fprime: :math:`f'`.
        fsecond: :math:`f''`.
        policy_k: :math:`\pi_k \in (0, 1)`.
        vocab: ``V >= 2``.

    Returns:
        A SymPy boolean.

    Examples:
        >>> p = sp.Symbol("p", positive=True)
        >>> sampled_token_condition(-p, -p, p, 3)  # unclipped IS with A/q = 1
        p*(2*p - 1) >= 0
    """
    # Both conditions are multiplied by pi_k > 0 (and 1 - pi_k > 0 for V = 2).
    margin = _tidy(fsecond * (1 - policy_k) - fprime * policy_k)
    if vocab == 2:
        return sp.Ge(margin, 0)
    return sp.And(sp.Ge(_tidy(-fprime), 0), sp.Ge(margin, 0))


def _tidy(expr: sp.Expr) -> sp.Expr:
    return sp.factor(expr) if not expr.has(sp.Piecewise) else sp.piecewise_fold(expr)


@dataclasses.dataclass(frozen=True)
class SampledTokenFit:
    """``H = f'' v vᵀ − f' S`` with ``f'``, ``f''`` functions of ``π_k`` alone."""

    fprime: sp.Expr
    fsecond: sp.Expr
    policy_k: sp.Symbol


@dataclasses.dataclass(frozen=True)
class CrossEntropyFit:
    """``H = c · S`` with a constant ``c`` (PSD iff ``c ≥ 0``, every V)."""

    scale: sp.Expr


def _policy(variables: Sequence[sp.Symbol]) -> list[sp.Expr]:
    return list(variables)


def fit_sampled_token(
    gradient: Sequence[sp.Expr],
    hessian: sp.Matrix,
    variables: Sequence[sp.Symbol],
    sampled: int,
) -> SampledTokenFit | None:
    r"""Recognises :math:`\nabla L = f' v` and :math:`H = f''vv^\top - f'S` (V ≥ 3).

    Both in probability coordinates (``variables`` = :math:`p`, :math:`\sum p = 1`).

    Args:
        gradient: ``V`` entries of the logit gradient (probability coordinates).
        hessian: the ``V x V`` logit Hessian (probability coordinates).
        variables: the probability symbols :math:`p_0..p_{V-1}`.
        sampled: the index ``k``.

    Returns:
        The fit, or None when the form does not hold identically.

    Examples:
        >>> p = sp.symbols("p0:3", positive=True)
        >>> h = sampled_token_hessian(-1, 0, p, 0)
        >>> fit_sampled_token([p[0] - 1, p[1], p[2]], h, p, 0).fprime
        -1
    """
    n = len(variables)
    if n < 3:
        return None
    p = _policy(variables)
    i, j = [t for t in range(n) if t != sampled][:2]
    fprime = _cancel(-gradient[i] / p[i])
    v = [(1 if t == sampled else 0) - p[t] for t in range(n)]
    if not all(is_zero(gradient[t] - fprime * v[t]) for t in range(n)):
        return None
    fsecond = _cancel(hessian[i, j] / (p[i] * p[j]) - fprime)
    model = sampled_token_hessian(fprime, fsecond, p, sampled)
    if not all(
        is_zero(hessian[a, b] - model[a, b]) for a in range(n) for b in range(a, n)
    ):
        return None
    others = set(p) - {p[sampled]}
    if (fprime.free_symbols | fsecond.free_symbols) & others:
        return None
    return SampledTokenFit(fprime, fsecond, p[sampled])


def fit_cross_entropy(
    hessian: sp.Matrix, variables: Sequence[sp.Symbol]
) -> CrossEntropyFit | None:
    r"""Recognises :math:`H = c\,S` with a constant ``c`` (probability coordinates).

    Args:
        hessian: the ``V x V`` logit Hessian in probability coordinates.
        variables: the probability symbols.

    Returns:
        The fit, or None.

    Examples:
        >>> p = sp.symbols("p0:3", positive=True)
        >>> fit_cross_entropy(2 * sampled_token_hessian(-1, 0, p, 0), p).scale
        2
    """
    p = _policy(variables)
    n = len(p)
    scale = sp.cancel(-hessian[0, 1] / (p[0] * p[1]))
    if scale.free_symbols & set(p):
        return None
    model = sampled_token_hessian(-scale, 0, p, 0)
    if not all(
        is_zero(hessian[a, b] - model[a, b]) for a in range(n) for b in range(a, n)
    ):
        return None
    return CrossEntropyFit(scale)


def fit_regression(
    hessian: sp.Matrix, logits: Sequence[sp.Symbol]
) -> list[sp.Expr] | None:
    r"""Recognises a diagonal Hessian whose ``i``-th entry depends on :math:`z_i` only.

    Args:
        hessian: the ``V x V`` logit Hessian in logit coordinates.
        logits: the logit symbols.

    Returns:
        The diagonal entries :math:`g_i''(z_i)`, or None.

    Examples:
        >>> z = sp.symbols("z0:2", real=True)
        >>> fit_regression(sp.diag(2, 1 / sp.cosh(z[1]) ** 2), z)
        [2, cosh(z1)**(-2)]
    """
    n = len(logits)
    if not all(is_zero(hessian[a, b]) for a in range(n) for b in range(n) if a != b):
        return None
    diag = [hessian[a, a] for a in range(n)]
    if any(d.free_symbols & (set(logits) - {logits[a]}) for a, d in enumerate(diag)):
        return None
    return diag


def sampled_token_identity(vocab: int, sampled: int = 0) -> sp.Matrix:
    r"""Gap between the chain-rule Hessian of :math:`f(\log\pi_k)` and
    :math:`f''vv^\top-f'S`.

    ``f`` is an undefined SymPy function, so the identity is checked for *every* smooth
    ``f`` at this ``V``.

    Args:
        vocab: ``V``.
        sampled: the index ``k``.

    Returns:
        The ``V x V`` difference in probability coordinates (zero entries when the
        theorem's Hessian form holds).

    Examples:
        >>> all(is_zero(e) for e in sampled_token_identity(3))
        True
    """
    from theorycheck.symbolic._derive import logit_hessian, to_probability
    from theorycheck.symbolic._softmax import log_softmax

    z = sp.symbols(f"z0:{vocab}", real=True)
    u = sp.Symbol("u", real=True)
    f = sp.Function("f")
    loss = f(log_softmax(z)[sampled])
    h = logit_hessian(loss, z)
    lk = log_softmax(z)[sampled]
    f1 = sp.Subs(sp.diff(f(u), u), u, lk).doit()
    f2 = sp.Subs(sp.diff(f(u), u, 2), u, lk).doit()
    p = [sp.exp(t) / sp.Add(*[sp.exp(s) for s in z]) for t in z]
    gap = h - sampled_token_hessian(f1, f2, p, sampled)
    fs = sp.symbols("F1 F2", real=True)
    gap = gap.subs({f2: fs[1], f1: fs[0]})
    return to_probability(gap, z).expr


def total_variance_gap(vocab: int, sampled: int = 0) -> sp.Expr:
    r"""Gap in the law of total variance used by the structure theorem.

    .. math::
        \mathrm{Var}_\pi(w) = \frac{p}{1-p}\,a^2 + (1-p)\,\sigma^2,\quad
        a = w_k - \langle\pi,w\rangle,\ p = \pi_k,\
        \sigma^2 = \sum_{i\ne k}\frac{\pi_i}{1-p}\Big(w_i - m\Big)^2,\
        m = \sum_{i\ne k}\frac{\pi_i w_i}{1-p}

    Args:
        vocab: ``V``.
        sampled: the index ``k``.

    Returns:
        ``lhs - rhs`` as a rational function of :math:`\pi` (with
        :math:`\pi_k = 1 - \sum_{i \ne k}\pi_i`) and ``w``; zero when the identity
        holds.

    Examples:
        >>> total_variance_gap(4)
        0
    """
    w = sp.symbols(f"w0:{vocab}", real=True)
    q = sp.symbols(f"p0:{vocab}", positive=True)
    rest = [i for i in range(vocab) if i != sampled]
    pk = 1 - sp.Add(*[q[i] for i in rest])
    pi = [pk if i == sampled else q[i] for i in range(vocab)]
    mean = sp.Add(*[pi[i] * w[i] for i in range(vocab)])
    var = sp.Add(*[pi[i] * (w[i] - mean) ** 2 for i in range(vocab)])
    a = w[sampled] - mean
    m = sp.Add(*[pi[i] * w[i] for i in rest]) / (1 - pk)
    sigma2 = sp.Add(*[pi[i] / (1 - pk) * (w[i] - m) ** 2 for i in rest])
    return sp.cancel(sp.together(var - (pk / (1 - pk) * a**2 + (1 - pk) * sigma2)))
