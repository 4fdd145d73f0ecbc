"""A regression loss on the logits written with cosh: sum_i log cosh(z_i - t_i).

The Hessian is diagonal with entries 1 / cosh^2(z_i - t_i) > 0, so the loss is convex
for every V (the checker proves g'' >= 0 on the whole real line with the interval
prover on the compactified line z = atanh(u)). The targets are t_i = i / 2.

``loss_nonconvex`` is a deliberately nonconvex variant (the Cauchy loss
sum_i log(1 + (z_i - t_i)^2), g'' = 2 (1 - x^2) / (1 + x^2)^2 < 0 for |x| > 1).
"""

import jax.numpy as jnp


def loss(logits, sampled):
    targets = 0.5 * jnp.arange(logits.shape[0])
    return jnp.sum(jnp.log(jnp.cosh(logits - targets)))


def loss_nonconvex(logits, sampled):
    targets = 0.5 * jnp.arange(logits.shape[0])
    return jnp.sum(jnp.log1p((logits - targets) ** 2))
