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


_MODEL: list = []


def smollm2():
    """The embedded SmolLM2 checkpoint, loaded once per process."""
    if not _MODEL:
        from theorycheck.models import load_model

        _MODEL.append(load_model("smollm2"))
    return _MODEL[0]


#: The text whose next-token distributions are measured (teacher-forced).
MEASURE_TEXT = (
    "The capital of France is Paris. Two plus two equals four. Water boils at one "
    "hundred degrees Celsius at sea level, and the moon orbits the earth once every "
    "twenty-seven days. To solve 3x + 5 = 20, subtract five from both sides and divide "
    "by three, which gives x = 5."
)


def precision_pair(quick: bool):
    """Next-token distributions of SmolLM2 at every position of MEASURE_TEXT:
    the trainer's float32 forward (pi, with its logits z) and the rollout engine's
    bfloat16 forward (mu), both as float64 arrays ``[N, V]``."""
    import jax.numpy as jnp

    from theorycheck.models import cast_params, forward

    cfg, params, tok = smollm2()
    ids = tok.encode(MEASURE_TEXT).ids
    ids = np.asarray([ids[:24] if quick else ids], np.int32)
    z = np.asarray(forward(params, cfg, ids)[0], np.float64)
    zb = forward(cast_params(params, jnp.bfloat16), cfg, ids)[0]
    zb = np.asarray(zb.astype(jnp.float32), np.float64)
    return softmax(zb), z, softmax(z)
