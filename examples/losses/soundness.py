"""Losses a checker without the soundness rules would call convex (docs/convexity.md,
"Soundness rules"); each is caught now."""

import jax
import jax.numpy as jnp


def own_default(logits, sampled, adv=-1.0):
    """REINFORCE with the function's own default Â = -1: not convex (V >= 3).

    Checked with the documented Â = 1 instead, it would be cross-entropy (convex).
    """
    return -adv * jax.nn.log_softmax(logits)[sampled]


def vocab_branch(logits, sampled):
    """Cross-entropy for V < 5, its negative from V = 5 on: the structure fits at V = 3
    and 4 agree, but the program is not the same for every V."""
    lp = jax.nn.log_softmax(logits)
    if logits.shape[0] >= 5:
        return lp[sampled]
    return -lp[sampled]


def pg_k3_entropy(logits, sampled, adv=-1.0, beta=1.0, ent=0.01):
    """PG + k3 KL penalty to a fixed reference log(1/3) + entropy bonus.

    With Â = -1, lambda_min = -1/3 + O(ent) at z = 0 (V = 3): a moderate point.
    """
    lp = jax.nn.log_softmax(logits)
    lr = jnp.log(1.0 / 3.0) - lp[sampled]
    entropy = -jnp.sum(jnp.exp(lp) * lp)
    return -adv * lp[sampled] + beta * (jnp.exp(lr) - 1.0 - lr) - ent * entropy
