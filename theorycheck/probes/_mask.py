r"""The coupled predictive mask: mask by each token's ΔD predicted with coupling.

The predictive-mask paper (arXiv 2607.10848, Eq. 13; text NOT FOUND, INFERRED in
research notes §1.5) clips a token when it is outside the trust region and its own
tabular derivative says the step pushes D up: :math:`D > \delta \wedge \hat A\dot D >
0`. That per-token prediction ignores that every token's logits move with the whole
minibatch through shared weights. The coupled mask predicts instead with the real
candidate update Δθ of the minibatch:

.. math::
    \widehat{\Delta D}_i = g_i'(0) + \tfrac12 g_i''(0), \quad
    g_i(\varepsilon) = D_i(\theta + \varepsilon\Delta\theta)

(one nested JVP, :mod:`._taylor`), clips

* ``rule="sign"``: :math:`D_i > \delta \wedge \widehat{\Delta D}_i > 0` (the paper's
  rule with the coupled prediction), or
* ``rule="threshold"``: :math:`D_i + \widehat{\Delta D}_i > \delta \wedge
  \widehat{\Delta D}_i > 0` (the predicted post-update D would exceed δ),

and recomputes the update without the clipped tokens. Tokens with Â = 0 carry no
gradient and are never counted as masked. Not in any peer (DERIVED here).
"""

from __future__ import annotations

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.probes._metrics import outside, signs

#: the coupled mask's rules: harmful predicted sign, or predicted D above δ.
RULES = ("sign", "threshold")


def coupled_mask(divergence, predicted, adv, *, delta: float, rule: str = "sign"):
    """Keep-mask (1 = keep) from predicted changes of D.

    Args:
        divergence: ``[...]`` D before the update.
        predicted: ``[...]`` predicted ΔD of the candidate update.
        adv: ``[...]`` advantages (Â = 0 tokens are always kept).
        delta: trust-region threshold δ ≥ 0.
        rule: ``"sign"`` or ``"threshold"`` (module docstring).

    Returns:
        ``[...]`` float64 keep-mask.

    Examples:
        >>> coupled_mask([0.2, 0.2, 0.0], [0.1, -0.1, 0.5], [1, 1, 1], delta=0.1)
        array([0., 1., 1.])
    """
    if rule not in RULES:
        raise BadInput(f"unknown rule {rule!r}; valid: {', '.join(RULES)}")
    if not delta >= 0:
        raise BadInput(f"delta = {delta} must be >= 0")
    d = np.asarray(divergence, np.float64)
    pred = np.asarray(predicted, np.float64)
    base = d if rule == "sign" else d + pred
    clip = outside(base, delta) & (signs(pred) > 0) & (np.asarray(adv) != 0)
    return np.where(clip, 0.0, 1.0)


def coupled_update(
    trainer, trainable, opt_state, rows, *, delta: float, order: int = 2, rule="sign"
):
    """One optimizer step with the coupled predictive mask.

    Cost: the candidate update (one forward + backward), one nested JVP of the
    minibatch rows, and the masked update (one more forward + backward).

    Args:
        trainer: a :class:`theorycheck.rl.Trainer`.
        trainable: parameters θ before the step.
        opt_state: the optimizer state before the step.
        rows: the minibatch's row indices.
        delta: trust-region threshold δ.
        order: 1 (first order) or 2 (first + second order from the same JVP).
        rule: ``"sign"`` or ``"threshold"``.

    Returns:
        ``(new_trainable, new_opt_state, keep [b, N], predicted [b, N])``.
    """
    from theorycheck.probes._taylor import predict_change

    if order not in (1, 2):
        raise BadInput(f"order = {order} must be 1 or 2")
    _, grads = trainer.loss_and_grad(trainable, rows)
    _, _, candidate = trainer.update(trainable, opt_state, grads)
    d0, first, second = predict_change(trainer, trainable, candidate, rows)
    predicted = first + 0.5 * second if order == 2 else first
    adv = np.asarray(trainer.batch.adv)[np.asarray(rows)]
    keep = coupled_mask(d0, predicted, adv, delta=delta, rule=rule)
    _, grads = trainer.loss_and_grad(trainable, rows, keep)
    new, state, _ = trainer.update(trainable, opt_state, grads)
    return new, state, keep, predicted
