r"""Per-token trust-region statistics of real rollouts (numeric core on a checkpoint).

For every generated token: the divergences D(μ‖π) between the rollout engine's
distribution μ and the trainer's π, the exact directional derivative Ḋ along
v = e_k − π, its three top-K estimates (from the top-K of μ, which is what the engine
reports), the second-order term and first-order radius, and the ratio / DPPO /
predictive masks — all from one row-blocked pass of
:func:`theorycheck.numeric.token_stats`.

The headline number is the **sign agreement** of each top-K estimator with the exact
full-vocabulary Ḋ: the predictive mask acts on sign(Â·Ḋ), so a wrong sign is a wrong
mask decision. Tokens where the exact Ḋ is 0 (π = μ) carry no sign and are left out.
"""

from __future__ import annotations

import numpy as np

from theorycheck.numeric import MaskConfig, token_stats

ESTIMATORS = ("topk_aggregated", "topk_uniform", "topk_proportional")


def token_statistics(
    rollouts, adv, *, topk: int, delta_kl: float = 0.05, delta_tv: float = 0.15
) -> dict:
    """Every per-token quantity of :func:`~theorycheck.numeric.token_stats`, flat.

    Args:
        rollouts: a :class:`~theorycheck.demo._rollout.Rollouts`.
        adv: ``[B·N]`` per-token advantages.
        topk: K of the top-K divergences and estimators.
        delta_kl, delta_tv: mask thresholds (DPPO: 0.05 KL, 0.15 TV).

    Returns:
        A dict of ``[B·N]`` float64 numpy arrays (keys as ``token_stats``).
    """
    b, n, v = rollouts.logits.shape
    cfg = MaskConfig(topk=topk, delta_kl=delta_kl, delta_tv=delta_tv)
    stats = token_stats(
        rollouts.behavior_logp.reshape(b * n, v).astype(np.float64),
        rollouts.logits.reshape(b * n, v).astype(np.float64),
        rollouts.tokens.reshape(b * n),
        np.asarray(adv, np.float64),
        config=cfg,
    )
    return {key: np.asarray(value, np.float64) for key, value in stats.items()}


def sign_agreement(stats: dict) -> dict[str, dict]:
    """Share of tokens whose estimated sign(Ḋ) equals the exact one, per estimator.

    The ratio direction sign(r − 1) (= sign of the local term) is the baseline every
    estimator has to beat: it is what the PPO/DPPO direction test uses.
    """
    table = {}
    for kind in ("kl", "tv"):
        exact = np.sign(stats[f"ddot_{kind}_full"])
        informative = exact != 0
        rows = {"ratio_direction": np.sign(stats["ratio"] - 1.0)}
        rows.update({est: np.sign(stats[f"ddot_{kind}_{est}"]) for est in ESTIMATORS})
        table[kind] = {
            name: {
                "agreement": float(np.mean(sign[informative] == exact[informative]))
                if informative.any()
                else None,
                "tokens": int(informative.sum()),
            }
            for name, sign in rows.items()
        }
    return table


MASKS = (
    "mask_ppo",
    "mask_dppo_binary_tv",
    "mask_dppo_topk_kl",
    "mask_pred_kl_full",
    *(f"mask_pred_kl_{est}" for est in ESTIMATORS),
)


def mask_rates(stats: dict, adv) -> dict[str, float]:
    """Share of nonzero-advantage tokens each mask removes (1 − mean keep)."""
    live = np.asarray(adv) != 0
    if not live.any():
        return {}
    return {name[5:]: float(1.0 - stats[name][live].mean()) for name in MASKS}
