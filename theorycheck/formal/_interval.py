r"""Validated enclosures of a SymPy expression in one variable (mpmath's ``iv``).

:func:`enclosure_fn` compiles an expression :math:`g(x)` into a function that maps an
interval :math:`X = [a, b]` to an interval :math:`G \supseteq \{g(x) : x \in X\}`.
Every operation rounds outwards (mpmath's interval context); the endpoints may be
:math:`\pm\infty`, so a cell touching a pole of ``log`` or the end of a compactified
line still gets a (possibly unbounded) enclosure instead of NaN. mpmath's ``iv`` has
no ``cosh``/``sinh``/``tanh``/``atanh``; they are evaluated here from ``iv.exp`` and
``iv.log`` at the endpoints of the interval, which is exact for a monotone function
(``cosh`` splits at its minimum 0). Products use the set convention 0·∞ = 0 at the
endpoints (mpmath's own product answers [-∞, ∞] for [0, 1]·[-1, ∞]).

A ``Piecewise`` is evaluated branch by branch: a branch whose condition is certainly
false on :math:`X` is skipped, the first certainly true one ends the list, and an
undecided condition makes the result the hull of the candidate branches (sound). The
compiled function then raises the flag ``switched`` so that callers do not apply a
derivative argument across the switch.

Why mpmath rather than python-flint's arb balls: both were tried on the conditions of
the sampled-token theorem. arb is ~35x faster per operation but a ball cannot hold an
infinite endpoint (``log`` of a ball touching 0 is NaN), while the open ends of
:math:`\pi_k \in (0, 1)` and of the compactified real line are exactly where the
conditions need an answer; at the few hundred cells a condition needs, mpmath is fast
enough and adds no dependency.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction

import mpmath
import sympy as sp
from mpmath import iv
from mpmath.libmp import to_rational

from theorycheck.formal._ivfuncs import (
    FUNCTIONS,
    IntervalUndefined,
    hull,
    mul,
    power,
)

__all__ = [
    "Enclosure",
    "IntervalUndefined",
    "enclose",
    "enclosure_fn",
    "interval",
    "lower_fraction",
    "upper_fraction",
]

#: Working precision (bits) of the interval evaluation.
PREC = 80


@dataclasses.dataclass
class Enclosure:
    """An enclosure and whether a Piecewise condition switched inside the interval."""

    value: object  # an mpmath ivmpf
    switched: bool


def interval(lo: Fraction, hi: Fraction):
    """The ``iv`` interval enclosing ``[lo, hi]`` (rational endpoints, rounded out)."""
    a = iv.mpf(lo.numerator) / lo.denominator
    b = iv.mpf(hi.numerator) / hi.denominator
    return iv.mpf([a.a, b.b])


def _raw_fraction(raw) -> Fraction | None:
    if raw in (mpmath.libmp.finf, mpmath.libmp.fninf, mpmath.libmp.fnan):
        return None
    p, q = to_rational(raw)
    return Fraction(p, q)


def lower_fraction(value) -> Fraction | None:
    """Exact lower endpoint of an ``iv`` interval (None for -inf)."""
    return _raw_fraction(value._mpi_[0])


def upper_fraction(value) -> Fraction | None:
    """Exact upper endpoint of an ``iv`` interval (None for +inf)."""
    return _raw_fraction(value._mpi_[1])


def _number(expr: sp.Expr):
    if expr.is_Integer:
        return iv.mpf(int(expr))
    if expr.is_Rational:
        return iv.mpf(expr.p) / expr.q
    if expr is sp.E:
        return iv.e
    if expr is sp.pi:
        return iv.pi
    if expr in (sp.oo, -sp.oo, sp.zoo, sp.nan):
        raise IntervalUndefined(f"non-finite constant {expr}")
    raise NotImplementedError(f"constant {expr!r}")


def _compile(expr: sp.Basic, x: sp.Symbol, flags: dict) -> Callable:
    """The interval function of ``expr``; with ``flags["nodes"]`` (shared mode) one
    compiled node per distinct subexpression, evaluated once per enclosure (see
    :func:`enclosure_fn`)."""
    nodes = flags.get("nodes")
    if nodes is None:
        return _build(expr, x, flags)
    hit = nodes.get(expr)
    if hit is None:
        hit = _build(expr, x, flags)
        if expr.args:
            hit = _shared(
                hit, flags, constant=not (expr.free_symbols or expr.has(sp.Piecewise))
            )
        nodes[expr] = hit
    return hit


def _shared(fn: Callable, flags: dict, constant: bool) -> Callable:
    """``fn`` evaluated once per enclosure (its value kept in ``flags["memo"]``, which
    :func:`enclosure_fn`'s ``run`` empties at each call); a ``constant`` (no variable,
    no Piecewise, so no switch flag) once for good, after its first success."""
    if constant:
        box: list = []

        def kept(X):
            if not box:
                box.append(fn(X))
            return box[0]

        return kept
    key = object()

    def once(X):
        memo = flags["memo"]
        value = memo.get(key)
        if value is None:
            value = memo[key] = fn(X)
        return value

    return once


def _build(expr: sp.Basic, x: sp.Symbol, flags: dict) -> Callable:  # noqa: C901
    if expr == x:
        return lambda X: X
    if isinstance(expr, sp.Piecewise):
        branches = [(_compile(v, x, flags), _cond(c, x, flags)) for v, c in expr.args]

        def piecewise(X):
            candidates = []
            for value, cond in branches:
                ok = cond(X)
                if ok is False:
                    continue
                candidates.append(value(X))
                if ok is True:
                    break
                flags["switched"] = True
            if not candidates:
                raise IntervalUndefined("no Piecewise branch applies")
            return candidates[0] if len(candidates) == 1 else hull(candidates)

        return piecewise
    if not expr.free_symbols:
        if expr.is_Atom:
            c = _number(expr)
            return lambda X: c
    if isinstance(expr, sp.Add):
        terms = [_compile(a, x, flags) for a in expr.args]
        return lambda X: sum((t(X) for t in terms[1:]), terms[0](X))
    if isinstance(expr, sp.Mul):
        factors = [_compile(a, x, flags) for a in expr.args]

        def product(X):
            out = factors[0](X)
            for f in factors[1:]:
                out = mul(out, f(X))
            return out

        return product
    if isinstance(expr, sp.Pow):
        base = _compile(expr.base, x, flags)
        if expr.exp.free_symbols or not expr.exp.is_Rational:
            return _compile(sp.exp(expr.exp * sp.log(expr.base)), x, flags)
        return lambda X: power(base(X), expr.exp)
    fn = FUNCTIONS.get(expr.func)
    if fn is not None and len(expr.args) == 1:
        arg = _compile(expr.args[0], x, flags)
        return lambda X: fn(arg(X))
    if isinstance(expr, sp.Abs):
        arg = _compile(expr.args[0], x, flags)
        return lambda X: abs(arg(X))
    if isinstance(expr, (sp.Max, sp.Min)):
        parts = [_compile(a, x, flags) for a in expr.args]
        pick = max if isinstance(expr, sp.Max) else min

        def extreme(X):
            vals = [p(X) for p in parts]
            return iv.mpf([pick(v.a for v in vals).a, pick(v.b for v in vals).b])

        return extreme
    raise NotImplementedError(f"no interval extension for {expr.func.__name__}")


def _cond(cond: sp.Basic, x: sp.Symbol, flags: dict) -> Callable:
    """A condition on an interval: True (everywhere), False (nowhere) or None."""
    if cond in (sp.true, sp.false):
        return lambda X: bool(cond)
    if isinstance(cond, (sp.And, sp.Or)):
        parts = [_cond(c, x, flags) for c in cond.args]
        both = all if isinstance(cond, sp.And) else any

        def logic(X):
            vals = [p(X) for p in parts]
            if both(v is True for v in vals):
                return True
            if isinstance(cond, sp.And) and any(v is False for v in vals):
                return False
            if isinstance(cond, sp.Or) and all(v is False for v in vals):
                return False
            return None

        return logic
    if isinstance(cond, sp.Not):
        inner = _cond(cond.args[0], x, flags)
        return lambda X: None if inner(X) is None else not inner(X)
    if isinstance(cond, (sp.Ge, sp.Gt, sp.Le, sp.Lt)):
        diff = _compile(cond.lhs - cond.rhs, x, flags)
        strict = isinstance(cond, (sp.Gt, sp.Lt))
        sign = 1 if isinstance(cond, (sp.Ge, sp.Gt)) else -1

        def relation(X):
            d = diff(X) * sign
            if (d.a > 0) if strict else (d.a >= 0):
                return True
            if (d.b <= 0) if strict else (d.b < 0):
                return False
            return None

        return relation
    raise NotImplementedError(f"condition {cond}")


def enclosure_fn(
    expr: sp.Expr, x: sp.Symbol, *, prec: int = PREC, shared: bool = True
) -> Callable[[object], Enclosure]:
    """Compiles ``expr`` (one free symbol ``x``) into an interval function.

    Shared subexpressions (``shared=True``): SymPy's derivatives of a quotient repeat
    the same subexpressions (SAPO's margin has 194 nodes, 88 distinct; its second
    derivative 1594, 226 distinct). Each distinct subexpression is compiled once and
    evaluated once per call, its interval reused wherever it occurs; a constant one
    (no variable, no Piecewise) is kept after its first evaluation. Every operation
    sees the same operands at the same precision as in the tree walk
    (``shared=False``), so the enclosure is bit for bit the same and exactly as
    rigorous: only the repeated evaluations are skipped. A subexpression is evaluated
    at its first use only (never one the walk would skip, such as a Piecewise branch
    excluded on the interval), and the ``switched`` flag is raised by the same
    evaluation.

    Args:
        expr: a SymPy expression built from +, ×, powers, exp, log, cosh, sinh, tanh,
            atanh, Abs, Max/Min and Piecewise, with exact constants.
        x: the variable.
        prec: working precision in bits.
        shared: evaluate each distinct subexpression once (the same enclosure, bit
            for bit, as the plain tree walk of ``shared=False``).

    Returns:
        ``X -> Enclosure`` for an ``iv`` interval ``X``. It raises
        :class:`IntervalUndefined` where the expression is not defined on ``X``.

    Raises:
        NotImplementedError: an operation without an interval extension.

    Examples:
        >>> x = sp.Symbol("x")
        >>> fn = enclosure_fn(x * sp.log(x), x)
        >>> e = fn(interval(Fraction(1, 2), Fraction(1)))
        >>> float(e.value.a) <= -0.3465 and float(e.value.b) >= 0.0
        True
    """
    extra = expr.free_symbols - {x}
    if extra:
        raise NotImplementedError(f"free symbols {sorted(map(str, extra))} besides {x}")
    flags: dict = {"nodes": {}} if shared else {}
    old = iv.prec
    iv.prec = prec
    try:
        fn = _compile(expr, x, flags)
    finally:
        iv.prec = old
    flags.pop("nodes", None)

    def run(X) -> Enclosure:
        flags["switched"] = False
        flags["memo"] = {}
        old = iv.prec
        iv.prec = prec
        try:
            value = fn(X)
        except (ZeroDivisionError, mpmath.libmp.ComplexResult, ValueError) as err:
            raise IntervalUndefined(str(err)) from err
        finally:
            iv.prec = old
        if value.a != value.a or value.b != value.b:  # NaN endpoint
            raise IntervalUndefined("NaN enclosure")
        return Enclosure(value, bool(flags["switched"]))

    return run


def enclose(expr: sp.Expr, x: sp.Symbol, lo: Fraction, hi: Fraction) -> Enclosure:
    """One enclosure of ``expr`` over ``[lo, hi]`` (see :func:`enclosure_fn`).

    Examples:
        >>> x = sp.Symbol("x")
        >>> e = enclose(sp.cosh(x), x, Fraction(-1), Fraction(2))
        >>> float(e.value.a), round(float(e.value.b), 6)
        (1.0, 3.762196)
    """
    return enclosure_fn(expr, x)(interval(lo, hi))
