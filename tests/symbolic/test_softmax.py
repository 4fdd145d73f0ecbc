"""Softmax rates and divergence rates: closed forms vs SymPy differentiation."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given

from theorycheck.symbolic import (
    ddot_binary_kl,
    ddot_kl,
    ddot_tv,
    log_softmax,
    softmax,
    softmax_directional_derivative,
)
from theorycheck.testing import directions, logits

Z = sp.symbols("z0:4", real=True)
T = sp.Symbol("t", real=True)
V = sp.symbols("v0:4", real=True)


def _along(expr_of_z):
    """d/dt expr(z + t v) at t = 0, symbolic in z and v."""
    moved = expr_of_z.xreplace({z: z + T * v for z, v in zip(Z, V)})
    return sp.diff(moved, T).subs(T, 0)


def test_softmax_sums_to_one():
    assert sp.simplify(sp.Add(*softmax(Z)) - 1) == 0


def test_log_softmax_is_log_of_softmax():
    for a, b in zip(log_softmax(Z), softmax(Z)):
        assert sp.simplify(sp.exp(a) - b) == 0


@pytest.mark.parametrize("i", range(4))
def test_softmax_directional_derivative_equals_diff(i):
    pi = softmax(Z)
    closed = softmax_directional_derivative(pi, V)[i]
    assert sp.simplify(closed - _along(pi[i])) == 0


def test_ddot_kl_equals_diff_of_kl():
    mu = sp.symbols("m0:4", positive=True)
    pi = softmax(Z)
    kl = sp.Add(*[m * (sp.log(m) - lp) for m, lp in zip(mu, log_softmax(Z))])
    direct = _along(kl)
    closed = ddot_kl(mu, pi, V)
    # sum(mu) = 1 is needed for the closed form; impose it on the last weight.
    rule = {mu[3]: 1 - mu[0] - mu[1] - mu[2]}
    assert sp.simplify((closed - direct).xreplace(rule)) == 0


@given(logits(4, max_abs=5.0), directions(4))
def test_ddot_tv_matches_finite_difference(z, v):
    mu = np.array([0.1, 0.2, 0.3, 0.4])
    pi = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    if np.min(np.abs(pi - mu)) < 1e-4:  # TV has a kink at pi_i = mu_i
        return
    rate = ddot_tv(
        [sp.Float(m) for m in mu], [sp.Float(p) for p in pi], [sp.Float(x) for x in v]
    )

    def tv(t):
        y = z + t * v
        p = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
        return 0.5 * np.abs(p - mu).sum()

    h = 1e-6
    fd = (tv(h) - tv(-h)) / (2 * h)
    # central differences in float64 with h = 1e-6: O(h^2) + roundoff ~1e-10.
    np.testing.assert_allclose(float(rate), fd, rtol=1e-5, atol=1e-8)


def test_ddot_binary_kl_equals_diff():
    p, q = sp.symbols("p q", positive=True)
    s = sp.Symbol("s", real=True)
    pk = p + s  # pi_k moving at unit rate
    kl = q * sp.log(q / pk) + (1 - q) * sp.log((1 - q) / (1 - pk))
    direct = sp.diff(kl, s).subs(s, 0)
    assert sp.simplify(ddot_binary_kl(q, p, 1) - direct) == 0


def test_ddot_binary_kl_two_bucket_reduction():
    # docs/papers.md Appendix Z check 2: along v = e_k - pi with V = 2, Ddot =
    # 2(1-p)(p-q)
    # when rate = p(1 - 2p + p^2 + (1-p)^2) = 2 p (1-p)^2.
    p, q = sp.symbols("p q", positive=True)
    rate = p * (1 - 2 * p + p**2 + (1 - p) ** 2)
    assert sp.simplify(ddot_binary_kl(q, p, rate) - 2 * (1 - p) * (p - q)) == 0
