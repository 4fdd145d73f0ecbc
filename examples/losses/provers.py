"""Losses for the composition (DCP) prover, the chord refuter and the primitives the
symbolic translation did not cover (docs/convexity.md, "Composition proofs and chord
refutations").

Each docstring gives the truth, derived by hand; ``tests/convexity/test_provers.py``
checks the verdicts against it. ``lp = log_softmax(z)``; ``-lp[k] = lse(z) - z_k`` is
convex (log-sum-exp is convex, ``z_k`` affine). Kinked losses have a logit Hessian that
is PSD (or zero) on every smooth piece, so a Hessian search cannot refute them: only a
midpoint (chord) violation f((a + b)/2) > (f(a) + f(b))/2 can.
"""

import jax
import jax.numpy as jnp


def _lp(logits):
    return jax.nn.log_softmax(logits)


# --- kinked, convex: proved by composition -------------------------------------------


def max_margin(logits, sampled):
    """max(z) - z_k: a max of affine functions minus an affine one: convex."""
    return jnp.max(logits) - logits[sampled]


def hinge_ce(logits, sampled, margin=1.0):
    """max(0, -log pi_k - margin): convex non-decreasing max(0, .) of the convex
    cross-entropy: convex."""
    return jnp.maximum(0.0, -_lp(logits)[sampled] - margin)


def multiclass_hinge(logits, sampled):
    """Crammer-Singer hinge max(0, 1 + max_{i != k} z_i - z_k): a max of affine
    functions: convex."""
    others = jnp.where(jax.nn.one_hot(sampled, logits.shape[0]) > 0, -jnp.inf, logits)
    return jnp.maximum(0.0, 1.0 + jnp.max(others) - logits[sampled])


def abs_margin(logits, sampled):
    """0.5 |z_k - mean(z)| - log pi_k: |affine| plus cross-entropy: convex."""
    return 0.5 * jnp.abs(logits[sampled] - jnp.mean(logits)) - _lp(logits)[sampled]


def relu_sum(logits, sampled):
    """sum_i relu(z_i - z_k): a sum of max(affine, 0): convex."""
    return jnp.sum(jax.nn.relu(logits - logits[sampled]))


def softplus_margin(logits, sampled):
    """softplus(max(z) - z_k): softplus is convex and non-decreasing, its argument
    convex: convex."""
    return jax.nn.softplus(jnp.max(logits) - logits[sampled])


def squared_hinge(logits, sampled):
    """relu(1 - z_k + mean(z))^2: the square is convex and non-decreasing on the
    non-negative relu of an affine function: convex."""
    return jnp.square(jax.nn.relu(1.0 - logits[sampled] + jnp.mean(logits)))


def weighted_lse(logits, sampled):
    """logsumexp(z, b=w) - z_k with w_i = 1 + i > 0: log sum_i e^{z_i + log w_i} is a
    log-sum-exp of affine functions: convex."""
    w = 1.0 + jnp.arange(logits.shape[0])
    return jax.nn.logsumexp(logits, b=w) - logits[sampled]


def cond_branch(logits, sampled, adv=1.0):
    """lax.cond on the advantage's sign: at adv = 1 the cross-entropy branch: convex
    (at adv = -1 it is log pi_k: not convex)."""
    lp = _lp(logits)
    return jax.lax.cond(adv > 0, lambda: -lp[sampled], lambda: lp[sampled])


def switch_branch(logits, sampled, which=1):
    """lax.switch(which, [-lp_k, -2 lp_k, lp_k]): at which = 1, twice the
    cross-entropy: convex."""
    lp = _lp(logits)
    branches = [lambda: -lp[sampled], lambda: -2.0 * lp[sampled], lambda: lp[sampled]]
    return jax.lax.switch(which, branches)


def fori_ce(logits, sampled):
    """A fori_loop adding -log pi_k three times: 3 x cross-entropy: convex."""
    lp = _lp(logits)
    return jax.lax.fori_loop(0, 3, lambda i, acc: acc - lp[sampled], 0.0)


# --- kinked or jumping, not convex: refuted by a chord --------------------------------


def min_margin(logits, sampled):
    """min(z) - z_k: concave and not affine (along z = (t, 0, ...) at k = 1 it is
    min(t, 0)): not convex; its Hessian is 0 off the kinks."""
    return jnp.min(logits) - logits[sampled]


def neg_abs(logits, sampled):
    """-|z_k - mean(z)|: a concave kink, Hessian 0 elsewhere: not convex."""
    return -jnp.abs(logits[sampled] - jnp.mean(logits))


def capped_ce(logits, sampled):
    """min(-log pi_k, 1): cross-entropy capped at 1; PSD below the cap, 0 above it,
    concave kink at the cap: not convex."""
    return jnp.minimum(-_lp(logits)[sampled], 1.0)


def argmax_nll(logits, sampled):
    """-log pi at the argmax = lse(z) - max(z): along z = (t, 0), V = 2 it is
    softplus(-|t|), peaked at t = 0: not convex (PSD on each smooth piece)."""
    return -_lp(logits)[jnp.argmax(logits)]


def floor_jump(logits, sampled):
    """-log pi_k + floor(z_k - mean(z)): a unit jump at every integer value of the
    margin: not convex."""
    return -_lp(logits)[sampled] + jnp.floor(logits[sampled] - jnp.mean(logits))


def round_jump(logits, sampled):
    """-log pi_k + round(z_k - mean(z)) / 2: jumps of 1/2: not convex."""
    return -_lp(logits)[sampled] + 0.5 * jnp.round(logits[sampled] - jnp.mean(logits))


def rem_sawtooth(logits, sampled):
    """fmod(z_k - mean(z), 1): a sawtooth, Hessian 0 between its jumps: not convex."""
    return jnp.fmod(logits[sampled] - jnp.mean(logits), 1.0)


def int_cast_jump(logits, sampled):
    """-log pi_k + int(z_k - mean(z)) / 2 (truncation toward zero): not convex."""
    margin = logits[sampled] - jnp.mean(logits)
    return -_lp(logits)[sampled] + 0.5 * margin.astype(jnp.int32)


def where_jump(logits, sampled):
    """-log pi_k + [z_k > mean(z)]: an indicator jump: not convex."""
    step = jnp.where(logits[sampled] > jnp.mean(logits), 1.0, 0.0)
    return -_lp(logits)[sampled] + step


def top1_sort(logits, sampled):
    """-sort(z)[-1] + z_k = z_k - max(z): concave, not affine: not convex."""
    return -jnp.sort(logits)[-1] + logits[sampled]


# --- smooth primitives --------------------------------------------------------------


def atan_margin(logits, sampled):
    """arctan(z_k - mean(z)): arctan'' < 0 for positive arguments: not convex."""
    return jnp.arctan(logits[sampled] - jnp.mean(logits))


def atan2_ce(logits, sampled):
    """-log pi_k + 0.1 atan2(z_0, 1) = CE + 0.1 arctan(z_0): along the all-ones
    direction (CE flat) the curvature is 0.1 arctan''(z_0) < 0 for z_0 > 0: not
    convex."""
    return -_lp(logits)[sampled] + 0.1 * jnp.arctan2(logits[0], 1.0)


def fori_log_pi(logits, sampled):
    """A fori_loop adding log pi_k twice: 2 log pi_k, Hessian -2S: not convex."""
    lp = _lp(logits)
    return jax.lax.fori_loop(0, 2, lambda i, acc: acc + lp[sampled], 0.0)


def sort_top1_convex(logits, sampled):
    """sort(z)[-1] - z_k = max(z) - z_k: convex, through sort (the composition rules
    do not read sort: unknown is the sound answer unless a prover decides it)."""
    return jnp.sort(logits)[-1] - logits[sampled]
