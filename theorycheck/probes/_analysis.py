r"""Tables from one probe run: agreement next to base rates, failure decomposition.

Predictions of the sign of ΔD for a token updated at step t (Â ≠ 0, in the step's
minibatch):

=========================  =============================================================
predictor                  predicted ΔD (sign)
=========================  =============================================================
``always_rise``            +1 (the trivial baseline; its agreement is the base rate)
``ratio``                  :math:`\hat A (r - 1)` (PPO/DPPO direction criterion)
``ddot_<estimator>``       :math:`\hat A \dot D` (predictive-mask paper; exact, top-K)
``ntk1``                   :math:`\langle\nabla_z D, J\Delta\theta\rangle` (coupled)
``ntk2``                   ``ntk1`` + :math:`\tfrac12 g''(0)` from the same JVP
=========================  =============================================================

Horizons: ``step`` (the step's own update), ``epoch`` (to the end of its epoch: later
minibatches' updates drift it), ``run`` (to the end of the run, across epochs). The
decomposition separates cross-token coupling (tabular vs NTK-coupled first order,
same step), linearization (NTK first / second order vs realized, same step) and
multi-step drift (sign of the one-step change vs the change to the end of the epoch).
"""

from __future__ import annotations

import numpy as np

from theorycheck.probes._metrics import (
    ESTIMATORS,
    MASKS,
    outside,
    sign_metrics,
    signs,
    unsafe_keep,
)

#: the sign predictors the probe analysis scores (the trivial one first).
PREDICTORS = (
    "always_rise",
    "ratio",
    *(f"ddot_{e}" for e in ESTIMATORS),
    "ntk1",
    "ntk2",
)
HORIZONS = ("step", "epoch", "run")


def predictions(rec) -> dict[str, np.ndarray]:
    """Every predictor's predicted ΔD (its sign is what is scored) of one step."""
    adv = rec["adv"]
    out = {
        "always_rise": np.ones_like(adv),
        "ratio": adv * (rec["ratio"] - 1.0),
        "ntk1": rec["ntk1"],
        "ntk2": rec["ntk2"],
    }
    for est in ESTIMATORS:
        out[f"ddot_{est}"] = adv * rec[f"ddot_{est}"]
    return out


def _pool(probe, select, horizon, steps=None):
    """Concatenated predictions and realized changes over ``steps`` (indices into the
    schedule; all by default) for the chosen tokens."""
    traj = probe["trajectory"]
    m = max(r["step"] for r in probe["steps"]) + 1
    preds = {k: [] for k in PREDICTORS}
    real, d0 = [], []
    steps = range(len(probe["steps"])) if steps is None else steps
    for t in steps:
        rec = probe["steps"][t]
        end = {"step": t + 1, "epoch": (rec["epoch"] + 1) * m, "run": len(traj) - 1}
        sel = select(rec)
        real.append((traj[end[horizon]] - traj[t])[sel])
        d0.append(rec["d0"][sel])
        for k, v in predictions(rec).items():
            preds[k].append(v[sel])
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)
    return {k: cat(v) for k, v in preds.items()}, cat(real), cat(d0)


def _updated(rec):
    return rec["in_minibatch"] & (rec["adv"] != 0)


def _others(rec):
    """The step's probed off-minibatch tokens (every one with ``probe_rows="all"``)."""
    return ~rec["in_minibatch"] & rec["probed"]


def _agree(a, b) -> float | None:
    a, b = signs(a), signs(b)
    both = (a != 0) & (b != 0)
    return float(np.mean(a[both] == b[both])) if both.any() else None


def _median_rel(pred, real) -> float | None:
    live = signs(real) != 0
    if not live.any():
        return None
    return float(np.median(np.abs(pred[live] - real[live]) / np.abs(real[live])))


def _mask_table(probe, delta) -> dict:
    out = {}
    for name in MASKS:
        masked, kept_after, kept_change, unsafe, live_n = 0, [], [], [], 0
        for rec in probe["steps"]:
            if "masks" not in rec:
                return {}
            rows = rec["rows"]
            branch = rec["masks"][name]
            live = rec["adv"][rows] != 0
            keep = branch["keep"] > 0
            d0 = rec["d0"][rows]
            change = branch["d_after"] - d0
            live_n += int(live.sum())
            masked += int((live & ~keep).sum())
            kept = live & keep
            kept_after.append(branch["d_after"][kept])
            kept_change.append(change[kept])
            unsafe.append(signs(change[kept & outside(d0, delta)]) > 0)
        after, change = np.concatenate(kept_after), np.concatenate(kept_change)
        unsafe = np.concatenate(unsafe)
        out[name] = {
            "masked_share": masked / live_n if live_n else None,
            "kept_mean_d_after": float(after.mean()) if after.size else None,
            "kept_mean_change": float(change.mean()) if change.size else None,
            "unsafe_keep": float(unsafe.mean()) if unsafe.size else None,
        }
    return out


def analyze_probe(probe, *, delta: float = 0.0) -> dict:
    """Every table of one probe run (JSON-ready floats and ints).

    Args:
        probe: the output of :func:`~theorycheck.probes.run_probe`.
        delta: δ of the unsafe-keep rate and the masks.

    Returns:
        ``{"metrics": {horizon: {predictor: sign_metrics}}, "by_step",
        "others", "decomposition", "unsafe_keep", "masks", "scale", "checks",
        "probed"}``. ``others``: the one-step sign metrics of the off-minibatch
        tokens each step probed (every one with ``probe_rows="all"``; a seeded
        sample of ``others_rows`` rows per step with ``"minibatch"``; None when no
        off-minibatch token was probed: not measured). ``probed``: the probe's
        ``probe_rows``, ``others_rows`` (off-minibatch rows per step) and
        ``others_tokens`` (off-minibatch tokens probed, summed over the steps).
        ``scale/median_d0`` and ``checks`` are over the probed tokens of every
        step (every token at every step with ``"all"``).
    """
    metrics = {}
    for horizon in HORIZONS:
        preds, real, _ = _pool(probe, _updated, horizon)
        metrics[horizon] = {k: sign_metrics(v, real) for k, v in preds.items()}
    preds, real, d0 = _pool(probe, _updated, "step")
    _, real_epoch, _ = _pool(probe, _updated, "epoch")
    _, real_run, _ = _pool(probe, _updated, "run")
    by_step = []
    for t in range(len(probe["steps"])):
        p, r, _ = _pool(probe, _updated, "step", steps=[t])
        by_step.append({k: sign_metrics(v, r) for k, v in p.items()})
    o_preds, o_real, _ = _pool(probe, _others, "step")
    o_tokens = int(sum(_others(r).sum() for r in probe["steps"]))
    others = None  # not measured: no off-minibatch token was probed
    if o_tokens:
        others = {
            k: sign_metrics(o_preds[k], o_real) for k in ("always_rise", "ntk1", "ntk2")
        }
    decomposition = {
        "coupling_tabular_vs_ntk1_sign_agreement": _agree(
            preds["ddot_full"], preds["ntk1"]
        ),
        "linearization_ntk1_vs_step_sign_agreement": _agree(preds["ntk1"], real),
        "linearization_ntk2_vs_step_sign_agreement": _agree(preds["ntk2"], real),
        "linearization_ntk1_median_rel_error": _median_rel(preds["ntk1"], real),
        "linearization_ntk2_median_rel_error": _median_rel(preds["ntk2"], real),
        "drift_step_vs_epoch_sign_agreement": _agree(real, real_epoch),
        "drift_step_vs_run_sign_agreement": _agree(real, real_run),
    }
    unsafe = unsafe_keep(
        d0,
        preds["ratio"],
        preds["ddot_full"],
        real,
        delta=delta,
        extra={"ntk1": preds["ntk1"], "ntk2": preds["ntk2"]},
    )
    d0_all = np.concatenate([r["d0"][r["probed"]] for r in probe["steps"]])
    check = np.concatenate(
        [(r["d0"] - r["d0_check"])[r["probed"]] for r in probe["steps"]]
    )
    return {
        "metrics": metrics,
        "by_step": by_step,
        "others": others,
        "decomposition": decomposition,
        "unsafe_keep": unsafe,
        "masks": _mask_table(probe, delta),
        "scale": {
            "median_d0": float(np.median(d0_all)),
            "median_abs_step_change": float(np.median(np.abs(real)))
            if real.size
            else None,
            "updated_tokens": int(real.size),
        },
        "checks": {"max_abs_d0_jvp_minus_direct": float(np.max(np.abs(check)))},
        "probed": {
            "probe_rows": probe["probe_rows"],
            "others_rows": probe["others_rows"],
            "others_tokens": o_tokens,
        },
    }
