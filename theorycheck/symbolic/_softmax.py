r"""Softmax, log-softmax, and directional derivatives along a logit direction, in SymPy.

Along the logit path :math:`z + t\,v` the policy :math:`\pi = \operatorname{softmax}(z)`
moves as :math:`\dot\pi_i = \pi_i (v_i - \langle \pi, v\rangle)` (the softmax Jacobian
:math:`\operatorname{diag}\pi - \pi\pi^\top` applied to ``v``). The divergence rates
:math:`\dot D` below are DERIVED (research notes, docs/papers.md §1.3, §1.10 and
Appendix
Z); the
predictive-mask paper's own statements are NOT FOUND.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

__all__ = [
    "ddot_binary_kl",
    "ddot_kl",
    "ddot_tv",
    "log_softmax",
    "softmax",
    "softmax_directional_derivative",
]


def softmax(logits: Sequence[sp.Expr]) -> list[sp.Expr]:
    r"""The policy :math:`\pi_i = e^{z_i} / \sum_j e^{z_j}`.

    Args:
        logits: ``V`` SymPy expressions ``z``.

    Returns:
        ``V`` expressions.

    Examples:
        >>> z = sp.symbols("z0:2", real=True)
        >>> softmax(z)[0]
        exp(z0)/(exp(z0) + exp(z1))
    """
    total = sp.Add(*[sp.exp(t) for t in logits])
    return [sp.exp(t) / total for t in logits]


def log_softmax(logits: Sequence[sp.Expr]) -> list[sp.Expr]:
    r"""The log-policy :math:`\log\pi_i = z_i - \log\sum_j e^{z_j}`.

    Args:
        logits: ``V`` SymPy expressions ``z``.

    Returns:
        ``V`` expressions.

    Examples:
        >>> z = sp.symbols("z0:2", real=True)
        >>> log_softmax(z)[1]
        z1 - log(exp(z0) + exp(z1))
    """
    lse = sp.log(sp.Add(*[sp.exp(t) for t in logits]))
    return [t - lse for t in logits]


def softmax_directional_derivative(
    policy: Sequence[sp.Expr], direction: Sequence[sp.Expr]
) -> list[sp.Expr]:
    r"""The rate :math:`\dot\pi_i = \pi_i\,(v_i - \langle \pi, v\rangle)` along ``v``.

    Args:
        policy: ``V`` probabilities :math:`\pi`.
        direction: ``V`` logit-direction entries :math:`v`.

    Returns:
        ``V`` expressions :math:`\frac{d}{dt}\operatorname{softmax}(z + t v)_i` at t =
        0.

    Examples:
        >>> p = sp.symbols("p0:2", positive=True)
        >>> softmax_directional_derivative(p, [1, 0])[0]
        p0*(1 - p0)
    """
    mean = sp.Add(*[pi * vi for pi, vi in zip(policy, direction)])
    return [pi * (vi - mean) for pi, vi in zip(policy, direction)]


def ddot_kl(
    behavior: Sequence[sp.Expr], policy: Sequence[sp.Expr], direction: Sequence[sp.Expr]
) -> sp.Expr:
    r"""Rate of the forward KL :math:`D = \mathrm{KL}(\mu\,\|\,\pi)` along ``v``.

    .. math::
        \dot D = -\sum_i \mu_i \dot\pi_i / \pi_i = \langle \pi - \mu, v \rangle

    DERIVED (docs/papers.md §1.3, Prop. 1 / Eq. 7 as described by secondary sources).

    Args:
        behavior: ``V`` probabilities :math:`\mu`.
        policy: ``V`` probabilities :math:`\pi` (summing to one).
        direction: ``V`` entries :math:`v`.

    Returns:
        The scalar :math:`\dot D`.

    Examples:
        >>> ddot_kl([sp.S(1)/2, sp.S(1)/2], [sp.S(1)/4, sp.S(3)/4], [1, 0])
        -1/4
    """
    rate = softmax_directional_derivative(policy, direction)
    return -sp.Add(*[m * d / p for m, d, p in zip(behavior, rate, policy)])


def ddot_tv(
    behavior: Sequence[sp.Expr], policy: Sequence[sp.Expr], direction: Sequence[sp.Expr]
) -> sp.Expr:
    r"""Rate of :math:`D = \tfrac12 \sum_i |\pi_i - \mu_i|` along ``v`` (where no
    :math:`\pi_i = \mu_i`).

    .. math::
        \dot D = \tfrac12 \sum_i s_i\,\dot\pi_i, \qquad s_i =
        \operatorname{sign}(\pi_i-\mu_i)

    DERIVED (docs/papers.md §1.10, Appendix Z check 3).

    Args:
        behavior: ``V`` probabilities :math:`\mu`.
        policy: ``V`` probabilities :math:`\pi`.
        direction: ``V`` entries :math:`v`.

    Returns:
        The scalar :math:`\dot D`.

    Examples:
        >>> ddot_tv([sp.S(1)/2, sp.S(1)/2], [sp.S(1)/4, sp.S(3)/4], [1, 0])
        -3/16
    """
    rate = softmax_directional_derivative(policy, direction)
    return sp.Rational(1, 2) * sp.Add(
        *[sp.sign(p - m) * d for m, p, d in zip(behavior, policy, rate)]
    )


def ddot_binary_kl(behavior_k: sp.Expr, policy_k: sp.Expr, rate_k: sp.Expr) -> sp.Expr:
    r"""Rate of the binary KL between Bernoulli(:math:`\mu_k`) and
    Bernoulli(:math:`\pi_k`).

    .. math::
        \dot D = \dot\pi_k \Big(\frac{1-\mu_k}{1-\pi_k} - \frac{\mu_k}{\pi_k}\Big)
               = \dot\pi_k\,\frac{\pi_k - \mu_k}{\pi_k (1-\pi_k)}

    DERIVED (docs/papers.md §1.3 and Appendix Z check 2: along :math:`v = e_k - \pi`,
    :math:`\dot\pi_k = \pi_k(1 - 2\pi_k + \lVert\pi\rVert^2)`).

    Args:
        behavior_k: :math:`\mu_k`.
        policy_k: :math:`\pi_k`.
        rate_k: :math:`\dot\pi_k` along the chosen direction.

    Returns:
        The scalar :math:`\dot D`.

    Examples:
        >>> p, q = sp.symbols("p q", positive=True)
        >>> sp.factor(ddot_binary_kl(q, p, p * (1 - p)))
        p - q
    """
    return sp.cancel(rate_k * (policy_k - behavior_k) / (policy_k * (1 - policy_k)))
