"""Policy losses written in the shape of the trainers' signatures (written for these
tests, not taken from any trainer): verl's keywords and config, SkyRL's argument
order and config sections, Miles' ppo_kl with ε as arguments (torch.compile'd), and
one with a bug, for theorycheck.testing.assert_matches_rule."""

import warnings

import torch


def _ratio(log_prob, old_log_prob):
    return torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))


def _token_mean(loss_mat, mask):
    # the 1e-8 in the denominator: the "length bias" convention
    return (loss_mat * mask).sum() / (mask.sum() + 1e-8)


def verl_cispo(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """CISPO: -A sg(clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high)) log pi."""
    ratio = _ratio(log_prob, old_log_prob)
    low, high = 1 - config.clip_ratio_low, 1 + config.clip_ratio_high
    weight = torch.clamp(ratio, low, high).detach()
    loss = _token_mean(-advantages * weight * log_prob, response_mask)
    clipped = ((ratio < low) | (ratio > high)).double()
    return loss, {"clipfrac": (clipped * response_mask).sum().item()}


def verl_ppo_wrong_clip(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """PPO with the two clip bounds swapped: a real difference when they differ."""
    ratio = _ratio(log_prob, old_log_prob)
    lo, hi = 1 - config.clip_ratio_high, 1 + config.clip_ratio_low
    per = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, lo, hi))
    return _token_mean(per, response_mask), {}


def skyrl_ppo(
    log_probs, old_log_probs, advantages, config, loss_mask=None, rollout_logprobs=None
):
    """PPO with SkyRL's argument order; the ratio rounded through float32."""
    ratio = torch.exp(torch.clamp((log_probs - old_log_probs).float(), -20, 20))
    ratio = ratio.to(log_probs.dtype)
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - config.eps_clip_low, 1 + config.eps_clip_high) * advantages
    loss = -torch.min(surr1, surr2)
    return (loss * loss_mask).sum() / loss_mask.sum().clamp(min=1), {}


def skyrl_sapo(
    log_probs, old_log_probs, advantages, config, loss_mask=None, rollout_logprobs=None
):
    """SAPO's soft gate (config.sapo section), a token mean."""
    ratio = torch.exp(torch.clamp(log_probs - old_log_probs, -20, 20))
    tau = torch.where(advantages > 0, config.sapo.tau_pos, config.sapo.tau_neg)
    gate = torch.sigmoid(tau * (ratio - 1)) * 4 / tau
    loss = -gate * advantages
    return (loss * loss_mask).sum() / loss_mask.sum().clamp(min=1), {}


def miles_ppo(ppo_kl, advantages, eps_clip, eps_clip_high, eps_clip_c=None):
    """Miles' shape: ppo_kl = log q - log p, per-token losses and a metric."""
    ratio = torch.exp(-ppo_kl)
    l1 = -ratio * advantages
    l2 = -ratio.clamp(1 - eps_clip, 1 + eps_clip_high) * advantages
    return torch.maximum(l1, l2), torch.gt(l2, l1).double()


with warnings.catch_warnings():  # importing torch's compiler warns of deprecations
    warnings.simplefilter("ignore")
    miles_ppo = torch.compile(miles_ppo, dynamic=True)


def verl_branch_on_ratio(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """A Python branch on the ratio's value that reaches the loss."""
    ratio = _ratio(log_prob, old_log_prob)
    if (ratio > 1.0).any():
        ratio = torch.clamp(ratio, max=1.0 + config.clip_ratio_high)
    return _token_mean(-advantages * ratio, response_mask)
