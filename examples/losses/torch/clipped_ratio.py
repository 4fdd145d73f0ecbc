"""PPO's clipped importance ratio written as a PyTorch function of the logits, for
theorycheck's examples: the logits form fn(logits, sampled, **params).

L(z) = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) with r = pi_k / q. Inputs
arrive as 0-d float64 tensors (adv, q and the hyperparameters), as the JAX form
traces them. Check it with

    theorycheck convexity examples/losses/torch/clipped_ratio.py:loss --set adv=-1

``loss_entropy`` adds an entropy bonus -beta H(pi) (a function of every logit, so no
sampled-token structure applies).
"""

import torch


def loss(logits, sampled, adv=1.0, q=0.5, eps_low=0.2, eps_high=0.2):
    logp = torch.log_softmax(logits, dim=-1)[sampled]
    ratio = torch.exp(logp - torch.log(q))
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio * adv, clipped * adv)


def loss_entropy(logits, sampled, adv=1.0, q=0.5, beta=0.01):
    logp_all = torch.log_softmax(logits, dim=-1)
    entropy = -(logp_all.exp() * logp_all).sum()
    return loss(logits, sampled, adv=adv, q=q) - beta * entropy
