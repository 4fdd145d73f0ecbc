"""Interval bisection prover: certificates that re-check, refutations that re-check,
and mutation meta-tests (a wrong sign or a missing cell is caught)."""

import dataclasses
from fractions import Fraction

import pytest
import sympy as sp

from theorycheck.formal import (
    LINE,
    UNIT,
    CellProof,
    Certificate,
    prove_nonnegative,
    verify_certificate,
)

P = sp.Symbol("pi_k", real=True)
X = sp.Symbol("x", real=True)
BETA, Q = sp.Rational(1, 10), sp.Rational(1, 2)

#: Conditions of the sampled-token theorem that z3 refuses (exp/log), all true.
TRUE_CONDITIONS = [
    ("(log pi)^2: -f'", -2 * sp.log(P), UNIT),
    ("(log pi)^2: margin", -2 * P * sp.log(P) - 2 * P + 2, UNIT),
    ("log-ratio penalty: -f'", 1 - BETA * (sp.log(P) - sp.log(Q)), UNIT),
    (
        "log-ratio penalty: margin",
        BETA * (1 - P) + P - BETA * P * (sp.log(P) - sp.log(Q)),
        UNIT,
    ),
    ("tight at pi = 1", -sp.log(P) + P - 1, UNIT),
    ("double root at 1/2", (P - sp.Rational(1, 2)) ** 2 * sp.exp(P), UNIT),
    ("log cosh''", 1 - sp.tanh(X) ** 2, LINE),
    ("softplus''", sp.exp(X) / (1 + sp.exp(X)) ** 2, LINE),
    ("cosh - 1", sp.cosh(X) - 1, LINE),
]


@pytest.mark.parametrize("name,expr,chart", TRUE_CONDITIONS, ids=lambda v: str(v))
def test_prove_nonnegative_certificate_rechecks(name, expr, chart):
    var = P if chart is UNIT else X
    res = prove_nonnegative(expr, var, chart)
    assert res.status == "proved", res.detail
    ok, reason = verify_certificate(res.certificate)
    assert ok, reason


@pytest.mark.parametrize(
    "expr,chart",
    [
        (2 * sp.log(P), UNIT),  # the wrong sign of f' for (log pi)^2
        (-2 * P * sp.log(P) - 3 * P + 2, UNIT),  # margin with a wrong coefficient
        ((P - sp.Rational(1, 3)) ** 2 - sp.Rational(1, 10**6), UNIT),  # a thin dip
        (sp.tanh(X) ** 2 - sp.Rational(1, 100), LINE),
    ],
    ids=str,
)
def test_prove_nonnegative_refutes_with_rechecked_point(expr, chart):
    var = P if chart is UNIT else X
    res = prove_nonnegative(expr, var, chart)
    assert res.status == "refuted"
    at = sp.Rational(res.counterexample.numerator, res.counterexample.denominator)
    assert sp.N(expr.xreplace({var: at}), 50) < 0
    assert float(sp.lambdify(var, expr)(float(at))) < 0


def test_prove_nonnegative_uses_anchored_derivative_at_a_tight_end():
    res = prove_nonnegative(-sp.log(P) + P - 1, P, UNIT)
    assert res.status == "proved"
    assert any(c.order > 0 for c in res.certificate.cells)


def test_verify_certificate_catches_a_missing_cell():
    res = prove_nonnegative(sp.exp(P) - 2 * P, P, UNIT)
    cert = res.certificate
    assert len(cert.cells) > 1
    holed = dataclasses.replace(cert, cells=cert.cells[:1] + cert.cells[2:])
    assert not verify_certificate(holed)[0]


def test_verify_certificate_catches_a_different_expression():
    # Mutation: the same cells do not prove a condition that is false.
    res = prove_nonnegative(-sp.log(P) + P - 1, P, UNIT)
    wrong = dataclasses.replace(res.certificate, expr=sp.log(P) - P + 1)
    assert not verify_certificate(wrong)[0]


def test_verify_certificate_catches_a_forged_enclosure_cell():
    res = prove_nonnegative(P, P, UNIT)
    (cell,) = res.certificate.cells
    forged = dataclasses.replace(
        res.certificate,
        expr=P - sp.Rational(1, 2),
        cells=(dataclasses.replace(cell, bound=Fraction(0)),),
    )
    assert not verify_certificate(forged)[0]


def test_prove_nonnegative_unknown_when_budget_runs_out():
    res = prove_nonnegative(sp.exp(P) - 2 * P, P, UNIT, max_cells=2)
    assert res.status == "unknown"


def test_prove_nonnegative_refutes_past_an_undecided_switch():
    # The cell straddling the switch at e^-20/2 stays undecided (the right branch's
    # formula is negative just left of it); the search goes on and refutes at 1/3+.
    c = sp.exp(-20) / 2
    pw = sp.Piecewise((0, P <= c), ((P - c) * (sp.Rational(1, 3) - P), True))
    res = prove_nonnegative(pw, P, UNIT)
    assert res.status == "refuted" and res.counterexample > sp.Rational(1, 3)


def test_prove_nonnegative_no_derivative_argument_across_a_jump():
    # h' = 1 on both sides of a downward jump: an anchored argument across the switch
    # would "prove" h >= 0; the prover must refute instead.
    jump = sp.Piecewise((P, P < sp.Rational(1, 2)), (P - 10, True))
    res = prove_nonnegative(jump, P, UNIT)
    assert res.status == "refuted" and res.counterexample >= sp.Rational(1, 2)


def test_verify_certificate_rejects_an_anchor_across_a_jump():
    jump = sp.Piecewise((P, P < sp.Rational(1, 2)), (P - 10, True))
    forged = Certificate(
        jump, P, "unit", (CellProof(Fraction(0), Fraction(1), 1, "lo", Fraction(1)),)
    )
    assert not verify_certificate(forged)[0]
