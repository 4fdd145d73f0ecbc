"""Gradient-norm bounds: power-iteration σ_max vs a dense SVD (two routes), the
chain-rule and loss-based bounds, Prop. 4.4's inner products, linearized descent."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from tests.probes._tinylm import apply_fn, tiny
from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES
from theorycheck.probes import (
    contraction_rate,
    directionality_fn,
    gradient_terms_fn,
    kappa,
    linearized_descent,
    sigma_max,
    spikes,
)


def _dense_jacobian(params, tokens, mask):
    flat, unravel = ravel_pytree(params)

    def f(x):
        z = apply_fn(unravel(x), tokens)
        return (z * mask[..., None]).reshape(-1)

    return np.asarray(jax.jacfwd(f)(flat))


def _loss_fn(name):
    spec = LOSSES[name]

    def loss(z, inputs):
        mask, sampled, adv, other = inputs
        kw = {"old_logits": other} if "old_logits" in spec.inputs else {}
        if "behavior_logp" in spec.inputs:
            kw = {"behavior_logp": other}
        tok = jax.vmap(
            jax.vmap(
                lambda zz, k, a, o: spec.loss(zz, k, adv=a, **{key: o for key in kw})
            )
        )(z, sampled, adv, other)
        return jnp.sum(mask * tok) / jnp.sum(mask), tok

    return loss


def _inputs(params, tokens, mask, sampled, name):
    z = apply_fn(params, tokens)
    adv = jnp.where(jnp.arange(z.shape[1])[None, :] % 2 == 0, 1.0, -1.0) * jnp.ones(
        z.shape[:2]
    )
    other = jax.nn.log_softmax(z + 0.3) if name == "ppo" else z
    return (mask, sampled, adv, other)


@pytest.fixture(scope="module")
def dense():
    """The tiny model at seed 4 and the top singular value of its dense Jacobian."""
    params, delta, tokens, mask, sampled = tiny(seed=4)
    jac = _dense_jacobian(params, tokens, mask)
    return params, tokens, mask, sampled, np.linalg.svd(jac, compute_uv=False)[0]


def test_sigma_max_matches_a_dense_svd(dense):
    params, tokens, mask, _, true = dense
    est = sigma_max(apply_fn, params, tokens, mask, iters=300, key=jax.random.key(1))
    assert est.value <= true * (1 + 1e-10)  # a lower bound at every iteration
    assert np.all(est.history <= true * (1 + 1e-10))
    assert est.value == pytest.approx(true, rel=1e-6)
    # a warm start continues from the converged vector
    again = sigma_max(apply_fn, params, tokens, mask, iters=2, init=est.vector)
    assert again.value == pytest.approx(true, rel=1e-6)


@pytest.mark.parametrize("name", ["lco_mse", "ppo"])
def test_gradient_terms_respect_the_chain_rule_bound(name, dense):
    params, tokens, mask, sampled, true = dense
    inputs = _inputs(params, tokens, mask, sampled, name)
    terms = gradient_terms_fn(apply_fn, _loss_fn(name))(params, tokens, inputs)
    # two routes to ∇_θL: vjp through the logits vs jax.grad of the composition
    direct = jax.grad(lambda p: _loss_fn(name)(apply_fn(p, tokens), inputs)[0])(params)
    np.testing.assert_allclose(
        ravel_pytree(terms["grad"])[0], ravel_pytree(direct)[0], rtol=1e-10, atol=1e-14
    )
    assert terms["grad_norm"] <= true * terms["logit_grad_norm"] * (1 + 1e-10)
    assert terms["grad_norm"] > 0


@pytest.mark.parametrize(
    "name",
    [
        "sft",
        "lco_mse",
        "lco_lch",
        "lco_kld",
        "lco_mse_code",
        "lco_lch_code",
        "lco_kld_code",
    ],
)
def test_kappa_bounds_the_logit_gradient_by_the_loss(name):
    spec = LOSSES[name]
    rng = np.random.default_rng(5)
    v = 7
    for _ in range(20):
        z = jnp.asarray(3 * rng.normal(size=v))
        old = jnp.asarray(3 * rng.normal(size=v))
        adv = float(rng.choice([-2.0, -0.5, 0.7, 3.0]))
        kw = {} if name == "sft" else {"adv": adv, "old_logits": old}
        loss, g = jax.value_and_grad(lambda zz, kw=kw: spec.loss(zz, 2, **kw))(z)
        assert (
            float(jnp.sum(g * g)) <= kappa(name, v) * float(loss) * (1 + 1e-9) + 1e-15
        )
        if name == "lco_mse":  # equality for the squared distance
            assert float(jnp.sum(g * g)) == pytest.approx(kappa(name, v) * float(loss))
    with pytest.raises(BadInput, match="ppo"):
        kappa("ppo", v)


def test_directionality_routes_agree_and_convexity_holds_in_logit_space():
    params, delta, tokens, mask, sampled = tiny(seed=6)
    star = optax.tree.add_scale(params, 3.0, delta)
    inputs = _inputs(params, tokens, mask, sampled, "lco_mse")
    out = directionality_fn(apply_fn, _loss_fn("lco_mse"))(params, star, tokens, inputs)
    assert out["param_inner"] == pytest.approx(float(out["jvp_inner"]), rel=1e-10)
    # convexity in z: <∇ℓ, z − z*> ≥ ℓ(z) − ℓ(z*)
    assert out["logit_inner"] >= out["loss"] - out["loss_star"] - 1e-14
    # the Assumption 4.2 error is not zero on a transformer
    assert abs(out["param_inner"] - out["logit_inner"]) > 1e-8


def test_linearized_descent_is_real_descent_for_a_linear_model():
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.normal(size=(6, 4)))
    target = jnp.asarray(rng.normal(size=(6, 3)))
    params = {"w": jnp.zeros((4, 3))}
    f = lambda p, xx: xx @ p["w"]
    loss = lambda z, t: (0.5 * jnp.mean((z - t) ** 2), z)
    eta = 0.5
    lin = linearized_descent(f, loss, params, x, target, eta=eta, steps=5)
    p, real = params, []
    for _ in range(6):
        real.append(float(loss(f(p, x), target)[0]))
        g = jax.grad(lambda q: loss(f(q, x), target)[0])(p)
        p = optax.tree.add_scale(p, -eta, g)
    np.testing.assert_allclose(lin, real, rtol=1e-12)
    assert 0 < contraction_rate(lin) < 1


def test_spikes_and_rate_helpers():
    assert spikes([1.0, 1.0, 10.0, 1.0]) == [2]
    assert spikes([1.0, 1.0, 1.0]) == []
    assert np.isnan(contraction_rate([1.0, 0.0]))
