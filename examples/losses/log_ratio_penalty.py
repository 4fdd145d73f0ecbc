"""Policy gradient with a squared log-ratio penalty: -A log pi_k + (beta/2)(log r)^2.

r = pi_k / q with q the behavior probability of the sampled token. In the
sampled-token form f(u) = -A u + (beta/2)(u - log q)^2: f' = -A + beta log(pi_k / q)
and f'' = beta. With A = 1, beta = 0.1, q = 1/2, f' <= 0 (log(pi_k/q) <= log 2 < 10)
and the margin beta (1 - pi_k) + A pi_k - beta pi_k log(pi_k / q) >= 0: convex for
every V. z3 refuses the logarithms; the interval prover decides both conditions.

``loss_nonconvex`` flips the penalty's sign (beta = -0.1), a deliberately nonconvex
variant (the margin is about beta < 0 near pi_k = 0).
"""

import jax
import jax.numpy as jnp


def loss(logits, sampled, adv=1.0, beta=0.1, q=0.5):
    logp = jax.nn.log_softmax(logits)[sampled]
    log_ratio = logp - jnp.log(q)
    return -adv * logp + 0.5 * beta * log_ratio**2


def loss_nonconvex(logits, sampled, adv=1.0, beta=-0.1, q=0.5):
    return loss(logits, sampled, adv=adv, beta=beta, q=q)
