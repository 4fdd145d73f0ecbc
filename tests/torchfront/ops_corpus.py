"""PyTorch losses of the logits form that use the operations translated for
trainers' code (a corpus written for the tests): each is compared with torch itself
(value and gradient) and passes the gate."""

import torch
import torch.nn.functional as F


def nll(logits, sampled, adv):
    """-A log pi_k through F.nll_loss (mean over one row)."""
    logp = F.log_softmax(logits, -1)
    return adv * F.nll_loss(logp[None], torch.tensor([sampled]))


def cumsum(logits, sampled, adv):
    """A cumulative sum of the log-probabilities, read at the last place."""
    logp = F.log_softmax(logits, -1)
    return -adv * torch.cumsum(logp, 0)[-1]


def logsigmoid(logits, sampled, adv):
    """-A log sigma(z_k - z_0 + 1)."""
    return -adv * F.logsigmoid(logits[sampled] - logits[0] + 1.0)


def elu(logits, sampled, adv):
    """ELU of the centred logits, summed."""
    return adv * F.elu(logits - logits.mean(), alpha=0.7).sum()


def smoothed_ce(logits, sampled, adv):
    """Cross entropy with label smoothing 0.1."""
    target = torch.tensor([sampled])
    return adv * F.cross_entropy(logits[None], target, label_smoothing=0.1)


def masked_in_place(logits, sampled, adv):
    """The mask idiom: a no-grad mask edited in place, combined with & and |."""
    logp = F.log_softmax(logits, -1)
    ratio = torch.exp(logp[sampled : sampled + 1])
    mask = torch.ones_like(ratio)
    mask[(adv > 0) & (ratio > 0.3)] = 0.0
    keep = (ratio < 0.9) | (adv < 0)
    return -(adv * mask * keep * logp[sampled]).sum()


def view_then_write(logits, sampled, adv):
    """An in-place write through a view: refused (another name sees it)."""
    base = torch.ones(2)
    view = base[:1]
    view[view > 0] = 3.0
    return -(adv * base.sum() * F.log_softmax(logits, -1)[sampled])
