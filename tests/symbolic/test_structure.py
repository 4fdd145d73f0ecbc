"""Structure theorems: the sampled-token Hessian form, its PSD condition, the fits."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.symbolic import (
    fit_cross_entropy,
    fit_regression,
    fit_sampled_token,
    is_zero,
    logit_gradient,
    logit_hessian,
    sampled_token_condition,
    sampled_token_hessian,
    sampled_token_identity,
    to_probability,
    total_variance_gap,
)
from theorycheck.symbolic import log_softmax as sym_log_softmax
from theorycheck.testing import simplex


@pytest.mark.parametrize("vocab,sampled", [(2, 0), (3, 0), (3, 2), (4, 1), (5, 0)])
def test_sampled_token_identity_holds_for_every_f(vocab, sampled):
    gap = sampled_token_identity(vocab, sampled)
    assert all(is_zero(e) for e in gap)


@pytest.mark.parametrize("vocab", [3, 4, 5, 6])
def test_total_variance_gap_is_zero(vocab):
    assert total_variance_gap(vocab) == 0


def test_total_variance_gap_detects_a_wrong_identity():
    # Meta-test: the gap is not zero for a wrong decomposition (drop sigma^2's weight).
    w = sp.symbols("w0:3", real=True)
    p1, p2 = sp.symbols("p1 p2", positive=True)
    pk = 1 - p1 - p2
    pi = [pk, p1, p2]
    mean = sum(a * b for a, b in zip(pi, w))
    var = sum(a * (b - mean) ** 2 for a, b in zip(pi, w))
    a = w[0] - mean
    assert sp.cancel(var - pk / (1 - pk) * a**2) != 0


def _psd(h):
    return np.linalg.eigvalsh(h)[0]


@settings(max_examples=100)  # each example is one 6x6 eigendecomposition; 100 suffice
@given(simplex(6, min_prob=1e-3), st.floats(-3, 3), st.floats(-3, 3))
def test_sampled_token_condition_matches_eigenvalues(pi, f1, f2):
    # Numeric cross-check of the theorem (V = 6 >= 3): PSD iff the condition holds.
    k = 0
    p = pi[k]
    margin = f2 * (1 - p) - f1 * p
    if abs(f1) < 1e-6 or abs(margin) < 1e-6:  # too close to the boundary to decide
        return
    v = -pi.copy()
    v[k] += 1
    h = f2 * np.outer(v, v) - f1 * (np.diag(pi) - np.outer(pi, pi))
    lam = _psd(h)
    scale = abs(f1) + abs(f2)
    holds = f1 <= 0 and margin >= 0
    if holds:
        assert lam >= -1e-12 * scale
    else:
        assert lam < 0


@settings(max_examples=100)  # 2x2 eigendecompositions
@given(st.floats(0.01, 0.99), st.floats(-3, 3), st.floats(-3, 3))
def test_sampled_token_condition_v2_matches_eigenvalues(p, f1, f2):
    pi = np.array([p, 1 - p])
    margin = f2 * (1 - p) - f1 * p
    if abs(margin) < 1e-6:
        return
    v = np.array([1 - p, -(1 - p)])
    h = f2 * np.outer(v, v) - f1 * (np.diag(pi) - np.outer(pi, pi))
    assert (_psd(h) >= -1e-12 * (abs(f1) + abs(f2))) == (margin >= 0)


def test_sampled_token_condition_is_surrogate_threshold():
    p = sp.Symbol("p", positive=True)
    adv_over_q = sp.Integer(3)
    fp = -adv_over_q * p  # f(u) = -(A/q) e^u
    cond = sampled_token_condition(fp, fp, p, 3)
    assert cond.subs(p, sp.Rational(1, 2) + sp.Rational(1, 100)) == sp.true
    assert cond.subs(p, sp.Rational(1, 2) - sp.Rational(1, 100)) == sp.false


def _forms(loss, vocab=4):
    z = sp.symbols(f"z0:{vocab}", real=True)
    g = to_probability(sp.Matrix(logit_gradient(loss(z), z)), z)
    h = to_probability(logit_hessian(loss(z), z), z)
    return z, g, h


def test_fit_sampled_token_recovers_f_derivatives():
    _, g, h = _forms(lambda z: -sp.Integer(2) * sp.exp(sym_log_softmax(z)[1]))
    fit = fit_sampled_token(list(g.expr), h.expr, h.variables, 1)
    p1 = h.variables[1]
    assert is_zero(fit.fprime + 2 * p1) and is_zero(fit.fsecond + 2 * p1)


def test_fit_sampled_token_rejects_other_losses():
    _, g, h = _forms(lambda z: -sym_log_softmax(z)[0] - sym_log_softmax(z)[1])
    assert fit_sampled_token(list(g.expr), h.expr, h.variables, 0) is None


def test_fit_cross_entropy_soft_target_scale():
    weights = [sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 6), 0]
    _, _, h = _forms(
        lambda z: -sum(w * lp for w, lp in zip(weights, sym_log_softmax(z)))
    )
    assert fit_cross_entropy(h.expr, h.variables).scale == 1


def test_fit_regression_accepts_separable_and_rejects_coupled():
    z = sp.symbols("z0:3", real=True)
    sep = logit_hessian((z[0] - 1) ** 2 + sp.log(sp.cosh(z[2])), z)
    assert fit_regression(sep, z) is not None
    coupled = logit_hessian((z[0] - z[1]) ** 2, z)
    assert fit_regression(coupled, z) is None


def test_sampled_token_hessian_cross_entropy_is_psd():
    pi = [sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 6)]
    h = sampled_token_hessian(-1, 0, pi, 0)
    assert all(ev >= 0 for ev in h.eigenvals())
