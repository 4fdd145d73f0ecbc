"""The reachable-target helpers on toy logit models with known answers."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

from experiments import _reachable
from theorycheck._errors import BadInput
from theorycheck.probes import (
    Targets,
    TokenInputs,
    directionality_fn,
    linearization_curve,
    objective_fn,
)

B, N, D, V = 2, 3, 4, 5
BETA = 2.0  # lco_mse's default β


def linear_fn(p, x):
    return x @ p["w"] + p["b"][None, None]


def tanh_fn(p, x):
    return 2.0 * jnp.tanh(x @ p["w"]) + p["b"][None, None]


def _setup(apply_fn):
    kx, kw = jr.split(jr.key(3))
    x = jr.normal(kx, (B, N, D), jnp.float64)
    theta0 = {"w": jr.normal(kw, (D, V), jnp.float64), "b": jnp.zeros(V)}
    weight = jnp.full((B, N), 1.0 / (B * N))
    tg = Targets(
        weight=weight,
        sampled=jnp.zeros((B, N), int),
        adv=jnp.zeros((B, N)),
        behavior_logp=jnp.zeros((B, N, V)),
        old_logits=apply_fn(theta0, x),
    )
    d = _reachable.direction(theta0, jr.key(11))
    return x, theta0, tg, d


def _at(apply_fn, s):
    x, theta0, tg, d = _setup(apply_fn)
    star = optax.tree.add_scale(theta0, s, d)
    tgs = _reachable.reachable_targets(apply_fn, star, x, tg, BETA)
    loss_fn = objective_fn("lco_mse")
    res = _reachable.residual_fn(apply_fn, loss_fn)(theta0, star, x, tgs)
    inner = directionality_fn(apply_fn, loss_fn)(theta0, star, x, tgs)
    return {k: float(v) for k, v in {**res, **inner}.items()}, (x, theta0, star, tgs)


def test_direction_has_the_norm_of_each_leaf_and_leaves_zeros_alone():
    _, theta0, _, d = _setup(tanh_fn)
    assert float(jnp.linalg.norm(d["w"])) == pytest.approx(
        float(jnp.linalg.norm(theta0["w"])), rel=1e-12
    )
    assert not np.any(np.asarray(d["b"]))  # a zero leaf is not perturbed
    other = _reachable.direction(theta0, jr.key(12))
    assert not np.allclose(other["w"], d["w"])


def test_registry_loss_is_zero_at_the_target_and_matches_the_direct_sum():
    out, (x, theta0, star, tgs) = _at(tanh_fn, 0.3)
    assert tgs.adv.shape == (B, N, V)  # dense advantage, vmapped per token
    z0, zs = np.asarray(tanh_fn(theta0, x)), np.asarray(tanh_fn(star, x))
    by_hand = np.sum((z0 - zs) ** 2) / (B * N) / (2 * V)  # ½V⁻¹ mean over tokens
    assert out["loss0"] == pytest.approx(by_hand, rel=1e-12)
    assert out["loss0_direct"] == pytest.approx(by_hand, rel=1e-12)
    assert out["loss0"] > 1e-3
    assert abs(out["loss_star"]) <= 1e-28  # float64 rounding of z_old + Â/β
    assert out["loss_star"] == pytest.approx(0.0, abs=1e-28)


def test_linear_model_has_zero_residual_and_ratio_one_at_any_scale():
    for s in (1e-3, 1.0, 30.0):
        out, _ = _at(linear_fn, s)
        assert out["residual"] < 1e-12
        assert out["param_inner"] / out["logit_inner"] == pytest.approx(1, abs=1e-12)


def test_nonlinear_model_ratio_error_is_the_linearization_error():
    devs, resids = [], []
    for s in (1e-4, 1e-2, 1.0, 3.0):
        out, _ = _at(tanh_fn, s)
        ratio = out["param_inner"] / out["logit_inner"]
        assert out["param_inner"] == pytest.approx(out["jvp_inner"], rel=1e-10)
        assert out["logit_inner"] == pytest.approx(2 * out["loss"], rel=1e-10)
        # param_inner − logit_inner = ⟨∇zL, r⟩ (third route), |ratio − 1| ≤ ρ
        assert out["param_inner"] - out["logit_inner"] == pytest.approx(
            out["inner_error"], abs=1e-10 * out["logit_inner"]
        )
        assert abs(ratio - 1) <= out["residual"] * (1 + 1e-9)
        devs.append(abs(ratio - 1))
        resids.append(out["residual"])
    assert devs[0] < 1e-3 and resids[0] < 1e-3  # the linear regime
    assert devs[-1] > 0.05  # far from it the ratio leaves 1 (the check can fail)
    assert resids == sorted(resids)


def test_residual_agrees_with_the_per_token_linearization_curve():
    out, (x, theta0, star, tgs) = _at(tanh_fn, 0.5)
    curve = linearization_curve(
        tanh_fn,
        theta0,
        optax.tree.sub(star, theta0),
        x,
        TokenInputs(mask=jnp.ones(B * N), sampled=jnp.zeros(B * N, int)),
        alphas=[1.0],
    )
    rho_t, dz_t = curve.residual[0], curve.dz_norm[0]  # per token, equal weights
    pooled = np.sqrt(np.sum((rho_t * dz_t) ** 2) / np.sum(dz_t**2))
    assert out["residual"] == pytest.approx(pooled, rel=1e-10)
    assert out["residual"] > 0.1


@pytest.mark.parametrize(
    ("text", "needle"),
    [("1e-3,0", "'0'"), ("-1", "'-1'"), ("x", "'x'"), ("1e-2,1e-3", "increasing")],
)
def test_parse_scales_refuses_bad_grids(text, needle):
    with pytest.raises(BadInput, match=needle):
        _reachable.parse_scales(text)


def test_parse_scales_reads_a_grid_and_an_empty_one():
    assert _reachable.parse_scales("1e-4, 3e-4,1") == [1e-4, 3e-4, 1.0]
    assert _reachable.parse_scales("") == []
