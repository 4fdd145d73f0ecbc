r"""Distribution rules: SFT and Logits-Convexity Optimisation (LCO) against a target.

The KL-regularised optimum :math:`\max_\pi \langle\pi,\hat A\rangle - \beta
\mathrm{KL}(\pi\|\pi_{old})` is :math:`\pi^* \propto \pi_{old}e^{\hat A/\beta}`, i.e.
the target logits

.. math::
    z^* = z_{old} + \hat A/\beta \quad(\text{up to a constant}),

with a dense advantage :math:`\hat A\in\mathbb R^V` or a sparse one :math:`\hat A\,e_k`
(only the sampled token carries the advantage). Two families of forms are registered:

* paper forms (``lco_mse``, ``lco_lch``, ``lco_kld``): regress the logits onto
  :math:`\operatorname{sg}(z^*)` over the vocabulary, with mean normalisation
  :math:`\frac{1}{2V}\sum_v(z_v-z^*_v)^2`, :math:`\frac1V\sum_v\log\cosh(z_v-z^*_v)`,
  and :math:`\mathrm{KL}(\pi^*\|\pi_z)`. The paper's text is NOT FOUND (research
  notes §2): the target is DERIVED (§2.2) and the normalisations are the seed
  review's, unconfirmed.
* official-code forms (``*_code``; homzer/llama-rlhf ``trainer_lco.py``, §2.3): the
  target is built from the *current detached* logit, :math:`t_v = \operatorname{sg}(z_v)
  + \hat A_v/\beta_{eff}`, summed (no 1/V, no 1/2); for a sparse advantage
  :math:`\beta_{eff} = \beta` if Â > 0 and ``neg_beta_scale``·β otherwise (100β in the
  code). So the code's MSE has the constant logit gradient :math:`-2\hat A/\beta_{eff}`
  and LCH :math:`-\tanh(\hat A/\beta_{eff})`; KLD uses :math:`\pi^* \propto \pi_{old}
  e^{\hat A/\beta_{eff}}`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import sympy as sp
from jax.typing import ArrayLike

from theorycheck.losses._common import sym_log_softmax, sym_number
from theorycheck.symbolic import Frozen

BETA = 2.0
NEG_BETA_SCALE = 100.0
_LOG2 = math.log(2.0)


def sft_loss(logits: ArrayLike, sampled: int) -> jax.Array:
    r"""Supervised fine-tuning (negative log-likelihood) of the sampled token.

    .. math::
        \ell = -\log\pi_k(z)

    Args:
        logits: ``[V]`` logits z.
        sampled: target token k.

    Returns:
        A scalar loss.

    References:
        Cross-entropy; LCO (arXiv 2603.00963) uses it as the convex reference (its
        logit Hessian diag(π) − ππᵀ is PSD; research notes §2.5, DERIVED).
    """
    return -jax.nn.log_softmax(logits)[sampled]


def sft_symbolic(z, sampled):
    """SymPy spec of :func:`sft_loss`."""
    return -sym_log_softmax(z, sampled)


def advantage_vector(adv, sampled: int, vocab: int) -> jax.Array:
    """Dense advantage ``adv`` [V] as is, or a scalar placed on the sampled token."""
    adv = jnp.asarray(adv)
    if adv.ndim == 1:
        return adv
    return jnp.zeros((vocab,), dtype=jnp.result_type(adv, float)).at[sampled].set(adv)


def _beta_eff(adv, beta, neg_beta_scale):
    adv = jnp.asarray(adv)
    if adv.ndim == 1:  # dense advantages: plain β (QRM / DPO-RM trainers)
        return beta
    return jnp.where(adv > 0, beta, neg_beta_scale * beta)


def _paper_target(logits, sampled, adv, old_logits, beta):
    a = advantage_vector(adv, sampled, jnp.shape(logits)[-1])
    return jax.lax.stop_gradient(jnp.asarray(old_logits) + a / beta)


def _logcosh(x):
    return jnp.logaddexp(x, -x) - _LOG2


def lco_mse_loss(
    logits: ArrayLike, sampled: int, *, adv, old_logits: ArrayLike, beta: float = BETA
) -> jax.Array:
    r"""LCO-MSE, paper form: squared distance to the target logits.

    .. math::
        \ell = \frac{1}{2V}\sum_v (z_v - z^*_v)^2, \quad z^* = \operatorname{sg}(z_{old}
        + \hat A/\beta)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k (carries a scalar advantage).
        adv: scalar (sparse, on k) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old.
        beta: β (2.0, the official script's default).

    Returns:
        A scalar loss.

    References:
        LCO (arXiv 2603.00963): paper text NOT FOUND; target DERIVED (research notes
        §2.2), normalisation 1/(2V) unconfirmed.
    """
    d = jnp.asarray(logits) - _paper_target(logits, sampled, adv, old_logits, beta)
    return jnp.sum(d * d) / (2.0 * jnp.shape(logits)[-1])


def lco_lch_loss(
    logits: ArrayLike, sampled: int, *, adv, old_logits: ArrayLike, beta: float = BETA
) -> jax.Array:
    r"""LCO-LCH, paper form: log-cosh distance to the target logits.

    .. math::
        \ell = \frac1V\sum_v \log\cosh(z_v - z^*_v)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: scalar (sparse) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old.
        beta: β.

    Returns:
        A scalar loss.

    References:
        LCO (arXiv 2603.00963): NOT FOUND; DERIVED (research notes §2.2, §2.5).
    """
    d = jnp.asarray(logits) - _paper_target(logits, sampled, adv, old_logits, beta)
    return jnp.sum(_logcosh(d)) / jnp.shape(logits)[-1]


def lco_kld_loss(
    logits: ArrayLike, sampled: int, *, adv, old_logits: ArrayLike, beta: float = BETA
) -> jax.Array:
    r"""LCO-KLD, paper form: forward KL from the optimal policy to the model.

    .. math::
        \ell = \mathrm{KL}(\pi^*\|\pi_z), \quad \pi^* = \operatorname{sg}\big(
        \mathrm{softmax}(z_{old} + \hat A/\beta)\big)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: scalar (sparse) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old.
        beta: β.

    Returns:
        A scalar loss.

    References:
        LCO (arXiv 2603.00963), "LCO-KLD"; target DERIVED (research notes §2.2),
        matching ``create_lco_log_target`` [CODE].
    """
    log_target = jax.nn.log_softmax(
        _paper_target(logits, sampled, adv, old_logits, beta)
    )
    return jnp.sum(jnp.exp(log_target) * (log_target - jax.nn.log_softmax(logits)))


def _code_residual(logits, sampled, adv, beta, neg_beta_scale):
    z = jnp.asarray(logits)
    a = advantage_vector(adv, sampled, jnp.shape(z)[-1])
    return z - jax.lax.stop_gradient(z + a / _beta_eff(adv, beta, neg_beta_scale))


def lco_mse_code_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv,
    old_logits: ArrayLike,
    beta: float = BETA,
    neg_beta_scale: float = NEG_BETA_SCALE,
) -> jax.Array:
    r"""LCO-MSE as the official code computes it (target from the detached logit).

    .. math::
        \ell = \sum_v \big(z_v - \operatorname{sg}(z_v) - \hat A_v/\beta_{eff}\big)^2

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: scalar (sparse) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old (unused by this form; kept for a uniform signature).
        beta: β.
        neg_beta_scale: β_eff = this·β for a sparse Â ≤ 0 (100 in the code).

    Returns:
        A scalar loss.

    References:
        homzer/llama-rlhf ``ParallelLCOWithMSETrainerForRuleRM`` (research notes §2.3).
    """
    d = _code_residual(logits, sampled, adv, beta, neg_beta_scale)
    return jnp.sum(d * d)


def lco_lch_code_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv,
    old_logits: ArrayLike,
    beta: float = BETA,
    neg_beta_scale: float = NEG_BETA_SCALE,
) -> jax.Array:
    r"""LCO-LCH as the official code computes it.

    .. math::
        \ell = \sum_v \log\cosh\big(z_v - \operatorname{sg}(z_v) -
        \hat A_v/\beta_{eff}\big)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: scalar (sparse) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old (unused by this form).
        beta: β.
        neg_beta_scale: sparse Â ≤ 0 uses this·β.

    Returns:
        A scalar loss.

    References:
        homzer/llama-rlhf ``ParallelLCOWithLogCoshTrainerForRuleRM``, ``LogCoshLoss``.
    """
    return jnp.sum(_logcosh(_code_residual(logits, sampled, adv, beta, neg_beta_scale)))


def lco_kld_code_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv,
    old_logits: ArrayLike,
    beta: float = BETA,
    neg_beta_scale: float = NEG_BETA_SCALE,
) -> jax.Array:
    r"""LCO-KLD as the official code computes it (asymmetric β_eff).

    .. math::
        \ell = \mathrm{KL}(\pi^*\|\pi_z), \quad \log\pi^* = \log\mathrm{softmax}(
        \log\mathrm{softmax}(z_{old}) + \hat A/\beta_{eff})

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: scalar (sparse) or ``[V]`` (dense) advantage.
        old_logits: ``[V]`` z_old.
        beta: β.
        neg_beta_scale: sparse Â ≤ 0 uses this·β.

    Returns:
        A scalar loss.

    References:
        homzer/llama-rlhf ``ParallelLCOWithKLDTrainerForRuleRM``,
        ``create_lco_log_target``.
    """
    a = advantage_vector(adv, sampled, jnp.shape(logits)[-1])
    log_target = jax.lax.stop_gradient(
        jax.nn.log_softmax(
            jax.nn.log_softmax(jnp.asarray(old_logits))
            + a / _beta_eff(adv, beta, neg_beta_scale)
        )
    )
    return jnp.sum(jnp.exp(log_target) * (log_target - jax.nn.log_softmax(logits)))


def estimate_vocab_adv(old_logits: ArrayLike, adv: float, sampled: int) -> jax.Array:
    r"""Sparse-to-dense advantage fill of the official code (the minimising-derivative
    rule).

    .. math::
        \tilde A_k = \hat A(1-\pi_{old,k}), \qquad
        \tilde A_j = -\frac{\pi_{old,k}\tilde A_k}{\max(1-\pi_{old,k}, 0.1)}\ (j\ne k)

    so that :math:`\sum_v\pi_{old,v}\tilde A_v = 0` whenever
    :math:`1-\pi_{old,k}\ge0.1`.

    Args:
        old_logits: ``[V]`` z_old.
        adv: the sampled token's advantage.
        sampled: k.

    Returns:
        ``[V]`` dense advantage.

    Examples:
        >>> import numpy as np
        >>> a = estimate_vocab_adv(np.zeros(4), 1.0, 0)
        >>> [round(float(x), 6) for x in a]
        [0.75, -0.25, -0.25, -0.25]

    References:
        homzer/llama-rlhf ``src/utils.py::estimate_vocab_adv`` (research notes §2.4).
    """
    pi = jax.nn.softmax(jnp.asarray(old_logits))
    a_k = adv * (1.0 - pi[sampled])
    rest = -pi[sampled] * a_k / jnp.maximum(1.0 - pi[sampled], 0.1)
    return jnp.full(pi.shape, rest).at[sampled].set(a_k)


# --- SymPy specifications -------------------------------------------------------------


def _sym_adv(adv, sampled, vocab):
    if isinstance(adv, (list, tuple)) or getattr(adv, "ndim", 0) == 1:
        return [sym_number(float(a) if not isinstance(a, sp.Basic) else a) for a in adv]
    return [sym_number(adv) if i == sampled else sp.S.Zero for i in range(vocab)]


def _sym_raw_target(z, sampled, adv, old_logits, beta):
    a = _sym_adv(adv, sampled, len(z))
    return [sym_number(o) + ai / sym_number(beta) for o, ai in zip(old_logits, a)]


def _sym_target(z, sampled, adv, old_logits, beta):
    return [Frozen(t) for t in _sym_raw_target(z, sampled, adv, old_logits, beta)]


def _sym_beta_eff(adv, beta, neg_beta_scale):
    b = sym_number(beta)
    if isinstance(adv, (list, tuple)) or getattr(adv, "ndim", 0) == 1:
        return b
    return b if sym_number(adv) > 0 else sym_number(neg_beta_scale) * b


def _sym_kl_to(log_target, z):
    return sp.Add(
        *[sp.exp(lt) * (lt - sym_log_softmax(z, i)) for i, lt in enumerate(log_target)]
    )


def lco_mse_symbolic(z, sampled, *, adv, old_logits, beta=BETA):
    """SymPy spec of :func:`lco_mse_loss`."""
    t = _sym_target(z, sampled, adv, old_logits, beta)
    return sp.Add(*[(zi - ti) ** 2 for zi, ti in zip(z, t)]) / (2 * len(z))


def lco_lch_symbolic(z, sampled, *, adv, old_logits, beta=BETA):
    """SymPy spec of :func:`lco_lch_loss`."""
    t = _sym_target(z, sampled, adv, old_logits, beta)
    return sp.Add(*[sp.log(sp.cosh(zi - ti)) for zi, ti in zip(z, t)]) / len(z)


def lco_kld_symbolic(z, sampled, *, adv, old_logits, beta=BETA):
    """SymPy spec of :func:`lco_kld_loss`."""
    t = _sym_raw_target(z, sampled, adv, old_logits, beta)
    log_target = [Frozen(sym_log_softmax(t, i)) for i in range(len(z))]
    return _sym_kl_to(log_target, z)


def _sym_code_residual(z, sampled, adv, beta, neg_beta_scale):
    a = _sym_adv(adv, sampled, len(z))
    b = _sym_beta_eff(adv, beta, neg_beta_scale)
    return [zi - Frozen(zi) - ai / b for zi, ai in zip(z, a)]


def lco_mse_code_symbolic(
    z, sampled, *, adv, old_logits, beta=BETA, neg_beta_scale=NEG_BETA_SCALE
):
    """SymPy spec of :func:`lco_mse_code_loss`."""
    return sp.Add(
        *[d**2 for d in _sym_code_residual(z, sampled, adv, beta, neg_beta_scale)]
    )


def lco_lch_code_symbolic(
    z, sampled, *, adv, old_logits, beta=BETA, neg_beta_scale=NEG_BETA_SCALE
):
    """SymPy spec of :func:`lco_lch_code_loss`."""
    return sp.Add(
        *[
            sp.log(sp.cosh(d))
            for d in _sym_code_residual(z, sampled, adv, beta, neg_beta_scale)
        ]
    )


def lco_kld_code_symbolic(
    z, sampled, *, adv, old_logits, beta=BETA, neg_beta_scale=NEG_BETA_SCALE
):
    """SymPy spec of :func:`lco_kld_code_loss`."""
    a = _sym_adv(adv, sampled, len(z))
    b = _sym_beta_eff(adv, beta, neg_beta_scale)
    old = [sym_number(o) for o in old_logits]
    shifted = [sym_log_softmax(old, i) + ai / b for i, ai in enumerate(a)]
    log_target = [Frozen(sym_log_softmax(shifted, i)) for i in range(len(z))]
    return _sym_kl_to(log_target, z)
