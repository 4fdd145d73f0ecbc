"""GSPO: the sequence loss (gradient through the mean, TRL/Miles) and GSPO-token
(verl/SkyRL sg trick) under seq-mean-token-mean have the same value and gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.losses import LOSSES, gspo_sequence_loss
from theorycheck.testing import assert_close


@pytest.mark.parametrize("seed,adv", [(0, 1.0), (1, -0.5), (2, 2.0)])
def test_gspo_sequence_and_token_forms_agree(seed, adv):
    rng = np.random.default_rng(seed)
    t, v, length = 6, 5, 4
    z = rng.normal(size=(t, v))
    sampled = rng.integers(0, v, size=t)
    # behavior close to the policy so that s sits inside GSPO's narrow window
    mu = jax.nn.log_softmax(z + rng.normal(0, 1e-4, size=(t, v)), axis=-1)
    mask = (np.arange(t) < length).astype(np.float64)
    params = {"eps_low": 0.05, "eps_high": 0.05}

    seq_val, seq_grad = jax.value_and_grad(
        lambda zz: gspo_sequence_loss(
            zz, sampled, adv=adv, behavior_logp=mu, mask=mask, **params
        )
    )(z)
    logp = jax.nn.log_softmax(z, axis=-1)[np.arange(t), sampled]
    logq = np.asarray(mu)[np.arange(t), sampled]
    mean = float(jnp.sum(mask * (logp - logq)) / length)
    token = LOSSES["gspo_token"].loss

    def token_mean(zz):
        per = jnp.stack(
            [
                token(
                    zz[i],
                    sampled[i],
                    adv=adv,
                    behavior_logp=mu[i],
                    seq_log_ratio=mean,
                    **params,
                )
                for i in range(t)
            ]
        )
        return jnp.sum(mask * per) / length

    tok_val, tok_grad = jax.value_and_grad(token_mean)(z)
    assert_close(tok_val, seq_val)
    assert_close(tok_grad, seq_grad)

    # And the registry's one-position 'gspo' is the sequence loss seen from one row.
    i = 1
    other = float(jnp.sum(mask * (logp - logq)) - (logp[i] - logq[i]))
    row = jax.grad(
        lambda zi: LOSSES["gspo"].loss(
            zi,
            sampled[i],
            adv=adv,
            behavior_logp=mu[i],
            other_log_ratio=other,
            length=length,
            **params,
        )
    )(z[i])
    assert_close(row, seq_grad[i])


@pytest.mark.parametrize("seq_log_ratio", [-15.0, -25.0, 9.5, 10.5, 12.0])
def test_gspo_token_clamps_log_s_from_above_only(seq_log_ratio):
    # verl and SkyRL: torch.clamp(log s, max=10); no lower clamp. Two routes: the
    # analytic coefficient and autodiff of the JAX loss (d(-loss)/d log pi_k).
    spec = LOSSES["gspo_token"]
    assert spec.defaults["log_ratio_clamp"] == 10.0
    params = {"eps_low": 1e9, "eps_high": 1e9}  # no clip: isolate the clamp
    z = jnp.array([0.3, -0.2, 0.1])
    p = float(jax.nn.softmax(z)[0])
    mu = jnp.log(jnp.array([0.2, 0.5, 0.3]))
    c, _ = spec.coefficient(p, 0.2, 1.0, seq_log_ratio=seq_log_ratio, **params)
    grad = jax.grad(
        lambda zz: (
            -spec.loss(
                zz, 0, adv=1.0, behavior_logp=mu, seq_log_ratio=seq_log_ratio, **params
            )
        )
    )(z)
    # d/dz_0 of a function of log pi_0 is f'(log pi_0) (1 - pi_0)
    auto = float(grad[0]) / (1.0 - p)
    expected = 0.0 if seq_log_ratio > 10.0 else float(np.exp(seq_log_ratio))
    assert float(c) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert auto == pytest.approx(expected, rel=1e-9, abs=1e-300)
