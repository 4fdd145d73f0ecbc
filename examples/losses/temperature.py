"""Cross-entropy of the sampled token under a sampling temperature T.

L(z) = -log softmax(z / T)_k. The map z -> z / T is affine and invertible, so L is
convex iff -log softmax(z')_k is, which the sampled-token theorem proves for every V
(f(u) = -u: f' = -1 <= 0, margin = pi_k >= 0).

``loss_nonconvex`` is a deliberately nonconvex variant (minus the tempered
probability, f(u) = -e^u: margin pi_k (2 pi_k - 1) < 0 for pi_k < 1/2).
"""

import jax
import jax.numpy as jnp


def loss(logits, sampled, T=0.7):
    return -jax.nn.log_softmax(logits / T)[sampled]


def loss_nonconvex(logits, sampled, T=0.7):
    return -jnp.exp(jax.nn.log_softmax(logits / T)[sampled])
