"""PyTorch losses of the torchfront tests (a corpus written for the tests; the truth
of each is derived independently in the tests: from the registry's JAX rule it
implements, or from its closed form)."""

import random

import torch


def _verl_ratio(log_prob, old_log_prob):
    return torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))


def ppo_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """PPO clip (registry: ppo), metrics with .item()."""
    ratio = _verl_ratio(log_prob, old_log_prob)
    lo, hi = 1 - config.clip_ratio_low, 1 + config.clip_ratio_high
    l1 = -advantages * ratio
    l2 = -advantages * torch.clamp(ratio, lo, hi)
    per = torch.maximum(l1, l2)
    loss = (per * response_mask).sum() / response_mask.sum()
    return loss, {"clipfrac": (l2 > l1).double().mean().item()}


def cispo_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """CISPO (registry: cispo, low 0.5, high 5): a clipped ratio computed under
    no_grad weights log_prob."""
    with torch.no_grad():
        weight = torch.clamp(_verl_ratio(log_prob, old_log_prob), 0.5, 5.0)
    per = -advantages * weight * log_prob
    return (per * response_mask).sum() / response_mask.sum(), {}


def cispo_detach_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """The same weight with .detach()."""
    weight = torch.clamp(_verl_ratio(log_prob, old_log_prob), 0.5, 5.0).detach()
    return (-advantages * weight * log_prob * response_mask).sum(), {}


def item_weight_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """A weight read with .item() (torch treats it as a constant)."""
    w = torch.clamp(_verl_ratio(log_prob, old_log_prob), 0.5, 5.0).sum().item()
    return (-advantages * w * log_prob * response_mask).sum()


def cross_entropy(logits, sampled):
    """-log pi_k: convex for every V."""
    return -torch.log_softmax(logits, dim=-1)[sampled]


def reinforce_neg(logits, sampled, adv=-1.0):
    """-A log pi_k with A = -1: not convex (V >= 3)."""
    return -adv * torch.log_softmax(logits, dim=-1)[sampled]


def sapo_like(logits, sampled, adv=1.0, q=0.5):
    """A smooth gate of the ratio (not a registry rule): for the gate only."""
    r = torch.exp(torch.log_softmax(logits, -1)[sampled] - torch.log(q))
    return -adv * torch.sigmoid(4.0 * (r - 1.0)) * 4.0 / 4.0


def random_weight(logits, sampled, adv=1.0):
    return -adv * torch.rand(()) * torch.log_softmax(logits, -1)[sampled]


def python_random(logits, sampled, adv=1.0):
    return -adv * random.random() * torch.log_softmax(logits, -1)[sampled]


def in_place(logits, sampled, adv=1.0):
    lp = torch.log_softmax(logits, -1)
    lp.mul_(2.0)
    return -adv * lp[sampled]


def branches(logits, sampled, adv=1.0):
    lp = torch.log_softmax(logits, -1)[sampled]
    if lp > -1.0:
        return -adv * lp
    return -2.0 * adv * lp


def vector(logits, sampled):
    return torch.log_softmax(logits, -1)


def half(logits, sampled):
    return (-torch.log_softmax(logits, -1)[sampled]).to(torch.bfloat16)


def float16(logits, sampled):
    return (-torch.log_softmax(logits, -1)[sampled]).half()


def no_loss_tuple(logits, sampled):
    return ({"metric": 1.0}, -torch.log_softmax(logits, -1)[sampled])


def on_meta(logits, sampled):
    return torch.zeros((), device="meta") - logits.sum()


def to_cuda(logits, sampled):
    return -torch.log_softmax(logits.to("cuda"), -1)[sampled]


def raises(logits, sampled):
    raise RuntimeError("the user's torch bug")


def chatty(logits, sampled):
    print("hello from the torch loss")
    return -torch.log_softmax(logits, -1)[sampled]


def neither(x):
    return x.sum()


def verl_named(old_log_prob, log_prob, advantages, response_mask, config=None):
    return -(advantages * log_prob).sum()


def unknown_config(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    return -(advantages * log_prob).sum() * config.my_new_knob


def default_dtype_constant(logits, sampled, adv=1.0):
    """torch.tensor(0.2) with the default dtype: float64 in the trace and the gate."""
    return -adv * torch.tensor(0.2) * torch.log_softmax(logits, -1)[sampled]


def unused_mask_verl(
    old_log_prob,
    log_prob,
    advantages,
    response_mask,
    loss_agg_mode="token-mean",
    config=None,
    rollout_is_weights=None,
):
    """Ignores old_log_prob and the mask: REINFORCE (registry: pg)."""
    return -(advantages * log_prob).sum()


def shape_branch(logits, sampled):
    """Cross-entropy up to V = 40, log pi_k above (not convex from V = 41): one
    program at every traced V; torch.export with a dynamic V sees the branch."""
    lp = torch.log_softmax(logits, -1)
    if logits.shape[0] > 40:
        return lp[sampled]
    return -lp[sampled]
