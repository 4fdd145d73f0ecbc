"""Cross-entropy minus a slightly-too-large probability bonus: nonconvex only near pi_k
= 0.

L = -log pi_k - a pi_k with a = 1 + 2e-6. In the sampled-token form f(u) = -u - a e^u
the
PSD margin is pi_k (1 - a + 2 a pi_k), negative only for pi_k < (a - 1) / (2a) ~ 1e-6.
"""

import jax
import jax.numpy as jnp


def loss(logits, sampled, a=1.000002):
    logp = jax.nn.log_softmax(logits)[sampled]
    return -logp - a * jnp.exp(logp)


def loss_mixed(logits, sampled, a=1.000002):
    """The same plus a convex pairwise term, so no structural family applies."""
    return loss(logits, sampled, a) + 0.5 * (logits[1] - logits[2]) ** 2
