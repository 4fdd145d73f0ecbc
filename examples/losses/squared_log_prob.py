"""The squared log-probability of the sampled token, L = (log pi_k)^2.

In the sampled-token form f(u) = u^2: f' = 2 log pi_k <= 0 and the margin
2 (1 - pi_k) - 2 pi_k log pi_k >= 0 (zero at pi_k = 1), so L is convex for every V.
z3 refuses the logarithms; the interval prover decides both conditions.

``loss_nonconvex`` adds a probability bonus 3 pi_k (f' = 2 log pi_k + 3 pi_k > 0 near
pi_k = 1), a deliberately nonconvex variant.
"""

import jax
import jax.numpy as jnp


def loss(logits, sampled):
    return jax.nn.log_softmax(logits)[sampled] ** 2


def loss_nonconvex(logits, sampled):
    logp = jax.nn.log_softmax(logits)[sampled]
    return logp**2 + 3.0 * jnp.exp(logp)
