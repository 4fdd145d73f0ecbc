"""Losses built to break what a convexity verdict is extended to (docs/convexity.md,
"Scope rules"): a sampled token other than 0, a vocabulary size other than the traced
ones, a counterexample carried to another V.

Each docstring gives the truth, derived by hand; ``tests/convexity/test_scope.py``
checks the verdicts against it. ``lp = log_softmax(z)``, ``S = diag(pi) - pi pi^T``
(PSD, rank V - 1), ``-lp[k]`` has Hessian ``S`` (convex), ``+lp[k]`` has ``-S``.
"""

import jax
import jax.numpy as jnp


def _lp(logits):
    return jax.nn.log_softmax(logits)


# --- the sampled token ----------------------------------------------------------------


def last_token_flip(logits, sampled):
    """Cross-entropy, except log pi_k at k = V - 1: not convex (H = -S at k = V - 1;
    at V = 3, z = 0 the eigenvalue -1/3)."""
    lp = _lp(logits)
    return jnp.where(sampled == logits.shape[0] - 1, lp[sampled], -lp[sampled])


def python_branch(logits, sampled):
    """A Python branch on the sampled token: log pi_k at k = 1, not convex there."""
    lp = _lp(logits)
    if sampled == 1:
        return lp[sampled]
    return -lp[sampled]


def float_factor(logits, sampled):
    """-(1 - k) log pi_k: convex at k = 0 and 1, H = (k - 1)(-S) at k >= 2: not
    convex (k = 2)."""
    return -(1.0 - sampled) * _lp(logits)[sampled]


def token_threshold(logits, sampled):
    """Cross-entropy for k < 6, log pi_k from k = 6 on: not convex (V >= 7, k >= 6)."""
    lp = _lp(logits)
    return jnp.where(sampled >= 6, lp[sampled], -lp[sampled])


def take_one_hot(logits, sampled):
    """-sum(one_hot(k) * lp) + (-take(lp, k)): 2 S, convex for every k and V."""
    lp = _lp(logits)
    one = jax.nn.one_hot(sampled, logits.shape[0])
    return -jnp.sum(one * lp) - jnp.take(lp, sampled)


def fixed_token(logits, sampled):
    """-log pi_0 whatever k is: convex for every k (H = S); the token is not relabelled
    with k."""
    return -_lp(logits)[0]


# --- the vocabulary size -------------------------------------------------------------


def iota_threshold(logits, sampled):
    """-lp[k] + sum(w * lp), w_i = 2 for i >= 6: H = (1 - sum w) S = -(2(V - 6) - 1) S
    for V >= 7: not convex (V = 7: lambda_min = -1/7 at z = 0); convex for V <= 6."""
    v = logits.shape[0]
    lp = _lp(logits)
    w = jnp.where(jnp.arange(v) >= 6, 2.0, 0.0)
    return -lp[sampled] + jnp.sum(w * lp)


def iota_weighted(logits, sampled):
    """-lp[k] + 0.1 sum_i i lp_i: H = (1 - 0.05 V (V - 1)) S: convex for V <= 5, not
    convex from V = 6 on."""
    v = logits.shape[0]
    lp = _lp(logits)
    return -lp[sampled] + 0.1 * jnp.sum(jnp.arange(v) * lp)


def count_from_five(logits, sampled):
    """-(1 - n) log pi_k with n = #{i >= 5}: n = 0 for V <= 5 (convex), 1 at V = 6
    (zero), n >= 2 from V = 7 on: not convex (V >= 7)."""
    v = logits.shape[0]
    n = jnp.sum(jnp.arange(v) >= 5)
    return -(1.0 - n) * _lp(logits)[sampled]


def mu_threshold(logits, sampled, behavior_logp):
    """-(m - 1/10) log pi_k with m = the largest mu_i off k = (1 - q)/(V - 1): with
    q = 1/2 convex for V <= 6, not convex from V = 7 on (m < 1/10)."""
    v = logits.shape[0]
    mu = jnp.exp(behavior_logp)
    m = jnp.max(jnp.where(jnp.arange(v) == sampled, 0.0, mu))
    return -(m - 0.1) * _lp(logits)[sampled]


def vocab_scale(logits, sampled):
    """(7 - V) logsumexp(z) - z_k... as (7 - V)(-lp[k]): convex for V <= 7, not convex
    from V = 8 on (a literal affine in V)."""
    v = logits.shape[0]
    return -(7.0 - v) * _lp(logits)[sampled]


def mean_squares(logits, sampled):
    """mean(z^2) / 2: H = I / V, convex for every V and k (a positive 1/V factor of
    the whole loss)."""
    return 0.5 * jnp.mean(logits**2)


def carried_witness(logits, sampled):
    """log pi_k for V <= 5 (not convex), -log pi_k from V = 6 on (convex): a
    counterexample at V = 3 must not be carried to V = 8."""
    v = logits.shape[0]
    n = jnp.sum(jnp.arange(v) >= 5)
    sign = jnp.where(n > 0, 1.0, -1.0)
    return -sign * _lp(logits)[sampled]


def shape_branch(logits, sampled):
    """A Python branch on V: -log pi_k for V <= 40 (convex), log pi_k above (H = -S,
    not convex from V = 41). The jaxprs at V = 2 .. 16 are one program; only a trace
    with a symbolic V shows the comparison."""
    lp = _lp(logits)
    if logits.shape[0] > 40:
        return lp[sampled]
    return -lp[sampled]


def len_branch(logits, sampled):
    """-log pi_k + 2 log pi_0 once len(z) > 30 (H = S - 2 S = -S with S the softmax
    Hessian: not convex from V = 31, at every k), cross-entropy below. ``len`` of a
    symbolic V raises without naming the constant 30."""
    lp = _lp(logits)
    if len(logits) > 30:
        return -lp[sampled] + 2.0 * lp[0]
    return -lp[sampled]
