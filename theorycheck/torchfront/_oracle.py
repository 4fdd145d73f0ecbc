r"""The oracle a trainer's CI can call on its loss functions
(:func:`assert_matches_rule`, also :func:`theorycheck.testing.assert_matches_rule`): the
function as the trainer calls it against a registry rule, per token and per reduction,
each difference classified (docs/trainers.md)."""

from __future__ import annotations

import numpy as np
import torch

from theorycheck.losses import Reduction, reduction_weights
from theorycheck.torchfront import _coefficient as coef
from theorycheck.torchfront._front import from_function
from theorycheck.torchfront._trace import float64_default

#: the difference classes :func:`assert_matches_rule` accepts by default: exact
#: equality and the documented conventions (``torchfront._coefficient.CONVENTIONS``).
DOCUMENTED = ("equal", *(name for _, name in coef.CONVENTIONS))


def assert_matches_rule(
    fn,
    rule: str,
    *,
    signature: str = "verl",
    params=None,
    reduction=None,
    q: float = 0.5,
    allow=DOCUMENTED,
    seed: int = 0,
) -> dict:
    r"""Asserts that a trainer's PyTorch loss function is registry rule ``rule``.

    * **per token**: the coefficient :math:`c = -\partial L/\partial\log p` of one
      token (torch autograd, the function as the trainer calls it:
      ``signature`` ``verl``, ``skyrl`` or ``miles``) equals the rule's at 106
      values of :math:`p \in [0.001, 0.99]` at behaviour probability ``q``, for
      :math:`A = \pm 1`;
    * **per reduction** (``reduction``: a mode of
      :data:`theorycheck.losses.MODES` or a :class:`theorycheck.losses.Reduction`):
      on a ragged batch of 3 sequences of up to 4 tokens (random p, q, one
      advantage per sequence), the gradient of the function's loss with respect
      to every token's log-probability is :math:`-w_{st}\,c_{st}`, with
      :math:`w` the reduction's weights and :math:`c` the rule's coefficients.

    Each point is classified (equal within :math:`10^{-9}(1+|c|)`, a documented
    convention, or real); any class not in ``allow`` fails with the worst points.

    Args:
        fn: the trainer's loss function (a ``torch.compile``\\ d one is unwrapped).
        rule: a token rule of the registry (``theorycheck.losses.TOKEN_RULES``).
        signature: ``verl``, ``skyrl`` or ``miles``.
        params: the trainer's config values (``{"clip_ratio_low": 0.2}``); the
            trainer's defaults for the rest. They reach the rule mapped onto its
            names (``clip_ratio_low`` -> ``eps_low``).
        reduction: also check the aggregation (``None``: per token only).
        q: the behaviour probability of the per-token grid.
        allow: the difference classes that pass.
        seed: the batch's random draw.

    Returns:
        ``{"rule_params", "mapping", "classes", "max_abs", "max_rel"}``.
    """
    loss = from_function(fn, signature, params or {})
    mapped, sources = coef.rule_settings(loss, rule, {})
    c_rule, rule_params = coef._rule_c(rule, mapped)
    rows = []
    for adv in (1.0, -1.0):
        for p in coef.GRID:
            ct = coef._verl_c(loss, float(p), q, adv) + 0.0
            cr = c_rule(float(p), q, adv) + 0.0
            rows.append((float(p), adv, ct, cr, coef.classify(ct, cr)))
    if reduction is not None:
        rows += _reduction_rows(loss, c_rule, reduction, seed)
    bad = [r for r in rows if r[4] not in allow]
    result = {"rule_params": rule_params, "mapping": sources, **coef.summary(rows)}
    if bad:
        worst = sorted(bad, key=lambda r: -abs(r[2] - r[3]))[:3]
        where = "; ".join(
            f"p={r[0]:.4g} adv={r[1]:g}: loss c={r[2]:.10g}, {rule} c={r[3]:.10g} "
            f"({r[4]})"
            for r in worst
        )
        raise AssertionError(
            f"{loss.name} is not {rule} ({rule_params}): {len(bad)} of {len(rows)} "
            f"points differ, largest {result['max_abs']:.3g} absolute, "
            f"{result['max_rel']:.3g} relative; {where}"
        )
    return result


def _reduction_rows(loss, c_rule, reduction, seed: int) -> list[tuple]:
    """Rows ``(p, adv, torch, rule, class)`` of the batch check: the gradient
    with respect to each valid token's log-probability, as ``-w c``."""
    red = reduction if isinstance(reduction, Reduction) else Reduction(reduction)
    rng = np.random.default_rng(seed)
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=np.float64)
    p = rng.uniform(0.05, 0.95, mask.shape)
    q = rng.uniform(0.05, 0.95, mask.shape)
    adv = np.repeat(rng.choice([-1.5, -0.5, 0.7, 2.0], 3)[:, None], 4, axis=1)
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    logp = t(np.log(p)).requires_grad_(True)
    with float64_default():
        out = loss.reference(t(np.log(q)), logp, t(adv), t(mask))
        (grad,) = torch.autograd.grad(out, logp, allow_unused=True)
    g = np.zeros(mask.shape) if grad is None else grad.numpy()
    w = np.asarray(reduction_weights(mask, red))
    rows = []
    for s, k in zip(*np.nonzero(mask)):
        want = -w[s, k] * c_rule(p[s, k], q[s, k], adv[s, k])
        got = float(g[s, k]) + 0.0
        rows.append((p[s, k], adv[s, k], got, want + 0.0, coef.classify(got, want)))
    return rows
