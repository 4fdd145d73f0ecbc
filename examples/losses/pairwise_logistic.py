"""One-vs-all logistic loss on logits, written once in JAX (convex; no structural
family).

L(z) = sum_j softplus(z_j - z_k): a sum of softplus of linear functions, hence convex,
but neither a function of pi_k alone, nor a soft-target cross-entropy, nor separable.
"""

import jax
import jax.numpy as jnp


def loss(logits, sampled):
    return jnp.sum(jax.nn.softplus(logits - logits[sampled]))
