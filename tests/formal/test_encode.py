"""SymPy -> z3 encoding: polynomials in, transcendental functions refused."""

import pytest
import sympy as sp
import z3

from theorycheck.formal import encode

X, Y = sp.symbols("x y", real=True)
VARS = {X: z3.Real("x"), Y: z3.Real("y")}


@pytest.mark.parametrize(
    "bad", [sp.exp(X), sp.log(X + 2), sp.sqrt(X**2 + 1), sp.cosh(X)]
)
def test_encode_refuses_transcendental(bad):
    with pytest.raises(NotImplementedError):
        encode(bad + Y >= 0, VARS)


def test_encode_polynomial_is_equivalent():
    expr = X**2 * Y - sp.Rational(3, 7) * Y + 1
    term = encode(expr, VARS)
    s = z3.Solver()
    value = expr.subs({X: 2, Y: sp.Rational(1, 2)})  # exact: 12/7
    s.add(VARS[X] == 2, VARS[Y] == z3.RealVal("1/2"))
    s.add(term != z3.RealVal(f"{value.p}/{value.q}"))
    assert s.check() == z3.unsat


def test_encode_piecewise_is_if_then_else():
    pw = sp.Piecewise((X, X >= Y), (Y, True))
    s = z3.Solver()
    s.add(VARS[X] == 1, VARS[Y] == 3, encode(pw, VARS) != 3)
    assert s.check() == z3.unsat


def test_encode_unknown_symbol_raises():
    with pytest.raises(NotImplementedError):
        encode(sp.Symbol("w", real=True) > 0, VARS)
