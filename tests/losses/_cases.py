"""Case generators shared by the registry tests: logits with a chosen π_k and behavior
distributions with a chosen μ_k, so that any (p, q) pair can be realised exactly."""

from __future__ import annotations

import numpy as np

VOCAB = 6


def logits_with_prob(rng, p: float, k: int, vocab: int = VOCAB) -> np.ndarray:
    """Random float64 logits whose softmax puts probability ``p`` on token ``k``."""
    z = rng.normal(0.0, 2.0, size=vocab)
    others = np.delete(z, k)
    m = others.max()
    lse_others = m + np.log(np.sum(np.exp(others - m)))
    z[k] = np.log(p) - np.log1p(-p) + lse_others
    return z.astype(np.float64)


def behavior_with_prob(rng, q: float, k: int, vocab: int = VOCAB) -> np.ndarray:
    """Random float64 log μ with μ_k = ``q`` (the rest Dirichlet-spread over 1 - q)."""
    rest = rng.dirichlet(np.full(vocab - 1, 0.7)) * (1.0 - q)
    rest = np.maximum(rest, 1e-300)
    mu = np.insert(rest, k, q)
    return np.log(mu).astype(np.float64)


def random_pq(rng, n: int):
    """n (p, q, adv) triples: ratios spread over e^[-3, 3], some beyond the guard,
    some zero advantages."""
    p = rng.uniform(0.02, 0.98, size=n)
    log_r = rng.uniform(-3.0, 3.0, size=n)
    q = p / np.exp(log_r)
    bad = q >= 0.999
    q[bad] = rng.uniform(0.02, 0.98, size=int(bad.sum()))
    beyond = rng.random(n) < 0.04  # past the ±20 log-ratio guard
    q[beyond] = p[beyond] * np.exp(-rng.uniform(20.5, 25.0, size=int(beyond.sum())))
    flip = beyond & (rng.random(n) < 0.5)  # and below it: swap the roles of p and q
    p[flip], q[flip] = q[flip], p[flip]
    adv = rng.normal(0.0, 1.5, size=n)
    adv[rng.random(n) < 0.08] = 0.0
    return p.astype(np.float64), q.astype(np.float64), adv.astype(np.float64)
