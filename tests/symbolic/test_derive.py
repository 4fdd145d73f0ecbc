"""Logit gradients/Hessians and probability coordinates."""

import sympy as sp

from theorycheck.symbolic import (
    Frozen,
    is_zero,
    log_softmax,
    logit_gradient,
    logit_hessian,
    softmax,
    to_probability,
)

Z = sp.symbols("z0:3", real=True)


def test_logit_gradient_of_cross_entropy_is_pi_minus_onehot():
    g = logit_gradient(-log_softmax(Z)[1], Z)
    pi = softmax(Z)
    for i in range(3):
        assert is_zero(g[i] - (pi[i] - (1 if i == 1 else 0)))


def test_logit_hessian_of_cross_entropy_is_softmax_jacobian():
    h = to_probability(logit_hessian(-log_softmax(Z)[0], Z), Z)
    p = h.variables
    expected = sp.Matrix(3, 3, lambda i, j: (p[i] if i == j else 0) - p[i] * p[j])
    assert h.shift_invariant and not h.transcendental
    assert all(is_zero(e) for e in h.expr - expected)


def test_logit_hessian_is_symmetric():
    loss = sp.exp(Z[0] * Z[1]) + Z[2] ** 3 * Z[0]
    h = logit_hessian(loss, Z)
    assert h == h.T


def test_logit_hessian_freezes_frozen_factor():
    # Frozen(pi_0) * log pi_0: the weight is a constant of the Hessian (stop_gradient).
    lp = log_softmax(Z)[0]
    weighted = logit_hessian(Frozen(sp.exp(lp)) * lp, Z)
    plain = logit_hessian(lp, Z).applyfunc(lambda e: e * sp.exp(lp))
    assert all(is_zero(e) for e in weighted - plain)


def test_to_probability_detects_non_invariant_loss():
    form = to_probability(logit_hessian((Z[0] - 1) ** 2 + Z[1] ** 4, Z), Z)
    assert not form.shift_invariant
    assert form.variables[0].name == "e0"


def test_to_probability_flags_transcendental_entries():
    entropy = -sp.Add(*[p * lp for p, lp in zip(softmax(Z), log_softmax(Z))])
    form = to_probability(logit_hessian(entropy, Z), Z)
    assert form.transcendental
