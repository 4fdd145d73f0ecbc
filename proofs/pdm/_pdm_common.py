"""Shared helpers for the predictive-divergence-mask claims (not collected: the name
starts with ``_``)."""

from __future__ import annotations

import numpy as np
import sympy as sp

SOURCE = "seed 002 (Predictive Divergence Masks, arXiv 2607.10848)"


def x64() -> None:
    """Float64 in JAX for the numeric checks."""
    import jax

    jax.config.update("jax_enable_x64", True)


def random_points(n: int, vocab: int, *, seed: int, spread: float = 2.0):
    """n float64 draws of (behavior mu, logits z, sampled k), mu and pi = softmax(z)
    strictly positive; mu is a perturbation of pi of random size."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=spread, size=(n, vocab))
    noise = rng.normal(size=(n, vocab)) * rng.uniform(0.05, 2.0, size=(n, 1))
    mu = softmax(z + noise)
    k = rng.integers(0, vocab, size=n)
    return mu, z, k


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ddot_kl_closed(mu: np.ndarray, pi: np.ndarray, k: np.ndarray):
    """Prop. 1 closed form, numpy: (local, global) with local = pi_k - mu_k,
    global = sum_i pi_i (mu_i - pi_i)."""
    idx = np.arange(len(k))
    local = pi[idx, k] - mu[idx, k]
    glob = np.sum(pi * (mu - pi), axis=-1)
    return local, glob


def sym_abs(x: sp.Expr) -> sp.Expr:
    """|x| as a Piecewise (the z3 encoder has no Abs)."""
    return sp.Piecewise((x, x >= 0), (-x, True))


def simplex(symbols) -> list:
    """Open-simplex assumptions p_i > 0, sum p = 1."""
    return [*(s > 0 for s in symbols), sp.Eq(sp.Add(*symbols), 1)]
