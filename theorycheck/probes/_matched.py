r"""Matched controls of the masks, the on-policy zero-signal split, the §4.2 metric.

**Matched controls.** A mask that removes more tokens keeps fewer unsafe ones by
construction, so a comparison of masks is fair only at the same masked share. At every
step t of the trainer's real schedule let :math:`n_t` be the number of updated tokens
(Â ≠ 0) the coupled mask (:mod:`._mask`) removes from the minibatch. The controls
remove exactly :math:`n_t` tokens of the same minibatch, from the same state, among the
tokens outside the trust region (D > δ), chosen by

* ``random_matched``: a uniformly random subset (seeded);
* ``ratio_matched``: the largest :math:`\hat A (r - 1)` (the ratio rule's own
  direction score, re-thresholded);
* ``predictive_matched``: the largest :math:`\hat A \dot D` (the predictive-mask
  paper's score, Eq. 13, re-thresholded).

Each control's own update is computed like the masks' (one forward + backward) and
scored the same way (share masked, realized ΔD and D after of kept tokens, unsafe keep).

**Zero-signal tokens.** On-policy (μ = the trainer's policy at the start) the first
minibatch (and any later one before the first nonzero update) has π = μ exactly: D = 0,
r = 1, Ḋ = 0 and the coupled prediction vanishes with π − μ; every predictor abstains
and D can only rise. Such tokens (|D| ≤ ``TOL``) are counted apart; the ``signal``
metrics leave them out.

**§4.2 metric** (predictive-mask paper, arXiv 2607.10848 §4.2: unsafe-keep rate on the
tokens outside the trust region where the ratio and Ḋ directions disagree; the paper
reports 36.9% for the ratio and 34.2% for Ḋ over 61 seeds). δ is the ``quantile`` of D
over the unit's signal tokens (so that a stated share is outside); the realized change
is measured after the token's own step and after the whole multi-minibatch schedule.
"""

from __future__ import annotations

import numpy as np

from theorycheck.probes._analysis import predictions
from theorycheck.probes._mask import coupled_mask
from theorycheck.probes._metrics import TOL, outside, sign_metrics, signs, unsafe_keep
from theorycheck.probes._taylor import divergences

#: the matched controls, each with its score (None = random).
CONTROLS = ("random_matched", "ratio_matched", "predictive_matched")


def _top(score, candidates, n, rng) -> np.ndarray:
    """Boolean mask of the ``n`` candidates with the largest score (random ties)."""
    idx = np.flatnonzero(candidates.ravel())
    order = idx[np.lexsort((rng.random(len(idx)), -score.ravel()[idx]))]
    out = np.zeros(score.size, bool)
    out[order[:n]] = True
    return out.reshape(score.shape)


def matched_keeps(sub: dict, coupled_keep, delta: float, rng) -> dict:
    """Keep-masks (1 = keep) of the three controls for one minibatch.

    Args:
        sub: the minibatch rows' ``adv, d0, ratio, ddot_full`` arrays.
        coupled_keep: the coupled mask's keep-mask of the same rows.
        delta: δ (only tokens with D > δ can be removed).
        rng: a ``numpy.random.Generator``.

    Examples:
        >>> import numpy as np
        >>> sub = {"adv": np.array([[1., 1, -1, 0]]), "d0": np.ones((1, 4)),
        ...        "ratio": np.array([[1.2, 0.9, 0.8, 1.5]]),
        ...        "ddot_full": np.array([[-1., 2, 3, 9]])}
        >>> k = matched_keeps(sub, np.array([[0., 1, 1, 1]]), 0.0,
        ...                   np.random.default_rng(0))
        >>> k["ratio_matched"].tolist(), k["predictive_matched"].tolist()
        ([[0.0, 1.0, 1.0, 1.0]], [[1.0, 0.0, 1.0, 1.0]])
    """
    live = sub["adv"] != 0
    cand = live & outside(sub["d0"], delta)
    n = int((live & (np.asarray(coupled_keep) == 0)).sum())
    scores = {
        "random_matched": np.zeros_like(sub["d0"]),
        "ratio_matched": sub["adv"] * (sub["ratio"] - 1.0),
        "predictive_matched": sub["adv"] * sub["ddot_full"],
    }
    return {k: np.where(_top(s, cand, n, rng), 0.0, 1.0) for k, s in scores.items()}


def _score(records) -> dict:
    """masked share, kept mean ΔD / D after, unsafe keep over the steps' records."""
    live_n = sum(int(r["live"].sum()) for r in records)
    masked = sum(int((r["live"] & ~r["keep"]).sum()) for r in records)
    kept = [r["live"] & r["keep"] for r in records]
    after = np.concatenate([r["after"][k] for r, k in zip(records, kept)])
    change = np.concatenate([(r["after"] - r["d0"])[k] for r, k in zip(records, kept)])
    unsafe = np.concatenate(
        [signs((r["after"] - r["d0"])[k & r["out"]]) > 0 for r, k in zip(records, kept)]
    )
    mean = lambda x: float(x.mean()) if x.size else None  # noqa: E731
    return {
        "masked_share": masked / live_n if live_n else None,
        "kept_mean_d_after": mean(after),
        "kept_mean_change": mean(change),
        "unsafe_keep": mean(unsafe),
    }


def matched_controls(trainer, probe, *, delta: float = 0.0, seed: int = 0) -> dict:
    """Follows the trainer's schedule again and scores the three matched controls.

    The unmasked trajectory is recomputed step by step (deterministic: the same
    updates as the probe's; the global norm of each update is compared with the
    probe's, ``max_rel_update_norm_gap``), and at every step each control's own
    update is taken from the same state as the probe's masks.

    Args:
        trainer: the :class:`theorycheck.rl.Trainer` the probe ran on.
        probe: :func:`~theorycheck.probes.run_probe` output (with ``masks=True`` the
            coupled keep-masks are reused; otherwise they are recomputed).
        delta: δ of the masks.
        seed: seeds the random control.

    Returns:
        ``{control: {"masked_share", "kept_mean_d_after", "kept_mean_change",
        "unsafe_keep"}, "max_rel_update_norm_gap": float}``.
    """
    import optax

    rng = np.random.default_rng(seed)
    records: dict = {k: [] for k in CONTROLS}
    gap = 0.0
    for t, st in enumerate(trainer.steps()):  # the trainer's one loop
        rec, rows = probe["steps"][t], st.rows
        sub = {k: rec[k][rows] for k in ("adv", "d0", "ratio", "ddot_full", "ntk2")}
        if "masks" in rec:
            ckeep = rec["masks"]["coupled"]["keep"]
        else:
            ckeep = coupled_mask(sub["d0"], sub["ntk2"], sub["adv"], delta=delta)
        for name, keep in matched_keeps(sub, ckeep, delta, rng).items():
            _, grads = trainer.loss_and_grad(st.trainable, rows, keep)
            new, _, _ = trainer.update(st.trainable, st.opt_state, grads)
            records[name].append(
                {
                    "live": sub["adv"] != 0,
                    "keep": keep > 0,
                    "d0": sub["d0"],
                    "out": outside(sub["d0"], delta),
                    "after": divergences(trainer, new, rows),
                }
            )
        want = probe["update_norms"][t]
        got = float(optax.tree.norm(st.delta))
        gap = max(gap, abs(got - want) / want if want else abs(got))
    out = {k: _score(v) for k, v in records.items()}
    out["max_rel_update_norm_gap"] = gap
    return out


def recorded_controls(probe, *, delta: float = 0.0) -> dict:
    """The matched controls' scores from a probe run with ``controls_seed``
    (:func:`~theorycheck.probes.run_probe`: each control's branch computed in the
    probe's own pass); the same keys as :func:`matched_controls` but
    ``max_rel_update_norm_gap`` (no second pass over the schedule runs, so there is
    no retraced trajectory to compare).

    Returns:
        ``{control: {"masked_share", "kept_mean_d_after", "kept_mean_change",
        "unsafe_keep"}}``.
    """
    records: dict = {k: [] for k in CONTROLS}
    for rec in probe["steps"]:
        rows = rec["rows"]
        sub = {"adv": rec["adv"][rows], "d0": rec["d0"][rows]}
        for name in CONTROLS:
            branch = rec["controls"][name]
            records[name].append(
                {
                    "live": sub["adv"] != 0,
                    "keep": branch["keep"] > 0,
                    "d0": sub["d0"],
                    "out": outside(sub["d0"], delta),
                    "after": branch["d_after"],
                }
            )
    return {k: _score(v) for k, v in records.items()}


def _pooled(probe, horizon: str):
    """Per updated token: predictions, realized change over ``horizon`` (``step`` or
    ``run``), D before, and whether no earlier update has moved θ (the first
    minibatch, or a later one when the earlier ones had Â = 0 everywhere)."""
    traj = probe["trajectory"]
    preds: dict = {}
    real, d0, first = [], [], []
    norms = probe["update_norms"]
    for t, rec in enumerate(probe["steps"]):
        sel = rec["in_minibatch"] & (rec["adv"] != 0)
        end = t + 1 if horizon == "step" else len(traj) - 1
        real.append((traj[end] - traj[t])[sel])
        d0.append(rec["d0"][sel])
        # no update has moved θ yet (the minibatches before had Â = 0 everywhere)
        first.append(np.full(int(sel.sum()), not any(norms[:t])))
        for k, v in predictions(rec).items():
            preds.setdefault(k, []).append(v[sel])
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)  # noqa: E731
    return {k: cat(v) for k, v in preds.items()}, cat(real), cat(d0), cat(first)


def signal_split(probe) -> dict:
    """One-step sign metrics of every predictor on the signal tokens (|D| > ``TOL``)
    and the zero-signal tokens counted apart.

    Returns:
        ``{"signal": {predictor: sign_metrics}, "zero_signal": {"tokens",
        "before_first_update", "rise_share"}, "signal_tokens": n}``
        (``before_first_update``: the zero-signal tokens updated before any
        update had moved θ, i.e. exactly on-policy).
    """
    preds, real, d0, first = _pooled(probe, "step")
    zero = np.abs(d0) <= TOL
    live = ~zero
    rises = signs(real[zero]) > 0
    return {
        "signal": {k: sign_metrics(v[live], real[live]) for k, v in preds.items()},
        "signal_tokens": int(live.sum()),
        "zero_signal": {
            "tokens": int(zero.sum()),
            "before_first_update": int((zero & first).sum()),
            "rise_share": float(rises.mean()) if rises.size else None,
        },
    }


def paper_metric(probe, *, quantile: float = 0.5) -> dict:
    """The §4.2 unsafe-keep rates with δ = the ``quantile`` of D over the signal
    tokens, after the token's own step and after the whole schedule.

    Returns:
        ``{"delta", "quantile", "step": unsafe_keep(...), "run": unsafe_keep(...)}``
        (criteria ``ratio``, ``ddot``, ``ntk1``, ``ntk2``).
    """
    out: dict = {"quantile": quantile}
    for horizon in ("step", "run"):
        preds, real, d0, _ = _pooled(probe, horizon)
        live = np.abs(d0) > TOL
        if "delta" not in out:
            out["delta"] = float(np.quantile(d0[live], quantile)) if live.any() else 0
        out[horizon] = unsafe_keep(
            d0[live],
            preds["ratio"][live],
            preds["ddot_full"][live],
            real[live],
            delta=out["delta"],
            extra={"ntk1": preds["ntk1"][live], "ntk2": preds["ntk2"][live]},
        )
    return out
