"""CISPO's curvature with a negative advantage: the exact infimum quoted in the docs."""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.losses import LOSSES


def _curvature_bound(pk: Fraction) -> Fraction:
    # A = -1, mu uniform over V = 8 (r = 8 pi_k): the frozen weight w = clip(r, 1/2, 5)
    # gives H = -w (diag pi - pi pi^T), whose smallest eigenvalue tends to
    # -w * 2 pi_k (1 - pi_k) when the other mass sits on one token.
    w = min(max(8 * pk, Fraction(1, 2)), Fraction(5))
    return -w * 2 * pk * (1 - pk)


def test_cispo_negative_advantage_infimum_is_minus_75_over_32():
    grid = [Fraction(i, 4096) for i in range(1, 4096)]
    worst = min(grid, key=_curvature_bound)
    assert worst == Fraction(5, 8) and _curvature_bound(worst) == Fraction(-75, 32)
    # second route: the autodiff Hessian of the registry loss at that point
    loss = LOSSES["cispo"].loss
    mu = jnp.log(jnp.full(8, 1 / 8))
    eps = 1e-12
    pi = np.array([5 / 8, 3 / 8 - 6 * eps] + [eps] * 6)
    h = jax.hessian(lambda z: loss(z, 0, adv=-1.0, behavior_logp=mu))(jnp.log(pi))
    assert np.linalg.eigvalsh(np.asarray(h))[0] == pytest.approx(-75 / 32, abs=1e-9)
