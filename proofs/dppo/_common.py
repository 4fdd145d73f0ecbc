"""Shared helpers for the DPPO claims (not collected: the name starts with ``_``)."""

from __future__ import annotations

import numpy as np
import sympy as sp

SOURCE = "DPPO (Qi et al., arXiv 2602.04879)"


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def random_pairs(n: int, vocab: int, *, seed: int):
    """n float64 draws of (mu, logits z, k): mu a random perturbation of softmax(z)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, vocab))
    noise = rng.normal(size=(n, vocab)) * rng.uniform(0.05, 2.0, size=(n, 1))
    return softmax(z + noise), z, rng.integers(0, vocab, size=n)


def sym_abs(x: sp.Expr) -> sp.Expr:
    """|x| as a Piecewise (the z3 encoder has no Abs)."""
    return sp.Piecewise((x, x >= 0), (-x, True))


def simplex(symbols) -> list:
    """Open-simplex assumptions p_i > 0, sum p = 1."""
    return [*(s > 0 for s in symbols), sp.Eq(sp.Add(*symbols), 1)]


def kl_terms(m, p):
    """sum m_i (log m_i - log p_i), SymPy."""
    return sum(mi * (sp.log(mi) - sp.log(pi)) for mi, pi in zip(m, p))
