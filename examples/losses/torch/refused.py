"""PyTorch losses the translation or its gate refuses (docs/convexity.md, "PyTorch
losses"): each ends in one line naming the construct, never in a verdict."""

import random

import torch


def python_random(logits, sampled, adv=1.0):
    """A weight drawn in Python: the trace bakes one draw; torch's own value changes
    from call to call, which the gate sees."""
    return -adv * random.uniform(0.5, 1.5) * torch.log_softmax(logits, -1)[sampled]


def branch(logits, sampled, adv=1.0):
    """A Python if on a tensor's value: a different program on each side."""
    logp = torch.log_softmax(logits, -1)[sampled]
    if logp > -1.0:
        return -adv * logp
    return -2.0 * adv * logp


def in_place(logits, sampled, adv=1.0):
    """An in-place update of a tensor the loss uses."""
    logp = torch.log_softmax(logits, -1)
    logp.mul_(2.0)
    return -adv * logp[sampled]


def noisy(logits, sampled, adv=1.0):
    """torch's randomness."""
    noise = 1.0 + 0.1 * torch.randn(())
    return -adv * noise * torch.log_softmax(logits, -1)[sampled]
