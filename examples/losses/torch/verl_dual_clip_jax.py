"""The JAX twin of verl_dual_clip.py (the same dual-clip loss of one token, as a JAX
function of the logits): the baseline of benchmarks/bench_torchfront.py."""

import jax
import jax.numpy as jnp


def loss(logits, sampled, adv=1.0, q=0.5, eps_low=0.2, eps_high=0.2, c=3.0):
    log_ratio = jnp.clip(jax.nn.log_softmax(logits)[sampled] - jnp.log(q), -20.0, 20.0)
    ratio = jnp.exp(log_ratio)
    objective = jnp.minimum(
        ratio * adv, jnp.clip(ratio, 1 - eps_low, 1 + eps_high) * adv
    )
    objective = jnp.where(adv < 0, jnp.maximum(objective, c * adv), objective)
    return -objective
