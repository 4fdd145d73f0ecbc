"""The probe's fast path against the plain per-step loop: the same numbers (to float64
rounding) for every recorded array and every metric of the analysis, on the tiny
model; shared prompts, the one-pass-per-step bookkeeping, the masks' and the matched
controls' gradients from one head pullback and one compile for every seed of the same
shape."""

import jax
import numpy as np
import pytest

from theorycheck.models import logits_from_prefix
from theorycheck.probes import _fast, analyze_probe, run_probe
from theorycheck.probes._matched import recorded_controls
from theorycheck.probes._probe import ESTIMATORS as _ESTIMATORS
from theorycheck.rl import TrainConfig, Trainer

RTOL, ATOL = 1e-9, 1e-15  # float64 rounding through a few hundred operations
# ntk1 = <grad_z D, J dtheta> with grad_z D = pi - mu: each entry of pi - mu carries
# rounding of about 2 eps (pi_v + mu_v) (exp of a log_softmax), and sum (pi + mu) = 2,
# so one path's ntk1 is off by at most ~4 eps max_v |(J dtheta)_v|; two independent
# paths: 8. It matters where the step starts on-policy (pi = mu, ntk1 itself ~1e-16,
# below rounding of that size), e.g. step 1 of sgd_on_policy; ntk2 adds it unchanged.
K_NTK = 8


def _close(a, b, where="", atol=ATOL):
    """Recursive comparison: equal keys, equal ints/bools/None, close floats."""
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            _close(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            bad = ~np.isclose(b, a, rtol=RTOL, atol=atol, equal_nan=True)
            assert not bad.any(), (
                f"{where}: {bad.sum()} of {bad.size} beyond rtol {RTOL:g} + atol, first"
                f" at {np.argwhere(bad)[0]}: {b[bad][0]!r} vs {a[bad][0]!r}"
            )
    elif isinstance(a, bool | int | str) or a is None:
        assert a == b, where
    else:
        assert b == pytest.approx(a, rel=RTOL, abs=ATOL), where


CASES = {
    "two_epochs_masks": (TrainConfig(lr=1e-2, epochs=2), True, "bf16"),
    "sgd_on_policy": (
        TrainConfig(optimizer="sgd", lr=0.3, mismatch=False, minibatches=2),
        False,
        "f32",
    ),
}


@pytest.fixture(scope="module", params=list(CASES))
def both(request, tiny, rollouts_bf16, rollouts_f32):
    cfg, masks, engine = CASES[request.param]
    ro = rollouts_bf16 if engine == "bf16" else rollouts_f32
    tr = Trainer(tiny, ro, cfg, seed=0)
    plain = run_probe(tr, topk=5, delta=0.0, masks=masks, fast=False)
    fast = run_probe(tr, topk=5, delta=0.0, masks=masks, fast=True)
    return tr, plain, fast, masks


def _logit_moves(tr):
    """Per step, ``[B, N]`` max_v |(J Δθ)_v|: the scale of ntk1's rounding."""
    out = []
    for st in tr.steps():
        _, jz = jax.jvp(tr.logits, (st.trainable,), (st.delta,))
        out.append(np.max(np.abs(np.asarray(jz)), axis=-1))
    return out


def test_every_recorded_array_matches_the_plain_loop(both):
    tr, plain, fast, masks = both
    assert len(fast["steps"]) == len(plain["steps"])
    _close(plain["trajectory"], fast["trajectory"], "trajectory")
    _close(plain["update_norms"], fast["update_norms"], "update_norms")
    moves = _logit_moves(tr)
    assert len(moves) == len(plain["steps"])
    eps = np.finfo(np.float64).eps
    for t, (a, b) in enumerate(zip(plain["steps"], fast["steps"])):
        assert set(a) == set(b) and ("masks" in b) == masks
        for key in a:
            if key == "d0_check":
                continue  # a different route by design (module docstring of _fast)
            atol = ATOL + K_NTK * eps * moves[t] if key in ("ntk1", "ntk2") else ATOL
            _close(a[key], b[key], f"step {t}/{key}", atol)


def test_every_metric_of_the_analysis_matches_the_plain_loop(both):
    # sgd_on_policy: step 0's minibatch has only Â = 0 rows, so step 1 starts at θ_0
    # exactly on-policy, where D is float64 noise (~1e-16, either sign, different per
    # path); `outside` counts it as inside on both paths (it once decided the §4.2
    # metric's "outside" count: 1 token on the plain loop, 10 on the fast path)
    _, plain, fast, _ = both
    a, b = analyze_probe(plain), analyze_probe(fast)
    a["checks"].pop("max_abs_d0_jvp_minus_direct")
    check = b["checks"].pop("max_abs_d0_jvp_minus_direct")
    assert check <= 1e-12  # the start's direct pass agrees with the first JVP primal
    _close(a, b, "analysis")
    assert b["scale"]["updated_tokens"] > 0


def test_matched_controls_match_the_plain_loop(both):
    # the three controls' own updates (one forward and one head pullback for all
    # four gradients of a step) against the plain per-step loop of _matched
    from theorycheck.probes._matched import matched_controls

    tr, plain, fast, _ = both
    a = matched_controls(tr, plain, delta=0.0, seed=7)
    b = _fast.matched_controls(tr, fast, delta=0.0, seed=7)
    gap_a, gap_b = a.pop("max_rel_update_norm_gap"), b.pop("max_rel_update_norm_gap")
    assert gap_a <= 1e-12 and gap_b <= 1e-9
    _close(a, b, "controls")


def _restricted(full, probe):
    """The all-rows probe ``full`` with ``probe``'s probed rows and setting: what the
    analysis of ``probe`` must equal."""
    steps = [
        {**a, "probed": b["probed"]} for a, b in zip(full["steps"], probe["steps"])
    ]
    return {
        **full,
        "steps": steps,
        **{k: probe[k] for k in ("probe_rows", "others_rows")},
    }


@pytest.mark.parametrize("others", [0, 3])
def test_minibatch_rows_give_the_all_rows_numbers(both, others):
    # probe_rows="minibatch": every recorded number on the probed rows, the realized
    # D wherever the analysis reads it, the masks, every metric of the analysis (with
    # the same rows probed) and the matched controls equal the all-rows fast path's
    from theorycheck.probes._matched import matched_controls

    tr, plain, fast, masks = both
    kw = dict(topk=5, delta=0.0, masks=masks, probe_rows="minibatch")
    seed = 7 if masks else None  # the matched controls in the same pass
    mb = run_probe(tr, others_rows=others, others_seed=1, controls_seed=seed, **kw)
    assert (mb["probe_rows"], mb["others_rows"]) == ("minibatch", others)
    m, b = len(tr.minibatch_rows), len(tr.minibatch_rows[0])
    traj, want = mb["trajectory"], fast["trajectory"]
    for t, (a, r) in enumerate(zip(fast["steps"], mb["steps"])):
        rows, probed = r["rows"], r["probed"]
        assert probed[:, 0].sum() == b + others and probed[rows].all()
        for key in ("d0", "ntk1", "ntk2", "ratio", *(f"ddot_{e}" for e in _ESTIMATORS)):
            _close(a[key][probed], r[key][probed], f"step {t}/{key}")
            assert np.isnan(r[key][~probed]).all()
        for key in ("epoch", "step", "rows", "adv", "in_minibatch"):
            _close(a[key], r[key], f"step {t}/{key}")
        # the realized D the horizons read: before and after the step, epoch end, end
        ends = (t, t + 1, (r["epoch"] + 1) * m, len(traj) - 1)
        for end in ends:
            _close(want[end][probed], traj[end][probed], f"traj {end} at step {t}")
        _close(a.get("masks"), r.get("masks"), f"step {t}/masks")
    _close(fast["update_norms"], mb["update_norms"], "update_norms")
    x, y = analyze_probe(_restricted(fast, mb)), analyze_probe(mb)
    x["checks"].pop("max_abs_d0_jvp_minus_direct")
    assert y["checks"].pop("max_abs_d0_jvp_minus_direct") <= 1e-12
    _close(x, y, "analysis")
    assert y["probed"]["others_tokens"] == others * tr.batch.sampled.shape[1] * len(
        traj[1:]
    )
    assert (y["others"] is None) == (others == 0)
    a = matched_controls(tr, plain, delta=0.0, seed=7)
    a.pop("max_rel_update_norm_gap")
    if masks:
        _close(a, recorded_controls(mb, delta=0.0), "controls in the probe's pass")
    if others == 0:
        c = _fast.matched_controls(tr, mb, delta=0.0, seed=7)
        assert c.pop("max_rel_update_norm_gap") <= 1e-9
        _close(a, c, "controls")


def test_controls_in_the_probes_pass_match_the_plain_loop(both):
    # controls_seed: the three controls' branches from each step's own state in the
    # probe's pass (no second pass); the probe's own numbers are unchanged
    from theorycheck.probes._matched import matched_controls

    tr, plain, fast, masks = both
    if not masks:
        with pytest.raises(ValueError):
            run_probe(tr, topk=5, masks=False, controls_seed=7)
        return
    p = run_probe(tr, topk=5, delta=0.0, masks=True, controls_seed=7)
    for t, (a, b) in enumerate(zip(fast["steps"], p["steps"])):
        assert set(b) == set(a) | {"controls"}
        for key in a:
            _close(a[key], b[key], f"step {t}/{key}")
    _close(fast["trajectory"], p["trajectory"], "trajectory")
    want = matched_controls(tr, plain, delta=0.0, seed=7)
    want.pop("max_rel_update_norm_gap")
    _close(want, recorded_controls(p, delta=0.0), "controls")


def test_probe_rows_are_checked(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=0)
    b, mb = tr.batch.sampled.shape[0], len(tr.minibatch_rows[0])
    for kw in (
        dict(probe_rows="some"),
        dict(probe_rows="all", others_rows=1),
        dict(probe_rows="minibatch", others_rows=b - mb + 1),
        dict(probe_rows="minibatch", others_rows=-1),
        dict(probe_rows="minibatch", fast=False),
    ):
        with pytest.raises(ValueError):
            run_probe(tr, **kw)


def test_the_start_and_the_end_of_the_trajectory_are_direct_passes(both):
    tr, _, fast, _ = both
    from theorycheck.probes import divergences

    np.testing.assert_allclose(
        fast["trajectory"][0], divergences(tr, tr.trainable0), rtol=RTOL, atol=ATOL
    )
    np.testing.assert_allclose(
        fast["steps"][0]["d0"], fast["steps"][0]["d0_check"], rtol=RTOL, atol=ATOL
    )


def test_shared_prompts_give_the_full_sequence_logits(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=1)
    lay = _fast.layout(tr)
    assert lay.shared and lay.prefix_hidden.shape[0] == len(np.unique(lay.group))
    assert lay.prefix_hidden.shape[1] % _fast.BUCKET == 0
    z = logits_from_prefix(
        tr.trainable0,
        tr.head_params,
        tr.model_config,
        lay.prefix_hidden,
        lay.prefix_mask,
        lay.hidden,
        lay.group,
    )
    np.testing.assert_allclose(
        np.asarray(z), np.asarray(tr.logits(tr.trainable0)), rtol=1e-12, atol=1e-12
    )


def test_unshared_prompts_fall_back_to_one_prefix_per_row(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=1)
    b = tr.batch
    # make row 0's prompt differ from its group's: the layout must not share it
    start = tr.rows[0]
    hidden = b.hidden.at[0, start - 1].add(1.0)
    tr.batch = b._replace(hidden=hidden)
    lay = _fast.layout(tr)
    assert not lay.shared and lay.prefix_hidden.shape[0] == b.hidden.shape[0]


def test_one_compile_serves_every_seed_of_the_same_shape(tiny, rollouts_bf16, both):
    # `both` ran first: the fast path's programs are compiled for this shape
    cfg = TrainConfig(lr=1e-2, epochs=2)
    run_probe(Trainer(tiny, rollouts_bf16, cfg, seed=3), topk=5, masks=True)
    sizes = [f._cache_size() for f in (_fast._grads, _fast._probe_pass)]
    run_probe(Trainer(tiny, rollouts_bf16, cfg, seed=4), topk=5, masks=True)
    assert [f._cache_size() for f in (_fast._grads, _fast._probe_pass)] == sizes


def test_phase_timings_are_recorded(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(lr=1e-2), seed=0)
    timings: dict = {}
    run_probe(tr, topk=5, masks=True, timings=timings)
    assert {"grad", "jvp", "masks", "realized", "update"} <= set(timings)
    assert all(v >= 0 for v in timings.values())
    assert jax.numpy.isfinite(sum(timings.values()))
