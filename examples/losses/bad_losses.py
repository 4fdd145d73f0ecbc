"""Deliberately broken loss functions (the checker must reject them with a clear
error)."""

import jax
import jax.numpy as jnp


def raises(logits, sampled):
    raise RuntimeError("this loss always fails")


def vector(logits, sampled):
    return jax.nn.log_softmax(logits)


def not_finite(logits, sampled):
    return jnp.log(logits[sampled] - 1e6)


not_callable = 3.0
