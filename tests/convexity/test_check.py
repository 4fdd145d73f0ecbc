"""check_convexity: registry acceptance, user files, soundness of every verdict."""

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck import BadInput
from theorycheck.convexity import check_convexity, local_check

EX = "examples/losses/"


@functools.cache
def _check(spec, adv=None):
    # num_starts=64: the numeric search is a second route here, not the point; results
    # are cached so each verdict is computed once per session.
    params = {} if adv is None else {"adv": adv}
    return check_convexity(spec, params=params, num_starts=64)


def _curvature(loss, ce, **inputs):
    """Independent float64 re-check of a counterexample: u^T H u by jax.hessian."""
    z = jnp.asarray(ce["logits"], jnp.float64)
    u = jnp.asarray(ce["direction"], jnp.float64)
    h = jax.hessian(lambda x: loss(x, ce["sampled"], **inputs))(z)
    return float(u @ h @ u)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sft", "lco_kld", "lco_mse", "lco_lch"])
def test_check_convexity_lco_and_sft_convex_for_every_vocab(name):
    res = _check(name, None if name == "sft" else -1.0)  # sft takes no adv
    assert res.verdict == "convex", res.methods
    # LCO-KLD's target softmax(z_old + A e_k / beta) has entries that depend on V:
    # one program, but not one formula, so the scope is the V decided.
    every = "V in {3, 4}" if name == "lco_kld" else "all V >= 2"
    assert res.scope == f"{every}, every sampled token"
    assert res.methods[0]["status"] == "proved"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,adv", [("is_pg", 1.0), ("pg", -1.0), ("cispo", -1.0), ("sapo", 1.0)]
)
def test_check_convexity_refutes_with_verified_counterexample(name, adv):
    from theorycheck.losses import LOSSES

    res = _check(name, adv)
    assert res.verdict == "not_convex", res.methods
    ce = res.counterexample
    assert ce["curvature"] < 0
    vocab = len(ce["logits"])
    q = res.params.get("q", 0.5)
    mu = np.full(vocab, (1 - q) / (vocab - 1))
    mu[0] = q
    inputs = {"adv": adv}
    if "behavior_logp" in LOSSES[name].inputs:
        inputs["behavior_logp"] = jnp.log(jnp.asarray(mu))
    assert _curvature(LOSSES[name].loss, ce, **inputs) < 0


@pytest.mark.slow
def test_check_convexity_is_pg_positive_advantage_condition():
    res = _check("is_pg", 1.0)
    assert res.family == "sampled_token"
    # pi_k >= 1/2, plus the region where the +-20 log-ratio guard freezes the ratio.
    assert "pi_k >= 1/2" in res.condition


@pytest.mark.slow
def test_check_convexity_mask_regions_are_exact():
    # DPPO binary-TV with A < 0 (q = 1/2, delta = 0.15): the mask freezes the token
    # for q - pi_k > delta, so H = 0 there and the loss is convex exactly there.
    tv = _check("dppo_binary_tv", -1.0)
    assert tv.verdict == "not_convex" and tv.scope == "all V >= 3, every sampled token"
    assert tv.condition.startswith("pi_k < 7/20 (V >= 3)")
    # Binary-KL: the threshold solves -log(4p(1-p))/2 = delta = 0.05; compare the
    # exact SymPy boundary with a float bisection of the same equation.
    kl = _check("dppo_binary_kl", -1.0)
    assert kl.verdict == "not_convex" and kl.condition.startswith("pi_k < ")
    import sympy as sp

    bound = float(sp.sympify(kl.condition.split("(V >= 3)")[0][len("pi_k < ") :]))
    lo, hi = 1e-9, 0.5
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if -np.log(4 * mid * (1 - mid)) / 2 > 0.05 else (lo, mid)
    assert abs(bound - lo) < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("name", ["glm5", "dppo_capped"])
def test_check_convexity_frozen_mask_convex_with_a_note(name):
    # A >= 0 times a detached nonnegative weight: H = w A S, PSD everywhere with the
    # weight held constant. The weight switches with the logits: the note says so.
    res = _check(name, 1.0)
    assert res.verdict == "convex" and res.scope == "all V >= 2, every sampled token", (
        res.methods
    )
    notes = [m for m in res.methods if m["method"] == "frozen switches"]
    assert notes and "not smooth" in notes[0]["detail"]
    assert not any(m["method"] == "frozen switches" for m in _check("sft").methods)


def test_check_convexity_user_file_condition_from_one_definition():
    res = _check(EX + "is_surrogate.py:loss", 1.0)
    assert res.verdict == "not_convex"
    assert res.condition.startswith("pi_k >= 1/2")


def test_check_convexity_proves_non_structural_user_loss_at_small_vocab():
    res = _check(EX + "pairwise_logistic.py:loss")
    assert res.verdict == "convex" and res.scope == "V = 3, every sampled token"
    assert any(m["method"] == "z3 V=3" and m["status"] == "proved" for m in res.methods)


@pytest.mark.slow
@pytest.mark.parametrize("func", ["loss", "loss_mixed"])
def test_check_convexity_never_calls_boundary_trap_convex(func):
    res = _check(EX + f"boundary_trap.py:{func}")
    assert res.verdict in ("not_convex", "unknown")
    if res.verdict == "not_convex":
        ce = res.counterexample
        pi = np.exp(ce["logits"]) / np.exp(ce["logits"]).sum()
        assert pi[ce["sampled"]] < 1e-5 and ce["curvature"] < 0
        if "curvature_exact" in ce:  # from z3: re-check the exact rational value
            assert Fraction(ce["curvature_exact"]) < 0


def test_check_convexity_unsupported_operation_falls_back_to_numeric():
    res = _check(EX + "top2_likelihood.py:loss")
    assert res.methods[0]["status"] == "skipped" and "sort" in res.methods[0]["detail"]
    assert res.verdict in ("not_convex", "unknown")
    assert res.verdict != "convex"


@pytest.mark.parametrize(
    "spec,match",
    [
        (EX + "bad_losses.py:raises", "raised RuntimeError"),
        (EX + "bad_losses.py:vector", "not a scalar"),
        (EX + "bad_losses.py:not_finite", "not finite"),
        (EX + "bad_losses.py:missing", "has no function 'missing'"),
        (EX + "no_such_file.py:loss", "does not exist"),
        ("no_such_loss", "unknown loss 'no_such_loss'"),
    ],
)
def test_check_convexity_bad_input_names_the_problem(spec, match):
    with pytest.raises(BadInput, match=match):
        check_convexity(spec)


def test_check_convexity_rejects_bad_vocab_and_q():
    with pytest.raises(BadInput, match="V must be >= 2"):
        check_convexity("sft", vocab=(1,))
    with pytest.raises(BadInput, match="q = 1.5"):
        check_convexity("is_pg", params={"q": 1.5})


def test_local_check_matches_closed_form_at_large_vocab():
    # IS surrogate at V = 2000 (Lanczos route) vs the sampled-token closed form.
    from theorycheck.numeric._curvature_sampled import sampled_token_min_eigenvalue

    rng = np.random.default_rng(0)
    z = rng.normal(size=2000)
    z[3] = 4.0
    out = local_check(EX + "is_surrogate.py:loss", z, 3, params={"adv": 1.0, "q": 0.5})
    pi = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    f = -pi[3] / 0.5  # f' = f'' = -A pi_k / q
    exact = sampled_token_min_eigenvalue(f, f, pi, 3)
    assert out["psd"] is False
    np.testing.assert_allclose(out["min_eigenvalue"], exact, rtol=1e-6, atol=1e-10)


def test_local_check_psd_for_cross_entropy():
    out = local_check("sft", np.array([0.0, 1.0, -2.0, 3.0]), 1)
    assert out["psd"] is True and abs(out["min_eigenvalue"]) < 1e-12
