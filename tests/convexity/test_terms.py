"""Term families: regression coordinates decided on the whole line (with certificates
that re-check), cross-entropy scales, and refusals."""

import pytest
import sympy as sp

from theorycheck.convexity._terms import decide_terms
from theorycheck.formal import verify_certificate

Z = sp.symbols("z0:3", real=True)


@pytest.mark.parametrize(
    "expr",
    [
        sp.log(sp.cosh(Z[0] - sp.Rational(1, 2))) + sp.log(sp.cosh(Z[1])),
        sp.log(1 + sp.exp(Z[0])) + sp.log(1 + sp.exp(-Z[2])),  # softplus
        sp.exp(Z[1]) + Z[0] ** 4 + sp.cosh(2 * Z[2]),
        # a concave bump outweighed by a square in the same coordinate
        Z[0] ** 2 - sp.log(sp.cosh(Z[0])) / 2,
    ],
    ids=str,
)
def test_decide_terms_regression_convex_with_certificates(expr):
    v = decide_terms(expr, Z)
    assert v is not None and v.families == {"regression"} and v.convex
    for cert in v.certificates:
        assert verify_certificate(cert)[0]


@pytest.mark.parametrize(
    "expr",
    [
        sp.log(1 + Z[0] ** 2),  # Cauchy: g'' < 0 for |z| > 1
        Z[0] ** 2 - 3 * sp.log(sp.cosh(Z[0])),  # the bump wins near 0
        -sp.log(1 + sp.exp(Z[1])),
    ],
    ids=str,
)
def test_decide_terms_regression_nonconvex_not_claimed(expr):
    v = decide_terms(expr, Z)
    assert v is not None and not v.convex and "refuted" in v.detail


def test_decide_terms_cross_entropy_scale_sign():
    lse = sp.log(sum(sp.exp(z) for z in Z))
    assert decide_terms(-Z[0] + lse, Z).convex
    assert not decide_terms(Z[0] - lse, Z).convex


def test_decide_terms_refuses_an_unrecognised_term():
    assert decide_terms(sp.log(1 + sp.exp(Z[0] - Z[1])), Z) is None
