r"""Pieces every ratio rule shares: the importance ratio, its guard, and SymPy twins.

The importance ratio of the sampled token k is

.. math::
    r = \frac{\pi_k}{\mu_k} = \exp\big(\operatorname{clip}(\log\pi_k - \log\mu_k,
        -C, C)\big),

where :math:`C` is the log-ratio guard ``log_ratio_clamp`` (verl, SkyRL and Miles clamp
at 20; the survey's experiment does too). Outside :math:`[-C, C]` the clamp is flat, so
any term whose gradient flows *through* r (``r * adv``, PPO's clipped surrogate, SAPO,
DPPO in SkyRL's form) has zero derivative there: the guard saturates. Rules that use r
only as a detached weight (CISPO, GLM-5, verl's capped DPPO) keep their gradient; only
the weight's value is clamped. ``log_ratio_clamp = inf`` turns the guard off.

Each JAX helper has a SymPy twin written independently (``sym_*``), following the
registry's conventions: log-softmax as :math:`z_k - \log\sum_i e^{z_i}`, clamps as
``Min``/``Max``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import sympy as sp
from jax.typing import ArrayLike

#: The survey's (and verl/SkyRL/Miles') log-ratio guard.
LOG_RATIO_CLAMP = 20.0


def log_ratio(
    logits: ArrayLike, sampled: int, behavior_logp: ArrayLike, clamp: float
) -> jax.Array:
    r"""Guarded log importance ratio of the sampled token.

    .. math::
        \ell = \operatorname{clip}(\log\operatorname{softmax}(z)_k - \log\mu_k, -C, C)

    Args:
        logits: ``[V]`` trainer logits z.
        sampled: the sampled token k.
        behavior_logp: ``[V]`` log μ (the ratio anchor).
        clamp: C; ``inf`` disables the guard.

    Returns:
        A scalar: the clamped log ratio.

    References:
        verl ``compute_policy_loss_vanilla`` (clamp ±20); survey "Numerical guard".
    """
    logp = jax.nn.log_softmax(logits)[sampled]
    return jnp.clip(logp - jnp.asarray(behavior_logp)[sampled], -clamp, clamp)


def sampled_logp(logits: ArrayLike, sampled: int) -> jax.Array:
    """``log softmax(logits)[sampled]`` (the term a detached weight multiplies)."""
    return jax.nn.log_softmax(logits)[sampled]


def ratio_terms(p, q, clamp: float):
    r"""Ratio quantities of the analytic coefficients, from probabilities.

    .. math::
        r = p / q, \qquad \text{saturated} = |\log r| > C

    Args:
        p: current probability of the sampled token (array, in (0, 1]).
        q: behavior probability (array, in (0, 1]).
        clamp: the guard C (``inf`` = off).

    Returns:
        ``(ratio, ratio_used, saturated)``: the raw ratio p/q, the guarded ratio the
        rule sees (``exp(±C)`` beyond the guard), and where the guard is active.
    """
    p = jnp.asarray(p)
    q = jnp.asarray(q)
    ratio = p / q
    if math.isinf(clamp):
        return ratio, ratio, jnp.zeros(jnp.shape(ratio), dtype=bool)
    hi, lo = math.exp(clamp), math.exp(-clamp)
    saturated = (ratio > hi) | (ratio < lo)
    return ratio, jnp.clip(ratio, lo, hi), saturated


# --------------------------------------------------------------------------------------
# SymPy twins
# --------------------------------------------------------------------------------------


def sym_log_softmax(z: Sequence[sp.Expr], k: int) -> sp.Expr:
    r""":math:`z_k - \log\sum_i e^{z_i}`."""
    return z[k] - sp.log(sp.Add(*[sp.exp(zi) for zi in z]))


def sym_softmax(z: Sequence[sp.Expr]) -> list[sp.Expr]:
    r""":math:`\pi_i = e^{z_i} / \sum_j e^{z_j}`."""
    total = sp.Add(*[sp.exp(zi) for zi in z])
    return [sp.exp(zi) / total for zi in z]


def sym_number(x) -> sp.Expr:
    """A hyperparameter as an exact SymPy number (floats via their decimal string)."""
    if isinstance(x, sp.Basic):
        return x
    if isinstance(x, float):
        if math.isinf(x):
            return sp.oo if x > 0 else -sp.oo
        return sp.Rational(repr(float(x)))
    return sp.sympify(x)


def sym_log_ratio(
    z: Sequence[sp.Expr], k: int, behavior_logp: Sequence, clamp
) -> sp.Expr:
    r""":math:`\operatorname{clip}(z_k - \log\sum e^{z} - \log\mu_k, -C, C)`."""
    raw = sym_log_softmax(z, k) - sym_number(behavior_logp[k])
    c = sym_number(clamp)
    if c == sp.oo:
        return raw
    return sp.Min(sp.Max(raw, -c), c)


def sym_ratio(z: Sequence[sp.Expr], k: int, behavior_logp: Sequence, clamp) -> sp.Expr:
    """``exp`` of :func:`sym_log_ratio`."""
    return sp.exp(sym_log_ratio(z, k, behavior_logp, clamp))
