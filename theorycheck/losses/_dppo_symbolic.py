r"""SymPy specifications of the divergence-gated rules (independent of the JAX forms).

Written from the papers' formulas, not from :mod:`theorycheck.numeric`:

.. math::
    D_{Bin\,TV} = |\mu_k - \pi_k|, \quad
    D_{Bin\,KL} = \mu_k\log\frac{\mu_k}{\pi_k} + (1-\mu_k)\log\frac{1-\mu_k}{1-\pi_k},

top-K forms on :math:`S = \mathrm{TopK}(\mu, K)\cup\{k\}` plus one tail bucket (DPPO
Eq. 15-16), and the predictive Ḋ of forward KL / TV (research notes §1.3, §1.7, §1.10).
The mask is ``Frozen`` (detached), a ``Piecewise`` of strict inequalities.
Behavior log-probabilities must be numbers (the top-K support is chosen by value).
"""

from __future__ import annotations

import sympy as sp

from theorycheck.losses._common import (
    LOG_RATIO_CLAMP,
    sym_log_softmax,
    sym_number,
    sym_ratio,
    sym_softmax,
)
from theorycheck.losses._dppo import CAP, DELTA_KL, DELTA_STABLE, DELTA_TV, TOPK
from theorycheck.symbolic import Frozen


def _mu(behavior_logp):
    return [
        sp.S.Zero if sym_number(b) == -sp.oo else sp.exp(sym_number(b))
        for b in behavior_logp
    ]


def _kl(mu, pi):
    return sp.Add(*[m * (sp.log(m) - sp.log(p)) for m, p in zip(mu, pi) if m != 0])


def _tv(mu, pi):
    return sp.Add(*[sp.Abs(m - p) for m, p in zip(mu, pi)]) / 2


def topk_support(
    behavior_logp, sampled: int, topk: int, support: str = "union"
) -> list[int]:
    """Indices of TopK(μ, K) ∪ {k} (``union``) or of the K slots with k replacing
    the K-th entry when it is not among them (``k_slots``, Stable-RL); ties broken by
    the lower index."""
    values = [float(sp.N(sym_number(b))) for b in behavior_logp]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    top = order[: int(topk)]
    if sampled in top:
        return sorted(top)
    if support == "k_slots":
        return sorted(top[:-1] + [sampled])
    return sorted(top + [sampled])


def _reduced(z, sampled, behavior_logp, topk, support="union"):
    """(μ, π, position of k) on S plus the tail bucket (dropped when empty)."""
    mu_all, pi_all = _mu(behavior_logp), sym_softmax(z)
    support = topk_support(behavior_logp, sampled, topk, support)
    mu = [mu_all[i] for i in support]
    pi = [pi_all[i] for i in support]
    if len(support) < len(z):
        mu.append(1 - sp.Add(*mu))
        pi.append(1 - sp.Add(*pi))
    return mu, pi, support.index(sampled)


def sym_divergence(
    z, sampled, behavior_logp, kind: str, topk: int = 0, support: str = "union"
) -> sp.Expr:
    """D(μ‖π) of ``kind`` in {kl, tv, binary_kl, binary_tv, topk_kl, topk_tv}."""
    mu_all, pi_all = _mu(behavior_logp), sym_softmax(z)
    m, p = mu_all[sampled], pi_all[sampled]
    if kind == "binary_tv":
        return sp.Abs(m - p)
    if kind == "binary_kl":
        return _kl([m, 1 - m], [p, 1 - p])
    if kind in ("kl", "tv"):
        return (_kl if kind == "kl" else _tv)(mu_all, pi_all)
    mu, pi, _ = _reduced(z, sampled, behavior_logp, topk, support)
    return (_kl if kind == "topk_kl" else _tv)(mu, pi)


def sym_ddot(z, sampled, behavior_logp, kind: str, topk: int = 0) -> sp.Expr:
    r"""Ḋ along v = e_k − π: exact (topk = 0) or aggregated-tail top-K (topk > 0)."""
    if topk:
        mu, pi, k = _reduced(z, sampled, behavior_logp, topk)
    else:
        mu, pi, k = _mu(behavior_logp), sym_softmax(z), sampled
    if kind == "kl":
        return (pi[k] - mu[k]) + sp.Add(*[p * (m - p) for m, p in zip(mu, pi)])
    s = [sp.sign(p - m) for m, p in zip(mu, pi)]
    s_bar = sp.Add(*[si * p for si, p in zip(s, pi)])
    return (
        pi[k] * (s[k] - s_bar) - sp.Add(*[p**2 * (si - s_bar) for si, p in zip(s, pi)])
    ) / 2


def _mask(masked_condition):
    return Frozen(sp.Piecewise((0, masked_condition), (1, True)))


def _direction_condition(adv, ratio):
    a = sym_number(adv)
    if a > 0:
        return ratio > 1
    if a < 0:
        return ratio < 1
    return sp.false


def _dppo(z, sampled, adv, behavior_logp, kind, delta, topk, clamp):
    ratio = sym_ratio(z, sampled, behavior_logp, clamp)
    div = sym_divergence(z, sampled, behavior_logp, kind, topk)
    cond = sp.And(div > sym_number(delta), _direction_condition(adv, ratio))
    return -_mask(cond) * ratio * sym_number(adv)


def dppo_binary_tv_symbolic(
    z, sampled, *, adv, behavior_logp, delta=DELTA_TV, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """SymPy spec of ``dppo_binary_tv``."""
    return _dppo(z, sampled, adv, behavior_logp, "binary_tv", delta, 0, log_ratio_clamp)


def dppo_binary_kl_symbolic(
    z, sampled, *, adv, behavior_logp, delta=DELTA_KL, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """SymPy spec of ``dppo_binary_kl``."""
    return _dppo(z, sampled, adv, behavior_logp, "binary_kl", delta, 0, log_ratio_clamp)


def dppo_topk_tv_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_TV,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_topk_tv``."""
    return _dppo(
        z, sampled, adv, behavior_logp, "topk_tv", delta, int(topk), log_ratio_clamp
    )


def dppo_topk_kl_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_KL,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_topk_kl``."""
    return _dppo(
        z, sampled, adv, behavior_logp, "topk_kl", delta, int(topk), log_ratio_clamp
    )


def _capped(z, sampled, adv, behavior_logp, kind, delta, cap, clamp, topk=0):
    ratio = sym_ratio(z, sampled, behavior_logp, clamp)
    div = sym_divergence(z, sampled, behavior_logp, kind, int(topk), "k_slots")
    cond = sp.And(div > sym_number(delta), _direction_condition(adv, ratio))
    weight = Frozen(sp.Min(ratio, sym_number(cap)) * sp.Piecewise((0, cond), (1, True)))
    return -weight * sym_number(adv) * sym_log_softmax(z, sampled)


def dppo_capped_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_TV,
    cap=CAP,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_capped``: Frozen(min(r, C)·m)·Â·log π_k."""
    return _capped(
        z, sampled, adv, behavior_logp, "binary_tv", delta, cap, log_ratio_clamp
    )


def dppo_binary_kl_capped_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_KL,
    cap=CAP,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_binary_kl_capped``: binary-KL m, Frozen(min(r, C)·m)."""
    return _capped(
        z, sampled, adv, behavior_logp, "binary_kl", delta, cap, log_ratio_clamp
    )


def dppo_topk_tv_k_slots_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_STABLE,
    cap=CAP,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_topk_tv_k_slots`` (Stable-RL's top-K TV, K slots)."""
    return _capped(
        z, sampled, adv, behavior_logp, "topk_tv", delta, cap, log_ratio_clamp, topk
    )


def dppo_topk_kl_k_slots_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_STABLE,
    cap=CAP,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``dppo_topk_kl_k_slots`` (Stable-RL's top-K KL, K slots)."""
    return _capped(
        z, sampled, adv, behavior_logp, "topk_kl", delta, cap, log_ratio_clamp, topk
    )


def _predictive(z, sampled, adv, behavior_logp, kind, delta, topk, clamp):
    topk = int(topk)
    ratio = sym_ratio(z, sampled, behavior_logp, clamp)
    div = sym_divergence(
        z, sampled, behavior_logp, f"topk_{kind}" if topk else kind, topk
    )
    dd = sym_ddot(z, sampled, behavior_logp, kind, topk)
    a = sym_number(adv)
    cond = sp.And(div > sym_number(delta), a * dd > 0)
    return -_mask(cond) * ratio * a


def predictive_kl_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_KL,
    topk=0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``predictive_kl``."""
    return _predictive(
        z, sampled, adv, behavior_logp, "kl", delta, topk, log_ratio_clamp
    )


def predictive_tv_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    delta=DELTA_TV,
    topk=0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of ``predictive_tv``."""
    return _predictive(
        z, sampled, adv, behavior_logp, "tv", delta, topk, log_ratio_clamp
    )
