"""``predict`` at and near μ = π: D is never negative, a Ḋ within rounding is 0 (no
direction), and a tiny but real Ḋ survives (the tolerance both ways)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from tests.commands._contract import check_contract
from theorycheck.commands.predict import ddot_tolerance


def _predict(mu, pi, k, divergence="kl", adv="1"):
    argv = [
        *("predict", "--behavior", ",".join(map(repr, mu))),
        *("--policy", ",".join(map(repr, pi)), "--sampled", str(k), "--adv", adv),
        *("--divergence", divergence, "--json"),
    ]
    return json.loads(check_contract(argv, expect=0).out)


def _vectors(n=12, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        v = [float(x) for x in rng.dirichlet(np.ones(int(rng.integers(2, 9))))]
        if abs(sum(v) - 1) <= 1e-6:
            out.append(v)
    return out


@pytest.mark.parametrize("divergence", ["kl", "tv"])
def test_mu_equal_pi_has_no_divergence_and_no_direction(divergence):
    """Before the fix: D_KL down to -3.4e-16, Ḋ_KL up to 2.7e-16 with a direction, and
    Ḋ_TV up to 0.145 (the signs of rounding noise) on such vectors."""
    for i, p in enumerate(_vectors()):
        out = _predict(p, p, i % len(p), divergence)
        assert out["divergence"] >= 0.0 and out["divergence"] < 1e-15
        assert (out["ddot"], out["local"], out["global"]) == (0.0, 0.0, 0.0)
        assert out["predicted_direction"] == 0 and out["predictive_mask"] == 1


def test_the_issue_example():
    out = _predict([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], 0)
    assert out["divergence"] == 0.0 and out["ddot"] == 0.0
    assert out["predicted_direction"] == 0


@pytest.mark.parametrize("d", [1e-9, 1e-11, 3e-13])
def test_a_tiny_real_ddot_is_kept_with_its_sign(d):
    """μ = π + d(e_0 - e_1), k = 2: exactly Ḋ = Σ π_i (μ_i - π_i) = d (π_0 - π_1)
    (the local term is 0); at d = 3e-13 that is 3e-14, still above the tolerance."""
    pi = [0.6, 0.3, 0.1]
    mu = [0.6 + d, 0.3 - d, 0.1]
    exact = sum(
        Fraction(p) * (Fraction(m) - Fraction(p)) for p, m in zip(pi, mu, strict=True)
    )
    out = _predict(mu, pi, 2)
    tol = out["ddot_tolerance"]
    assert tol == ddot_tolerance(mu, pi, 2, "kl") and abs(float(exact)) > tol
    assert out["ddot"] != 0.0 and np.sign(out["ddot"]) == np.sign(float(exact))
    assert abs(out["ddot"] - float(exact)) <= tol
    assert out["predicted_direction"] == 1


def test_tv_near_tie_keeps_a_real_sign():
    """A real difference of 1e-9 is no tie: TV's Ḋ keeps its exact value."""
    pi = [0.6, 0.3, 0.1]
    d = 1e-9
    mu = [0.6 - d, 0.3 + d, 0.1]
    out = _predict(mu, pi, 0, "tv")
    # s = (+1, -1, 0): s_bar = 0.3, Ḋ = ½π_0(1 - s̄) - ½Σπ_i²(s_i - s̄)
    s, sbar = np.array([1.0, -1.0, 0.0]), 0.3
    p = np.array(pi)
    exact = 0.5 * p[0] * (1 - sbar) - 0.5 * np.sum(p * p * (s - sbar))
    assert out["ddot"] == pytest.approx(exact, rel=1e-12)


def test_the_tolerance_stays_a_few_hundred_epsilons():
    """The bound is tight enough to keep Ḋ down to ~1e-14 for short vectors."""
    eps = np.finfo(np.float64).eps
    for v in ([0.98, 0.01, 0.01], [1 / 3] * 3, [1 / 64] * 64, [0.5, 0.5]):
        for kind in ("kl", "tv"):
            assert eps < ddot_tolerance(v, v, 1, kind) < 1e-14, (v, kind)
