"""The JAX twin of clipped_ratio.py:loss: the baseline of
benchmarks/bench_torchfront.py."""

import jax
import jax.numpy as jnp


def loss(logits, sampled, adv=1.0, q=0.5, eps_low=0.2, eps_high=0.2):
    ratio = jnp.exp(jax.nn.log_softmax(logits)[sampled] - jnp.log(q))
    clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -jnp.minimum(ratio * adv, clipped * adv)
