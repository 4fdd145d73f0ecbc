r"""A correction and a reduction applied to a real batch: the per-token weights.

With :math:`x_{st} = \log p_{st} - \log q_{st}` (trainer vs rollout), a list of
off-policy corrections (registry names and parameters, as the config resolvers return
them) gives the multiplier :math:`c_{st}` (their product; rejected tokens get 0, and
verl's ``rollout_is_batch_normalize`` divides the IS weight by its batch mean over
tokens or sequences), and a reduction gives :math:`\rho_{st}` (the weight of token
:math:`(s, t)` in the loss, :func:`reduction_weights`). The per-token weight is

.. math::
    w_{st} = c_{st}\,\rho_{st},\qquad
    \text{effective loss scale} = \frac{\sum_{st} w_{st}}{\sum_{st}\rho^{0}_{st}},

with :math:`\rho^{0}` the reduction of the uncorrected batch: the factor by which the
correction changes the loss's total weight (< 1 when tokens are rejected and the
denominators do not shrink with them, as in verl #4852 and Miles).

A reduction may also be a plain function ``f(mask, lengths, group_ids) -> [S, T]``
weights (:func:`vl_norm` is one).
"""

from __future__ import annotations

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.losses._corrections import CORRECTIONS, combine
from theorycheck.losses._reductions import MODES, Reduction, reduction_weights
from theorycheck.losses._resolve_common import parse_number


def vl_norm(mask, lengths, group_ids):
    r"""VL-Norm (variance-reduced length normalisation): per-token weight
    :math:`\frac{1/L_s}{\sum_{s'} 1/L_{s'}}` (each response weighted by its inverse
    length, normalised over the batch; empty responses weigh 0).

    A user-defined reduction in the form ``audit`` takes: ``(mask [S, T], lengths [S],
    group_ids [S]) -> [S, T]``.
    """
    inv = np.where(lengths > 0, 1.0 / np.maximum(lengths, 1), 0.0)
    total = inv.sum()
    if total == 0:
        return np.zeros_like(mask)
    return mask * (inv / total)[:, None] / np.maximum(lengths, 1)[:, None]


def parse_correction(item: str, *, flag: str = "correction") -> dict:
    """``NAME[:KEY=VALUE,...]`` -> a correction spec (numbers checked finite).

    Raises:
        BadInput: naming ``flag`` and the item or key.
    """
    name, _, rest = item.partition(":")
    params = {}
    for kv in filter(None, rest.split(",")):
        key, eq, value = kv.partition("=")
        if not eq:
            raise BadInput(f"{flag} {item!r}: expected CORRECTION:KEY=VALUE,...")
        text = value.strip()
        textual = key in ("estimator", "level")
        params[key] = text if textual else parse_number(f"{flag} {name}.{key}", text)
    shown = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )
    return {
        "correction": name.strip(),
        "params": params,
        "applied": True,
        "text": f"{name.strip()}({shown})",
    }


def reduction_by_name(name: str, *, flag: str = "reduction"):
    """A reduction mode (empty responses counted) or ``vl_norm``."""
    if name == "vl_norm":
        return vl_norm
    if name not in MODES:
        raise BadInput(f"{flag} {name!r}: expected one of {', '.join(MODES)}, vl_norm")
    return Reduction(name, count_empty=True)


def _one(spec, x, m):
    name = spec["correction"]
    if name not in CORRECTIONS:
        raise BadInput(
            f"correction {name!r} cannot be applied to a batch; applicable: "
            f"{', '.join(CORRECTIONS)}"
        )
    c = CORRECTIONS[name](x, m, **spec.get("params", {}))
    if not spec.get("batch_normalize"):
        return c
    w = c.weights
    if name.endswith("token") or name == "icepop":
        mean = w[m > 0].mean() if (m > 0).any() else 1.0
    else:
        rows = m.sum(axis=1) > 0
        mean = (w * m).sum(axis=1)[rows] / m.sum(axis=1)[rows]
        mean = mean.mean() if rows.any() else 1.0
    scale = mean if mean > 1e-8 else 1.0
    return type(c)(c.name + "/batch_mean", w / scale, c.truncated, c.rejected)


def _bins(values, ok, n):
    """Quantile bin edges of ``values[ok]`` (at most n bins, distinct edges)."""
    v = values[ok]
    if v.size == 0:
        return np.array([0.0, 1.0])
    edges = np.unique(np.quantile(v, np.linspace(0, 1, n + 1)))
    return edges if edges.size > 1 else np.array([edges[0], edges[0]])


def _breakdown(key, values, ok, rows, n):
    edges = _bins(values, ok, n)
    out = []
    for i in range(len(edges) - 1):
        last = i == len(edges) - 2
        sel = ok & (values >= edges[i]) & ((values <= edges[i + 1]) if last else
                                           (values < edges[i + 1]))  # fmt: skip
        if not sel.any():
            continue
        out.append({key: [float(edges[i]), float(edges[i + 1])], **rows(sel)})
    return out


def apply_to_batch(batch, corrections, reduction, *, counts_before_rejection=True,
                   bins=4):  # fmt: skip
    """The per-token weights of ``corrections`` and ``reduction`` on ``batch``.

    Args:
        batch: a validated batch (:func:`load_batch`).
        corrections: ``[{"correction", "params", "batch_normalize"?, "applied"?}]``
            (a config resolver's ``corrections``; ``applied: False`` ones are
            reported, not applied).
        reduction: a :class:`Reduction` or ``f(mask, lengths, group_ids)``.
        counts_before_rejection: denominators counted from the mask before rejection
            (verl's new engine, #4852; Miles), else from the mask after it.
        bins: quantile bins of response length and of mismatch.

    Returns:
        JSON-ready ``{"corrections": [...], "rejected_token_share",
        "clipped_token_share", "effective_loss_scale", "weight_quantiles",
        "by_length": [...], "by_mismatch": [...]}`` and ``weights`` (``[S, T]``
        array, removed before JSON).
    """
    m = batch["mask"]
    x = np.where(m > 0, np.log(batch["p"]) - np.log(batch["q"]), 0.0)
    applied = [_one(c, x, m) for c in corrections if c.get("applied", True)]
    corr = combine(*applied) if applied else None
    mult = np.ones_like(m) if corr is None else corr.weights
    rejected = np.zeros(m.shape, bool) if corr is None else corr.rejected & (m > 0)
    clipped = np.zeros(m.shape, bool) if corr is None else corr.truncated & (m > 0)
    kept = m * ~rejected
    red0 = _reduce(reduction, m, m, batch)
    red = _reduce(reduction, kept, m if counts_before_rejection else kept, batch)
    w = mult * red
    tokens = max(float(m.sum()), 1.0)
    lengths = m.sum(axis=1)
    mismatch = np.abs((x * m).sum(axis=1)) / np.maximum(lengths, 1)

    def rows(sel):
        t = max(float(m[sel].sum()), 1.0)
        return {
            "responses": int(sel.sum()),
            "tokens": int(m[sel].sum()),
            "rejected_token_share": float(rejected[sel].sum() / t),
            "clipped_token_share": float(clipped[sel].sum() / t),
            "weight_share": float(w[sel].sum() / max(w.sum(), 1e-300)),
            "uncorrected_weight_share": float(
                red0[sel].sum() / max(red0.sum(), 1e-300)
            ),
        }

    ok = lengths > 0
    valid_w = w[m > 0]
    return {
        "corrections": [_row(c, m, tokens) for c in applied],
        "not_applied": [
            c["correction"] for c in corrections if not c.get("applied", True)
        ],  # fmt: skip
        "rejected_token_share": float(rejected.sum() / tokens),
        "clipped_token_share": float(clipped.sum() / tokens),
        "effective_loss_scale": float(w.sum() / max(red0.sum(), 1e-300)),
        "weight_quantiles": {
            q: float(np.quantile(valid_w, v)) if valid_w.size else None
            for q, v in (("min", 0), ("median", 0.5), ("p99", 0.99), ("max", 1))
        },
        "by_length": _breakdown("length", lengths, ok, rows, bins),
        "by_mismatch": _breakdown("mean_abs_log_ratio", mismatch, ok, rows, bins),
        "weights": w,
    }


def _row(c, m, tokens):
    rows_ok = m.sum(axis=1) > 0
    seqs = max(int(rows_ok.sum()), 1)
    return {
        "correction": c.name,
        "rejected_token_share": float((c.rejected & (m > 0)).sum() / tokens),
        "clipped_token_share": float((c.truncated & (m > 0)).sum() / tokens),
        "rejected_sequence_share": float(
            (c.rejected & (m > 0)).any(axis=1)[rows_ok].sum() / seqs
        ),
        "mean_weight": float(c.weights[m > 0].mean()) if (m > 0).any() else None,
    }


def _reduce(reduction, mask, count_mask, batch):
    if isinstance(reduction, Reduction):
        gid = batch["group_id"]
        _, dense = np.unique(gid, return_inverse=True)
        return np.asarray(
            reduction_weights(
                mask,
                reduction,
                group_ids=dense,
                num_groups=int(dense.max()) + 1,
                count_mask=count_mask,
            ),
            dtype=np.float64,
        )
    out = np.asarray(
        reduction(mask, mask.sum(axis=1), batch["group_id"]), dtype=np.float64
    )
    if out.shape != mask.shape or not np.all(np.isfinite(out)):
        raise BadInput(
            f"reduction function returned shape {out.shape} or non-finite weights; "
            f"expected finite [S, T] = {mask.shape}"
        )
    return out
