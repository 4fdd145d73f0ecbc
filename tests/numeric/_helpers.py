"""Shared drawing helpers for the numeric tests (float64, explicit dtypes)."""

import numpy as np
from hypothesis import strategies as st

from theorycheck.testing import logits, simplex

VOCABS = (2, 3, 5, 8)
FEW = (3, 8)


@st.composite
def positions(draw, *, min_v: int = 2, max_abs: float = 8.0, vocabs=VOCABS):
    """(behavior_logp, logits, sampled) for one position, strictly positive behavior.

    V is drawn from a few sizes only: each new shape recompiles the jitted functions
    (tests that compile many variants per shape pass ``vocabs=FEW``).
    """
    v = draw(st.sampled_from([s for s in vocabs if s >= min_v]))
    z = draw(logits(v, max_abs=max_abs))
    mu = draw(simplex(v, min_prob=1e-3))
    k = draw(st.integers(0, v - 1))
    return np.log(mu), z, np.int64(k)


def kl_np(mu, pi):
    """Forward KL in numpy, 0 log 0 = 0 (independent route)."""
    mu, pi = np.asarray(mu, np.float64), np.asarray(pi, np.float64)
    m = mu > 0
    return float(np.sum(mu[m] * (np.log(mu[m]) - np.log(pi[m]))))


def softmax_np(z):
    e = np.exp(z - np.max(z))
    return e / e.sum()


def log0(p):
    """log with log 0 = -inf and no warning (impossible behavior tokens)."""
    p = np.asarray(p, np.float64)
    return np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf)
