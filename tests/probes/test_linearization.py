"""NTK-linearization residuals: exact for a linear model, O(α) for a real one, JVP vs
finite differences, thresholds."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.probes._tinylm import apply_fn, tiny
from theorycheck._errors import BadInput
from theorycheck.probes import (
    TokenInputs,
    crossing_alpha,
    linearization_curve,
    summarize,
)


def _linear_apply(params, x):
    return x @ params["w"] + params["b"][None, :]


def test_linearization_curve_is_exact_for_a_linear_model():
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(3, 5))), "b": jnp.zeros(5)}
    delta = {"w": jnp.asarray(rng.normal(size=(3, 5))), "b": jnp.ones(5)}
    x = jnp.asarray(rng.normal(size=(4, 3)))
    toks = TokenInputs(mask=jnp.ones(4), sampled=jnp.array([0, 1, 2, 3]))
    curve = linearization_curve(
        _linear_apply, params, delta, x, toks, alphas=[0.01, 1.0, 100.0]
    )
    assert np.nanmax(curve.residual) < 1e-12
    s = summarize(curve)
    assert crossing_alpha(s["alphas"], s["residual_median"], 0.1)["kind"] == (
        "not_reached"
    )


def test_linearization_residual_grows_linearly_in_alpha_on_a_transformer():
    params, delta, tokens, mask, sampled = tiny()
    toks = TokenInputs(mask=mask, sampled=sampled)
    curve = linearization_curve(
        apply_fn, params, delta, tokens, toks, alphas=[1e-3, 1e-2]
    )
    med = summarize(curve)["residual_median"]
    # the residual is (α²/2) second-order term over an α first-order change: ratio 10
    assert med[0] > 0
    assert med[1] / med[0] == pytest.approx(10.0, rel=0.05)


def test_linearization_jvp_matches_finite_differences():
    params, delta, tokens, mask, sampled = tiny(seed=1)
    toks = TokenInputs(mask=mask, sampled=sampled)
    h = 1e-5
    zp = apply_fn(optax.tree.add_scale(params, h, delta), tokens)
    zm = apply_fn(optax.tree.add_scale(params, -h, delta), tokens)
    fd = (zp - zm) / (2 * h)
    curve = linearization_curve(apply_fn, params, delta, tokens, toks, alphas=[h])
    z0 = apply_fn(params, tokens)
    jd = jax.jvp(lambda p: apply_fn(p, tokens), (params,), (delta,))[1]
    np.testing.assert_allclose(jd, fd, rtol=1e-6, atol=1e-9)
    # the recorded realized change is z(θ+hΔ) − z(θ), consistent with the residual
    dz = (zp - z0).reshape(-1, z0.shape[-1])
    np.testing.assert_allclose(curve.dz_norm[0], np.linalg.norm(dz, axis=-1))


def test_linearization_predictions_converge_to_realized_changes():
    params, delta, tokens, mask, sampled = tiny(seed=2)
    blogp = jax.nn.log_softmax(
        apply_fn(optax.tree.add_scale(params, 0.5, delta), tokens), axis=-1
    )
    toks = TokenInputs(mask=mask, sampled=sampled, behavior_logp=blogp)

    def loss_fn(z):
        return -jnp.sum(
            mask
            * jnp.take_along_axis(jax.nn.log_softmax(z), sampled[..., None], axis=-1)[
                ..., 0
            ]
        )

    curve = linearization_curve(
        apply_fn, params, delta, tokens, toks, alphas=[1e-4, 1.0], loss_fn=loss_fn
    )
    s = summarize(curve)
    assert s["logp_relerr_median"][0] < 1e-3
    assert s["div_relerr_median"][0] < 1e-3
    assert s["loss_relerr"][0] < 1e-3
    # at α = 1 the first-order prediction is visibly off (the check can fail)
    assert s["logp_relerr_median"][1] > s["logp_relerr_median"][0]
    # masked positions do not count
    assert s["tokens"] == int(mask.sum())


def test_crossing_alpha_cases():
    a = [0.1, 1.0, 10.0]
    assert crossing_alpha(a, [0.2, 0.3, 0.4], 0.1) == {
        "alpha": 0.1,
        "kind": "below_grid",
    }
    got = crossing_alpha(a, [0.01, 0.1, 1.0], 0.5)
    assert got["kind"] == "interpolated"
    assert got["alpha"] == pytest.approx(10**0.69897, rel=1e-4)
    with pytest.raises(BadInput):
        crossing_alpha([1.0, 0.1], [0.1, 0.2], 0.5)


def test_linearization_curve_rejects_bad_alphas():
    params, delta, tokens, mask, sampled = tiny()
    with pytest.raises(BadInput, match="alphas"):
        linearization_curve(
            apply_fn, params, delta, tokens, TokenInputs(mask, sampled), alphas=[0.0]
        )
