r"""Sign-agreement metrics of ΔD predictions, always next to the base rate.

For a predictor with sign :math:`\hat s_i \in \{-1, 0, +1\}` and realized
:math:`\Delta D_i \ne 0` (positive = D rises):

* coverage: share of tokens with :math:`\hat s_i \ne 0` (0 = the predictor abstains,
  e.g. Â = 0 or exactly on-policy);
* base rate: share of evaluated tokens whose D rises (the agreement of the trivial
  predictor "D always rises");
* agreement: :math:`P(\hat s = \operatorname{sign}\Delta D)`;
* balanced accuracy: :math:`\tfrac12(\mathrm{TPR} + \mathrm{TNR})` with "rise" as the
  positive class (0.5 for any constant predictor);
* precision of predicted decrease: :math:`P(\Delta D < 0 \mid \hat s < 0)`, the case a
  mask relies on when it keeps a token.

The unsafe-keep rate is the predictive-mask paper's §4.2 metric (arXiv 2607.10848;
protocol text NOT FOUND, INFERRED in research notes §1.11): on tokens outside the
trust region (:func:`outside`: D − δ > :data:`TOL`) where the ratio and the Ḋ
direction criteria disagree (one clips, the other keeps), each criterion's share of
its kept tokens whose D rises.
"""

from __future__ import annotations

import numpy as np

#: the Ḋ estimators recorded per token (exact, then the three top-K ones).
ESTIMATORS = ("full", "topk_aggregated", "topk_uniform", "topk_proportional")
#: the masks whose own updates a probe step can evaluate.
MASKS = ("none", "ratio", "predictive", "coupled")
#: |value| below this is float64 rounding noise and counts as 0 (abstain / no change):
#: exactly on-policy, Ḋ and the coupled prediction are sums that cancel to ~1e-17.
TOL = 1e-12


def signs(x, tol: float = TOL) -> np.ndarray:
    """``sign(x)`` with ``|x| <= tol`` mapped to 0.

    Examples:
        >>> signs([1e-17, -2e-3, 0.5]).tolist()
        [0.0, -1.0, 1.0]
    """
    x = np.asarray(x, np.float64)
    return np.where(np.abs(x) <= tol, 0.0, np.sign(x))


def outside(divergence, delta: float, tol: float = TOL) -> np.ndarray:
    r"""Tokens outside the trust region: :math:`D - \delta > \mathrm{tol}`.

    D is a sum of V terms that cancel exactly on-policy (θ = θ_old and μ = π_θ), where
    float64 leaves ``|D| ~ 1e-16`` of either sign; like :func:`signs`, a margin within
    ``tol`` of δ counts as 0 (inside), so the count does not depend on the order of
    the summation (the fast path and the plain loop sum in different orders).

    Examples:
        >>> outside([1e-17, -1e-16, 0.2, 0.1 + 1e-14], 0.0).tolist()
        [False, False, True, True]
        >>> outside([0.1 + 1e-14, 0.2], 0.1).tolist()
        [False, True]
    """
    return np.asarray(divergence, np.float64) - delta > tol


def sign_metrics(predicted, realized, *, tol: float = TOL) -> dict:
    """Coverage, base rate, agreement, balanced accuracy, precision of decrease.

    Args:
        predicted: ``[n]`` predicted ΔD (or its sign); 0 (``|x| <= tol``) = abstain.
        realized: ``[n]`` realized ΔD; zeros (``|x| <= tol``) are left out.
        tol: the rounding-noise level (:data:`TOL`).

    Returns:
        A dict of floats (None where a rate has no tokens) and token counts.

    Examples:
        >>> m = sign_metrics([1.0, -1.0, 1.0, 0.0], [2.0, -1.0, -3.0, 1.0])
        >>> m["agreement"], m["balanced_accuracy"], m["precision_decrease"]
        (0.6666666666666666, 0.75, 1.0)
    """
    pred = signs(predicted, tol)
    real = signs(realized, tol)
    live = real != 0
    pred, real = pred[live], real[live]
    made = pred != 0
    out = {
        "tokens": int(live.sum()),
        "coverage": _rate(made.sum(), len(pred)),
        "base_rate": _rate((real[made] > 0).sum(), made.sum()),
        "agreement": _rate((pred[made] == real[made]).sum(), made.sum()),
    }
    rise, fall = real[made] > 0, real[made] < 0
    tpr = _rate((pred[made][rise] > 0).sum(), rise.sum())
    tnr = _rate((pred[made][fall] < 0).sum(), fall.sum())
    out["balanced_accuracy"] = None if tpr is None or tnr is None else (tpr + tnr) / 2
    down = pred < 0
    out["predicted_decrease"] = int(down.sum())
    out["precision_decrease"] = _rate((real[down] < 0).sum(), down.sum())
    return out


def _rate(num, den):
    return None if den == 0 else float(num) / float(den)


def unsafe_keep(
    divergence, ratio_direction, ddot_direction, realized, *, delta: float, extra=None
) -> dict:
    """The paper's §4.2 unsafe-keep rate on disagreement tokens.

    A criterion *clips* a token outside the trust region when its predicted direction
    times the advantage is positive (the update would push D up), and keeps it
    otherwise. Inputs are already multiplied by the advantage.

    Args:
        divergence: ``[n]`` D before the update.
        ratio_direction: ``[n]`` Â·(r − 1).
        ddot_direction: ``[n]`` Â·Ḋ.
        realized: ``[n]`` realized ΔD after the update.
        delta: the trust-region threshold δ.
        extra: optional ``{name: [n] predicted ΔD}`` criteria evaluated on the same
            disagreement set (clip when the prediction is positive).

    Returns:
        ``{"disagreement": n, "outside": n, "<criterion>": {"kept", "unsafe_keep"}}``.

    Examples:
        >>> u = unsafe_keep([1, 1], [1, -1], [-1, 1], [0.5, -0.5], delta=0.1)
        >>> u["ratio"]["unsafe_keep"], u["ddot"]["unsafe_keep"]
        (0.0, 1.0)
    """
    real = np.asarray(realized, np.float64)
    out_ = outside(divergence, delta)
    clips = {
        "ratio": signs(ratio_direction) > 0,
        "ddot": signs(ddot_direction) > 0,
    }
    for name, pred in (extra or {}).items():
        clips[name] = signs(pred) > 0
    disagree = out_ & (clips["ratio"] != clips["ddot"])
    out = {"outside": int(out_.sum()), "disagreement": int(disagree.sum())}
    for name, clip in clips.items():
        kept = disagree & ~clip
        out[name] = {
            "kept": int(kept.sum()),
            "unsafe_keep": _rate((signs(real[kept]) > 0).sum(), kept.sum()),
        }
    return out


def mean_se(values) -> dict:
    """Mean and standard error over seeds (None values left out).

    Examples:
        >>> m = mean_se([1.0, 2.0, 3.0])
        >>> m["mean"], round(m["se"], 12), m["n"]
        (2.0, 0.57735026919, 3)
    """
    xs = np.array([v for v in values if v is not None], np.float64)
    if len(xs) == 0:
        return {"mean": None, "se": None, "n": 0}
    se = float(xs.std(ddof=1) / np.sqrt(len(xs))) if len(xs) > 1 else None
    return {"mean": float(xs.mean()), "se": se, "n": int(len(xs))}
