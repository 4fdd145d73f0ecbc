"""PyTorch losses written the way users write them (verl-style helpers, masked means,
metrics with ``.item()``, ``torch.no_grad()`` weights), not by the translator's authors'
corpus conventions: the check of what the torch front end promises (a sound verdict
or a one-line refusal, and the coefficient of the registry rule each implements).

Each docstring names the registry rule the loss implements; the truth of every
verdict is the registry rule's own verdict (tests/torchfront/test_hidden.py).
"""

import torch
import torch.nn.functional as F


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def agg_loss(loss_mat, loss_mask, loss_agg_mode):
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    if loss_agg_mode == "seq-mean-token-sum":
        return (loss_mat * loss_mask).sum(dim=-1).mean()
    raise ValueError(loss_agg_mode)


def vanilla_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """verl's vanilla policy loss with the dual clip (registry: dual_clip), its
    metrics read with ``.item()``."""
    clip_ratio_c = config.get("clip_ratio_c", 3.0)
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(
        ratio, 1 - config.clip_ratio_low, 1 + config.clip_ratio_high
    )
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    metrics = {
        "actor/pg_clipfrac": pg_clipfrac.detach().item(),
        "actor/ppo_kl": ppo_kl.detach().item(),
    }
    return pg_loss, metrics


def cispo_nograd_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """CISPO (registry: cispo, low = 1 - 2.5 clip_ratio_low = 0.5 at verl's default,
    high = 5): the importance weight is computed under ``torch.no_grad()``, a metric
    read with ``.item()``."""
    with torch.no_grad():
        log_ratio = (log_prob - old_log_prob).clamp(-20.0, 20.0)
        is_weight = torch.clip(log_ratio.exp(), 1 - 2.5 * config.clip_ratio_low, 5.0)
    pg_losses = -advantages * is_weight * log_prob
    loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    return loss, {"actor/is_weight": masked_mean(is_weight, response_mask).item()}


def ce_logits(logits, sampled):
    """Cross-entropy of the sampled token through ``F.cross_entropy`` (registry: pg at
    Â = 1): convex."""
    target = torch.tensor([sampled])
    return F.cross_entropy(logits.unsqueeze(0), target)


def reinforce_item(logits, sampled, adv=-1.0):
    """REINFORCE with Â = -1 and a detached ``.item()`` log for a metric (registry:
    pg at Â = -1): not convex."""
    logp = F.log_softmax(logits, dim=-1)[sampled]
    _ = logp.detach().exp().item()  # a metric, unused by the loss
    return -(adv * logp)


def ppo_logits(logits, sampled, adv=-1.0, q=0.5, eps_low=0.2, eps_high=0.2):
    """PPO's clipped ratio on the logits (registry: ppo): region-convex at Â = -1."""
    logp = logits.log_softmax(-1).gather(0, torch.tensor([sampled])).squeeze(0)
    ratio = (logp - q.log()).exp()
    surr1 = ratio * adv
    surr2 = ratio.clamp(1 - eps_low, 1 + eps_high) * adv
    return -torch.min(surr1, surr2)


def cispo_item_logits(logits, sampled, adv=1.0, q=0.5):
    """CISPO with the weight read by ``.item()`` (registry: cispo): torch autograd
    treats the Python number as a constant, as the registry's stop_gradient."""
    logp = torch.log_softmax(logits, -1)[sampled]
    weight = torch.clamp(torch.exp(logp - torch.log(q)), 0.5, 5.0).item()
    return -adv * weight * logp
