r"""Interval extensions of the elementary functions (mpmath ``iv``), outward rounded.

mpmath's interval context has ``exp``, ``log``, ``sqrt`` and the field operations;
``cosh``/``sinh``/``tanh``/``atanh`` are built here from ``iv.exp``/``iv.log`` at the
endpoints of the interval (exact for a monotone function; ``cosh`` splits at its
minimum 0), rational powers likewise, and products use the set convention 0·∞ = 0 at
the endpoints.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
from mpmath import iv

__all__ = ["FUNCTIONS", "IntervalUndefined", "hull", "mul", "power"]


class IntervalUndefined(ArithmeticError):
    """The expression is undefined somewhere on the interval (log of a negative)."""


def hull(values):
    return iv.mpf([min(v.a for v in values).a, max(v.b for v in values).b])


def mul(x, y):
    """Product of intervals with the set convention 0·∞ = 0 at the endpoints (the
    values are reals; ∞ is only a limit), so [0, 1]·[1, ∞] = [0, ∞] in any order."""
    if all(abs(e) != iv.inf for e in (x.a, x.b, y.a, y.b)):
        return x * y
    ends = [
        iv.mpf(0) if (ea == 0 or eb == 0) else ea * eb
        for ea in (x.a, x.b)
        for eb in (y.a, y.b)
    ]
    return iv.mpf([min(e.a for e in ends).a, max(e.b for e in ends).b])


def _monotone(fn_point, increasing: bool = True):
    """An interval extension of a monotone function from enclosures at the endpoints."""

    def f(x):
        lo, hi = fn_point(iv.mpf(x.a)), fn_point(iv.mpf(x.b))
        return iv.mpf([lo.a, hi.b]) if increasing else iv.mpf([hi.a, lo.b])

    return f


def _is_inf(x) -> bool:
    return x.a == x.b and x.a in (iv.inf, -iv.inf)


def _sinh_point(x):
    if _is_inf(x):
        return x
    return (iv.exp(x) - iv.exp(-x)) / 2


def _tanh_point(x):
    if _is_inf(x):
        return iv.mpf(1) if x.a > 0 else iv.mpf(-1)
    if x.a >= 0:
        return 1 - 2 / (iv.exp(2 * x) + 1)
    return 2 / (iv.exp(-2 * x) + 1) - 1


def _atanh_point(x):
    if x.a >= 1:
        return iv.mpf(iv.inf)
    if x.b <= -1:
        return iv.mpf(-iv.inf)
    return iv.log((1 + x) / (1 - x)) / 2


def _cosh(x):
    def point(t):
        return t if _is_inf(t) else (iv.exp(t) + iv.exp(-t)) / 2

    lo, hi = point(iv.mpf(x.a)), point(iv.mpf(x.b))
    top = max(lo.b, hi.b)
    if x.a <= 0 <= x.b:
        return iv.mpf([1, top])
    return iv.mpf([min(lo.a, hi.a), top])


def _log(x):
    if x.b < 0 or (x.b == 0):
        raise IntervalUndefined("log of a nonpositive interval")
    if x.a < 0:
        raise IntervalUndefined("log of an interval containing negatives")
    return iv.log(x)


def power(base, exponent: sp.Expr):
    if exponent.is_Integer:
        n = int(exponent)
        if n < 0 and base.a <= 0 <= base.b:
            if base.a == 0 == base.b or (base.a < 0 < base.b):
                raise IntervalUndefined("negative power of an interval containing 0")
        return base**n
    if exponent.is_Rational:
        if base.a < 0:
            raise IntervalUndefined("fractional power of negatives")
        r = iv.mpf(exponent.p) / exponent.q
        inc = exponent > 0

        def point(t):
            if _is_inf(t):
                return iv.mpf(iv.inf if inc else 0)
            if t.a > 0:
                return iv.exp(r * iv.log(t))
            return iv.mpf(0 if inc else iv.inf)

        return _monotone(point, increasing=inc)(base)
    raise IntervalUndefined(f"power with exponent {exponent}")


FUNCTIONS: dict[type, Callable] = {
    sp.exp: iv.exp,
    sp.log: _log,
    sp.cosh: _cosh,
    sp.sinh: _monotone(_sinh_point),
    sp.tanh: _monotone(_tanh_point),
    sp.atanh: _monotone(_atanh_point),
}
