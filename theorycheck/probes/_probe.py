r"""The sign-agreement probe: per-token ΔD predictions against real multi-step updates.

Along the trainer's real schedule (anchor μ fixed, M minibatch steps per epoch, E
epochs), before each step t with update :math:`\Delta\theta_t` the probe records for
every token of the batch: D at :math:`\theta_t`; the ratio r and the tabular
:math:`\dot D` (exact and each top-K estimator, ``theorycheck.numeric.token_stats``);
the NTK-coupled first and second derivative of D along :math:`\Delta\theta_t`
(:mod:`._taylor`); and D after the step. D is recorded after every step, so the
realized change over any horizon (one step, to the end of the epoch, to the end of
the run) is available. Optionally, at every step the ratio mask, the paper's
predictive mask and the coupled mask (:mod:`._mask`) are each applied to the same
minibatch from the same state, and their own updates are measured (side branches;
the trajectory follows the unmasked update). With ``probe_rows="minibatch"`` the
predictions are recorded only for each step's minibatch rows (plus a seeded sample of
off-minibatch rows) and the realized D only where the analysis reads it
(:func:`run_probe`).
"""

from __future__ import annotations

import numpy as np
import optax

from theorycheck.numeric import MaskConfig, token_stats
from theorycheck.probes._fast import _Clock
from theorycheck.probes._mask import coupled_mask
from theorycheck.probes._metrics import ESTIMATORS, MASKS, outside, signs
from theorycheck.probes._taylor import divergences, predict_change


def _keeps(rec, delta):
    """The keep-masks (1 = keep) of the four branches from a step's minibatch rows."""
    adv = rec["adv"]
    out = outside(rec["d0"], delta)
    live = adv != 0
    clips = {
        "none": np.zeros_like(live),
        "ratio": out & (signs(adv * (rec["ratio"] - 1)) > 0),
        "predictive": out & (signs(adv * rec["ddot_full"]) > 0),
    }
    keeps = {k: np.where(v & live, 0.0, 1.0) for k, v in clips.items()}
    keeps["coupled"] = coupled_mask(rec["d0"], rec["ntk2"], adv, delta=delta)
    return keeps


def _mask_branches(trainer, trainable, opt_state, rows, rec, delta, d_after_none):
    """Each mask's own update from the same state: share masked, D and ΔD of kept."""
    keeps = _keeps(rec, delta)
    out = {}
    for name in MASKS:
        keep = keeps[name]
        if name == "none":
            after = d_after_none
        else:
            _, grads = trainer.loss_and_grad(trainable, rows, keep)
            new, _, _ = trainer.update(trainable, opt_state, grads)
            after = divergences(trainer, new, rows)
        out[name] = {"keep": keep, "d_after": after}
    return out


def run_probe(
    trainer,
    *,
    topk: int = 20,
    delta: float = 0.0,
    masks: bool = True,
    fast: bool = True,
    timings: dict | None = None,
    probe_rows: str = "all",
    others_rows: int = 0,
    others_seed: int = 0,
    controls_seed: int | None = None,
):
    r"""Runs the trainer's schedule and records every per-token quantity.

    Args:
        trainer: a prepared :class:`theorycheck.rl.Trainer`.
        topk: K of the top-K Ḋ estimators.
        delta: δ of the masks (tokens with D − δ > 1e-12 are outside the trust
            region, :func:`~theorycheck.probes.outside`).
        masks: also evaluate the three masks' own updates at every step.
        fast: the fast path (:mod:`._fast`: shared prompts, one pass per step, the
            masks' gradients from one forward; the same numbers to float64 rounding);
            False runs the plain per-step loop (the reference the fast path is tested
            and benchmarked against).
        timings: if a dict, CPU seconds per phase are added to it (``grad``,
            ``update``, ``jvp``, ``stats``, ``realized``, ``masks``, ``layout``;
            each call is waited for, which costs a little overlap).
        probe_rows: which rows step t predicts (the predictions ``d0, ntk1,
            ntk2, ratio, ddot_*`` at :math:`\theta_t` along :math:`\Delta\theta_t`).
            ``"all"``: every row of the batch, so every token is predicted at every
            step, E·M times, E·M − E of them as an off-minibatch token (the
            analysis's ``others``). ``"minibatch"`` (fast path only): the step's
            minibatch rows plus ``others_rows`` off-minibatch rows (a seeded draw
            without replacement per step, ``numpy.random.default_rng(others_seed)``
            in schedule order), so every updated token is predicted once, at its own
            step, with the same numbers as ``"all"``; the realized D is then
            computed by float64 forward passes only where the analysis reads it:
            after step t over step t's probed rows, and over every row at the end of
            each epoch (the ``epoch`` and ``run`` horizons). Entries not computed
            are NaN (``probed`` says which are); with ``others_rows = 0`` the
            ``others`` metrics are not measured (the analysis reports None).
        others_rows: off-minibatch rows probed per step with ``"minibatch"``
            (0 ≤ others_rows ≤ B − b); must be 0 with ``"all"``.
        others_seed: seeds the draw of the off-minibatch rows.
        controls_seed: with ``masks`` on the fast path, also the three matched
            controls (:mod:`._matched`) from every step's own state, in the same
            pass: their keep-masks are :func:`~._matched.matched_keeps` of the
            step's rows and coupled keep-mask, drawn by
            ``numpy.random.default_rng(controls_seed)`` in schedule order (the draws
            of :func:`~._matched.matched_controls` with ``seed=controls_seed``), their
            gradients three pullbacks from the step's head-input cotangent, their D
            after the step one vmapped forward; recorded per step as ``controls``
            (scored by :func:`~._matched.recorded_controls`). None: not computed.

    Returns:
        ``{"steps": [record, ...], "trajectory": [E·M + 1, B, N] D after each step,
        "update_norms": [E·M] global norms of the updates, "probe_rows",
        "others_rows"}`` (``others_rows`` is B − b with ``"all"``);
        a record holds the step's ``epoch``, ``step``, ``rows`` and ``[B, N]`` arrays
        ``d0, ntk1, ntk2, ratio, ddot_<estimator>, adv``, ``in_minibatch``,
        ``probed``, plus ``masks`` and ``controls`` (minibatch rows only) when
        asked.
    """
    b = trainer.batch.sampled.shape[0]
    mb = len(trainer.minibatch_rows[0])
    if probe_rows not in ("all", "minibatch"):
        raise ValueError(f"probe_rows = {probe_rows!r}: 'all' or 'minibatch'")
    if not 0 <= others_rows <= b - mb or (probe_rows == "all" and others_rows):
        raise ValueError(
            f"others_rows = {others_rows}: 0 with 'all', 0..{b - mb} with 'minibatch'"
        )
    if controls_seed is not None and not (fast and masks):
        raise ValueError("controls_seed needs masks=True on the fast path")
    rng = None if controls_seed is None else np.random.default_rng(controls_seed)
    if probe_rows == "minibatch":
        if not fast:
            raise ValueError("probe_rows = 'minibatch' runs on the fast path only")
        return _run_fast_rows(
            trainer, topk, delta, masks, timings, others_rows, others_seed, rng
        )
    if fast:
        return _run_fast(trainer, topk, delta, masks, timings, rng)
    clock = _Clock(timings)
    batch = trainer.batch
    blogp = np.asarray(batch.behavior_logp)
    sampled = np.asarray(batch.sampled)
    adv = np.asarray(batch.adv)
    trajectory = [clock("realized", divergences, trainer, trainer.trainable0)]
    steps, norms = [], []
    for st in trainer.steps(timer=clock):  # the trainer's one loop (theorycheck.rl)
        trainable, rows = st.trainable, st.rows
        d0, first, second = clock("jvp", predict_change, trainer, trainable, st.delta)
        norms.append(float(optax.tree.norm(st.delta)))
        stats = clock("stats", _stats, trainer, trainable, blogp, sampled, adv, topk)
        parts = {f"ddot_{e}": np.asarray(stats[f"ddot_kl_{e}"]) for e in ESTIMATORS}
        parts["ratio"] = np.asarray(stats["ratio"])
        rec = _record(
            st.epoch,
            st.step,
            rows,
            adv,
            sampled.shape,
            d0,
            trajectory[-1],
            first,
            first + 0.5 * second,
            parts,
        )
        after = clock("realized", divergences, trainer, st.new_trainable)
        if masks:
            sub = {k: rec[k][rows] for k in _MASK_INPUTS}
            rec["masks"] = clock(
                "masks",
                _mask_branches,
                trainer,
                trainable,
                st.opt_state,
                rows,
                sub,
                delta,
                after[rows],
            )
        steps.append(rec)
        trajectory.append(after)
    return _result(trainer, steps, np.stack(trajectory), norms)


def _result(trainer, steps, trajectory, norms, rows="all", others=None) -> dict:
    b = trainer.batch.sampled.shape[0]
    if others is None:
        others = b - len(trainer.minibatch_rows[0])
    return {
        "steps": steps,
        "trajectory": trajectory,
        "update_norms": norms,
        "probe_rows": rows,
        "others_rows": others,
    }


def _stats(trainer, trainable, blogp, sampled, adv, topk):
    return token_stats(
        blogp,
        np.asarray(trainer.logits(trainable)),
        sampled,
        adv,
        config=MaskConfig(topk=topk),
        parts=("full", "topk"),
        check=False,
    )


_MASK_INPUTS = ("adv", "d0", "ratio", "ddot_full", "ntk2")


def _record(
    epoch, step, rows, adv, shape, d0, d0_check, first, ntk2, stats, probed=None
):
    in_mb = np.zeros(shape[0], bool)
    in_mb[rows] = True
    live = np.ones(shape[0], bool)
    if probed is not None:
        live[:] = False
        live[probed] = True
    rec = {
        "epoch": epoch,
        "step": step,
        "rows": np.asarray(rows),
        "in_minibatch": np.broadcast_to(in_mb[:, None], shape),
        "probed": np.broadcast_to(live[:, None], shape),
        "adv": adv,
        "d0": d0,
        "d0_check": d0_check,
        "ntk1": first,
        "ntk2": ntk2,
        "ratio": stats["ratio"],
    }
    for est in ESTIMATORS:
        rec[f"ddot_{est}"] = stats[f"ddot_{est}"]
    return rec


def _keep_branches(fp, trainable, opt_state, step, e, keeps, names, out):
    """Fills ``out[name]["d_after"]`` for each of ``names`` whose keep-mask clips
    something: their gradients as one K-sized call from the head-input cotangent
    ``e`` of the step's own gradient (no head product), their updates vmapped and
    their D after the step one vmapped forward. A keep-mask of all ones has the
    unmasked update (``d_after`` stays None, filled in from the trajectory); when
    none clips anything the step runs no branch work."""
    if all(np.all(keeps[k] == 1.0) for k in names):
        return out
    grads = fp.grads_from(trainable, step, e, np.stack([keeps[k] for k in names]))
    news = fp.update_many(trainable, opt_state, grads)
    afters = fp.minibatch_divergences(news, step)
    for i, name in enumerate(names):
        if not np.all(keeps[name] == 1.0):
            out[name]["d_after"] = afters[i]
    return out


def _fast_masks(fp, trainable, opt_state, step, e, sub, delta):
    """The three masks' branches (:func:`_keep_branches`; the ``none`` branch is
    the trajectory's)."""
    keeps = _keeps(sub, delta)
    out = {name: {"keep": keeps[name], "d_after": None} for name in MASKS}
    return _keep_branches(fp, trainable, opt_state, step, e, keeps, MASKS[1:], out)


def _fast_controls(fp, trainable, opt_state, step, e, sub, ckeep, delta, rng):
    """The three matched controls' branches (:mod:`._matched`) from the step's
    state, like :func:`_fast_masks`."""
    from theorycheck.probes._matched import CONTROLS, matched_keeps

    keeps = matched_keeps(sub, ckeep, delta, rng)
    out = {name: {"keep": keeps[name], "d_after": None} for name in CONTROLS}
    return _keep_branches(fp, trainable, opt_state, step, e, keeps, CONTROLS, out)


def _branches(fp, s, rec, delta, rng):
    """The step's mask branches and, with ``rng``, its matched controls."""
    sub = {k: rec[k][s.rows] for k in _MASK_INPUTS}
    args = (fp, s.trainable, s.opt_state, s.step, s.value)
    rec["masks"] = fp.clock("masks", _fast_masks, *args, sub, delta)
    if rng is not None:
        ckeep = rec["masks"]["coupled"]["keep"]
        rec["controls"] = fp.clock(
            "controls", _fast_controls, *args, sub, ckeep, delta, rng
        )


def _run_fast(trainer, topk, delta, masks, timings, rng=None):
    from theorycheck.probes._fast import FastProbe, first_of

    fp = FastProbe(trainer, topk=topk, timings=timings)
    clock = fp.clock
    adv = np.asarray(trainer.batch.adv)
    shape = adv.shape
    trainable = trainer.trainable0
    ones = np.ones((1, len(trainer.minibatch_rows[0]), shape[1]))
    trajectory = [clock("realized", fp.divergences, [trainable])[0]]
    steps, norms = [], []

    def grad_fn(tr, step, _rows):
        _, grads, e = fp.grads(tr, step, ones)
        return e, first_of(grads)  # e: the head-input cotangent the masks reuse

    for s in trainer.steps(grad_fn=grad_fn, update_fn=fp.update, timer=clock):
        p = clock("jvp", fp.probe_pass, s.trainable, s.delta)
        if steps:
            trajectory.append(p["d0"])  # D after the previous step
        norms.append(float(optax.tree.norm(s.delta)))
        rec = _record(
            s.epoch,
            s.step,
            s.rows,
            adv,
            shape,
            p["d0"],
            trajectory[-1],
            p["first"],
            p["first"] + 0.5 * p["second"],
            p,
        )
        if masks:
            _branches(fp, s, rec, delta, rng)
        steps.append(rec)
        trainable = s.new_trainable
    trajectory.append(clock("realized", fp.divergences, [trainable])[0])
    _fill_masks(steps, trajectory)
    return _result(trainer, steps, np.stack(trajectory), norms)


def _fill_masks(steps, trajectory):
    for t, rec in enumerate(steps):
        for kind in ("masks", "controls"):
            for branch in rec.get(kind, {}).values():
                if branch["d_after"] is None:  # the unmasked update's D after it
                    branch["d_after"] = trajectory[t + 1][rec["rows"]]


def probed_rows(trainer, others_rows: int, seed: int = 0) -> list[np.ndarray]:
    """The rows each step of the schedule probes with ``probe_rows="minibatch"``
    (:func:`run_probe`): its minibatch rows and ``others_rows`` of the other rows,
    drawn without replacement by ``numpy.random.default_rng(seed)`` step after
    step in schedule order (``Trainer.schedule``: E epochs of the M minibatches);
    sorted row indices."""
    rng = np.random.default_rng(seed)
    b = trainer.batch.sampled.shape[0]
    out = []
    for rows in list(trainer.minibatch_rows) * trainer.config.epochs:
        rest = np.setdiff1d(np.arange(b), rows)
        extra = rng.choice(rest, others_rows, replace=False) if others_rows else []
        out.append(np.sort(np.concatenate([rows, extra]).astype(int)))
    return out


def _run_fast_rows(trainer, topk, delta, masks, timings, others_rows, seed, rng):
    r""":func:`_run_fast` over each step's probed rows (:func:`probed_rows`).

    Predictions: one probe pass per step over its probed rows. Realized D (NaN
    where not computed): at θ_0 over step 0's probed rows (a direct pass, the
    ``d0_check`` of step 0); at :math:`\theta_t`, t ≥ 1, the probe pass's primal
    over step t's probed rows, and a forward after step t − 1 over its probed rows
    (every row at the end of an epoch)."""
    from theorycheck.probes._fast import FastProbe, first_of

    sets = probed_rows(trainer, others_rows, seed)
    fp = FastProbe(trainer, topk=topk, timings=timings, subset=len(sets[0]))
    clock = fp.clock
    adv = np.asarray(trainer.batch.adv)
    shape = adv.shape
    m = len(trainer.minibatch_rows)
    trajectory = np.full((len(sets) + 1, *shape), np.nan)
    trajectory[0] = clock("realized", fp.divergences, [trainer.trainable0], sets[0])[0]
    steps, norms = [], []
    ones = np.ones((1, len(trainer.minibatch_rows[0]), shape[1]))

    def grad_fn(tr, step, _rows):
        _, grads, e = fp.grads(tr, step, ones)
        return e, first_of(grads)

    for t, s in enumerate(
        trainer.steps(grad_fn=grad_fn, update_fn=fp.update, timer=clock)
    ):
        idx = sets[t]
        p = clock("jvp", fp.probe_pass, s.trainable, s.delta, idx)
        if t:  # D at θ_t on the probed rows: the pass's primal
            trajectory[t][idx] = p["d0"][idx]
        check = np.full(shape, np.nan)
        check[idx] = trajectory[t][idx]
        norms.append(float(optax.tree.norm(s.delta)))
        rec = _record(
            s.epoch,
            s.step,
            s.rows,
            adv,
            shape,
            p["d0"],
            check,
            p["first"],
            p["first"] + 0.5 * p["second"],
            p,
            probed=idx,
        )
        if masks:
            _branches(fp, s, rec, delta, rng)
        steps.append(rec)
        # D after the step: over every row at the end of an epoch (the epoch and
        # run horizons), else over this step's probed rows (the step horizon)
        rows_after = None if (t + 1) % m == 0 else idx
        after = clock("realized", fp.divergences, [s.new_trainable], rows_after)[0]
        trajectory[t + 1] = after
    _fill_masks(steps, trajectory)
    return _result(trainer, steps, trajectory, norms, "minibatch", others_rows)
