"""A tiny random causal LM (float64) and a batch, built in code for the probe tests."""

import jax
import jax.numpy as jnp
import jax.random as jr

from theorycheck.models import Family, ModelConfig, forward, init_params

CONFIG = ModelConfig(
    family=Family.LLAMA,
    vocab_size=13,
    hidden_size=8,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=4,
    intermediate_size=16,
)


def apply_fn(params, tokens):
    return forward(params, CONFIG, tokens)


def tiny(seed=0, batch=2, seq=5, scale=0.3):
    """(params, delta, tokens, mask, sampled): float64, a random update direction."""
    k1, k2, k3, k4 = jr.split(jr.key(seed), 4)
    params = init_params(CONFIG, key=k1, dtype=jnp.float64, scale=scale)
    leaves, tdef = jax.tree_util.tree_flatten(params)
    keys = jr.split(k2, len(leaves))
    delta = jax.tree_util.tree_unflatten(
        tdef, [0.05 * jr.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    )
    tokens = jr.randint(k3, (batch, seq), 0, CONFIG.vocab_size)
    mask = jnp.ones((batch, seq), jnp.float64).at[:, 0].set(0.0)
    sampled = jr.randint(k4, (batch, seq), 0, CONFIG.vocab_size)
    return params, delta, tokens, mask, sampled
