r"""Logit gradients and Hessians of a SymPy loss, and the change to probability
coordinates.

Differentiation keeps :class:`Frozen` subexpressions (their derivative is zero, exactly
as
JAX treats ``stop_gradient``); their values are restored at the end with ``unfreeze``.
In *probability coordinates* :math:`e_i = e^{z_i}` a softmax-based Hessian is a rational
function; when it is also invariant to the logit shift :math:`z \to z + c\mathbf 1` it
depends only on :math:`p_i = e_i / \sum_j e_j` (``p_i > 0``, ``Σ p = 1``), where formal
claims are polynomial inequalities z3 can decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy as sp

from theorycheck.symbolic._cells import fold_cells
from theorycheck.symbolic._frozen import unfreeze

__all__ = [
    "ProbabilityForm",
    "logit_gradient",
    "logit_hessian",
    "split_exp_log",
    "to_probability",
]


def logit_gradient(loss: sp.Expr, logits: Sequence[sp.Symbol]) -> list[sp.Expr]:
    r"""The logit gradient :math:`(\partial L / \partial z_i)_i`, frozen values
    restored.

    Args:
        loss: scalar SymPy expression in ``logits`` (may contain ``Frozen``).
        logits: the ``V`` logit symbols.

    Returns:
        ``V`` expressions.

    Examples:
        >>> z = sp.symbols("z0:2", real=True)
        >>> logit_gradient(z[0] ** 2 * z[1], z)
        [2*z0*z1, z0**2]
    """
    return [unfreeze(sp.diff(loss, zi)) for zi in logits]


def logit_hessian(loss: sp.Expr, logits: Sequence[sp.Symbol]) -> sp.Matrix:
    r"""The logit Hessian :math:`H_{ij} = \partial^2 L / \partial z_i \partial z_j`.

    Frozen subexpressions are constants while differentiating (JAX's ``stop_gradient``
    semantics) and take their values afterwards.

    Args:
        loss: scalar SymPy expression in ``logits``.
        logits: the ``V`` logit symbols.

    Returns:
        A symmetric ``V x V`` SymPy matrix.

    Examples:
        >>> from theorycheck.symbolic import log_softmax
        >>> z = sp.symbols("z0:2", real=True)
        >>> h = logit_hessian(-log_softmax(z)[0], z)
        >>> s = sp.exp(z[0]) + sp.exp(z[1])
        >>> sp.simplify(h[0, 0] - sp.exp(z[0] + z[1]) / s**2)
        0
    """
    grad = [sp.diff(loss, zi) for zi in logits]
    n = len(logits)
    rows = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            rows[i][j] = rows[j][i] = unfreeze(sp.diff(grad[i], logits[j]))
    return sp.Matrix(rows)


@dataclasses.dataclass(frozen=True)
class ProbabilityForm:
    """An expression rewritten in probability coordinates.

    Attributes:
        expr: the expression (scalar or matrix) in ``variables``.
        variables: ``p0..p{V-1}`` (simplex, when ``shift_invariant``) or ``e0..e{V-1}``
            (positive reals :math:`e^{z_i}`).
        shift_invariant: True when ``expr`` is unchanged by ``z -> z + c``; then
            ``variables`` lie on the open simplex.
        transcendental: True when ``exp``/``log`` remain (no z3 encoding possible).
    """

    expr: sp.Basic
    variables: tuple[sp.Symbol, ...]
    shift_invariant: bool
    transcendental: bool


def _zero(e: sp.Expr) -> bool:
    return sp.cancel(sp.together(e)) == 0


def replace_shared(expr, query, value, memo: dict | None = None):
    """``expr.replace(query, value)`` (bottom up) with one memo for every subtree.

    The Hessian of a loss repeats the same subexpressions (a clipped log-ratio, the
    log-softmax) in every entry and many times within one; SymPy's ``replace`` rewrites
    each copy again. Here each distinct subtree is rewritten once, also across the
    entries of a matrix. The rewrites used are exact identities, so the result equals
    the input in value.

    Examples:
        >>> x = sp.Symbol("x")
        >>> replace_shared(sp.exp(x) + sp.sin(sp.exp(x)), lambda e: e == sp.exp(x),
        ...                lambda e: sp.Symbol("y"))
        y + sin(y)
    """
    memo = {} if memo is None else memo
    if isinstance(expr, sp.MatrixBase):
        return expr.applyfunc(lambda a: replace_shared(a, query, value, memo))

    def walk(e):
        hit = memo.get(e)
        if hit is not None:
            return hit
        out = e
        if e.args and not isinstance(e, sp.Symbol):
            args = tuple(walk(a) for a in e.args)
            if args != e.args:
                out = e.func(*args)
        if isinstance(out, sp.Basic) and query(out):
            out = value(out)
        memo[e] = out
        return out

    return walk(expr)


def split_exp_log(expr: sp.Basic) -> sp.Basic:
    r"""Applies :math:`e^{a+b} = e^a e^b`, pulls common factors out of sums, and
    :math:`\log(e^{c} X) = c + \log X` for real ``c`` (exact identities).

    Args:
        expr: a SymPy expression or matrix.

    Returns:
        The rewritten expression (equal in value).

    Examples:
        >>> z, m = sp.symbols("z m", real=True)
        >>> split_exp_log(z - m - sp.log(sp.exp(z - m) + sp.exp(-m)))
        z - log(exp(z) + 1)
    """
    expr = replace_shared(
        expr,
        lambda e: isinstance(e, sp.exp) and isinstance(e.args[0], sp.Add),
        lambda e: sp.Mul(*[sp.exp(t) for t in e.args[0].args]),
    )
    expr = replace_shared(expr, lambda e: isinstance(e, sp.Add), sp.factor_terms)

    def split(e):
        factors = sp.Mul.make_args(e.args[0])
        exps = [f for f in factors if isinstance(f, sp.exp)]
        rest = sp.Mul(*[f for f in factors if not isinstance(f, sp.exp)])
        return sp.Add(*[f.args[0] for f in exps]) + sp.log(rest)

    return replace_shared(
        expr,
        lambda e: (
            isinstance(e, sp.log)
            and isinstance(e.args[0], sp.Mul)
            and any(isinstance(f, sp.exp) and f.args[0].is_real for f in e.args[0].args)
        ),
        split,
    )


def to_probability(expr: sp.Basic, logits: Sequence[sp.Symbol]) -> ProbabilityForm:
    r"""Rewrites ``expr(z)`` with :math:`e^{z_i} = e_i` and, if shift invariant,
    :math:`p_i`.

    .. math::
        z_i = \log e_i, \qquad p_i = e_i / \textstyle\sum_j e_j

    Args:
        expr: a SymPy expression or matrix in ``logits`` (no ``Frozen`` left).
        logits: the ``V`` logit symbols.

    Returns:
        A :class:`ProbabilityForm`.

    Examples:
        >>> from theorycheck.symbolic import softmax
        >>> z = sp.symbols("z0:2", real=True)
        >>> to_probability(softmax(z)[0], z).expr
        p0
    """
    n = len(logits)
    e = sp.symbols(f"e0:{n}", positive=True)
    p = sp.symbols(f"p0:{n}", positive=True)

    def entries(x):
        return list(x) if isinstance(x, sp.MatrixBase) else [x]

    # z_i = log p_i + c with sum(p) = 1: invariant expressions lose c.
    c = sp.Dummy("c", real=True)
    total = sp.Add(*p)
    trial = expr.xreplace({zi: sp.log(pi) + c for zi, pi in zip(logits, p)})
    trial = split_exp_log(trial)
    trial = replace_shared(trial, lambda a: a == total, lambda a: sp.Integer(1))
    trial = split_exp_log(trial)
    invariant = all(c not in a.free_symbols for a in entries(trial))
    if invariant:
        out = tidy_probability(trial)
        variables = p
    else:
        out = expr.xreplace({zi: sp.log(ei) for zi, ei in zip(logits, e)})
        variables = e
    return ProbabilityForm(out, tuple(variables), invariant, is_transcendental(out))


def tidy_probability(expr: sp.Basic, *, fold: bool = True) -> sp.Basic:
    """Entry by entry: ``cancel``; a Piecewise in one probability is split into cells
    (:func:`fold_cells`), else ``piecewise_fold``-ed (``fold=True``) or left as is.
    Equal entries (a symmetric Hessian's ``H_ij`` and ``H_ji``) are tidied once: the
    tidied form is a function of the entry alone."""
    done: dict = {}

    def tidy(a):
        if a not in done:
            done[a] = _tidy_entry(a, fold)
        return done[a]

    return expr.applyfunc(tidy) if isinstance(expr, sp.MatrixBase) else tidy(expr)


def _tidy_entry(a: sp.Basic, fold: bool) -> sp.Basic:
    if not a.has(sp.Piecewise):
        return sp.cancel(a)
    folded = fold_cells(a, None, sp.Interval.open(0, 1))
    if folded is not None:
        return folded
    return sp.piecewise_fold(a) if fold else a


def is_transcendental(expr: sp.Basic) -> bool:
    """True when ``exp``/``log``/hyperbolic functions remain (no z3 encoding)."""
    entries = list(expr) if isinstance(expr, sp.MatrixBase) else [expr]
    return any(a.has(sp.exp, sp.log, sp.cosh, sp.sinh, sp.tanh) for a in entries)
