"""Dual-clip PPO in verl's policy-loss signature, written for theorycheck's examples.

For one token with ratio r = exp(clip(log_prob - old_log_prob, -20, 20)) and advantage
A, the objective is j = min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), and for A < 0
j = max(j, c A) (dual clip, c = clip_ratio_c); the loss is -j averaged over the
response mask. The settings are read from verl's config object (clip_ratio,
clip_ratio_low, clip_ratio_high, clip_ratio_c); the metrics use .item(), as verl's
losses do. Check it with

    theorycheck convexity examples/losses/torch/verl_dual_clip.py:loss --signature verl

It implements the registry's dual_clip rule (theorycheck coefficient ... --compare
dual_clip).
"""

import torch


def loss(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    eps = config.clip_ratio
    eps_low = config.clip_ratio_low if config.clip_ratio_low is not None else eps
    eps_high = config.clip_ratio_high if config.clip_ratio_high is not None else eps
    c = config.get("clip_ratio_c", 3.0)
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    objective = torch.minimum(unclipped, clipped)
    objective = torch.where(
        advantages < 0, torch.maximum(objective, c * advantages), objective
    )
    per_token = -objective
    if rollout_is_weights is not None:
        per_token = per_token * rollout_is_weights
    tokens = response_mask.sum().clamp(min=1.0)
    loss = (per_token * response_mask).sum() / tokens
    metrics = {
        "actor/pg_clipfrac": ((clipped < unclipped).double() * response_mask)
        .sum()
        .item()
        / tokens.item(),
        "actor/ppo_kl": (-(log_ratio * response_mask).sum() / tokens).item(),
    }
    return loss, metrics
