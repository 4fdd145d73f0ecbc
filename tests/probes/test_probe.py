"""The probe along a real schedule: bookkeeping, the on-policy start, analysis."""

import numpy as np
import pytest

from theorycheck.probes import PREDICTORS, analyze_probe, run_probe, signs
from theorycheck.rl import TrainConfig, Trainer


@pytest.fixture(scope="module")
def probe(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(lr=1e-2, epochs=2), seed=0)
    return tr, run_probe(tr, topk=5, delta=0.0)


def test_probe_records_every_step(probe):
    tr, p = probe
    assert len(p["steps"]) == 8 and p["trajectory"].shape == (9, 16, 5)
    assert [(r["epoch"], r["step"]) for r in p["steps"]] == [
        (e, s) for e in range(2) for s in range(4)
    ]
    for t, rec in enumerate(p["steps"]):
        # two routes to D before the step: the JVP's primal and a direct evaluation
        # (the start; later steps' D is the JVP primal itself, theorycheck.probes._fast)
        np.testing.assert_allclose(rec["d0"], p["trajectory"][t], rtol=1e-9, atol=1e-15)
        assert rec["in_minibatch"].sum() == 4 * 5
    assert max(p["update_norms"]) > 0 and all(np.isfinite(p["update_norms"]))


def test_unmasked_branch_is_the_trajectory(probe):
    _, p = probe
    for t, rec in enumerate(p["steps"]):
        after = rec["masks"]["none"]["d_after"]
        np.testing.assert_array_equal(after, p["trajectory"][t + 1][rec["rows"]])


def test_analysis_reports_base_rates_next_to_agreement(probe):
    _, p = probe
    a = analyze_probe(p)
    for horizon in ("step", "epoch", "run"):
        m = a["metrics"][horizon]
        assert set(m) == set(PREDICTORS)
        assert m["always_rise"]["agreement"] == m["always_rise"]["base_rate"]
    assert a["checks"]["max_abs_d0_jvp_minus_direct"] <= 1e-12
    assert set(a["masks"]) == {"none", "ratio", "predictive", "coupled"}
    assert a["masks"]["none"]["masked_share"] == 0.0


def test_on_policy_start_gives_no_first_order_signal(tiny, rollouts_f32):
    tr = Trainer(tiny, rollouts_f32, TrainConfig(mismatch=False, lr=1e-2), seed=0)
    p = run_probe(tr, topk=5, masks=False)
    assert np.all(np.abs(p["trajectory"][0]) <= 1e-12)  # π = μ up to rounding
    # the first step that moves the weights still starts exactly on-policy
    t = next(i for i, n in enumerate(p["update_norms"]) if n > 0)
    first = p["steps"][t]
    assert np.all(np.abs(first["ratio"] - 1.0) <= 1e-12)
    for key in ("ddot_full", "ntk1"):
        assert np.all(signs(first[key]) == 0), key  # rounding noise only
    assert np.any(signs(first["ntk2"]) > 0)  # the second order carries the change
    # later steps are off-policy and carry first-order signal
    assert any(np.any(signs(r["ntk1"]) != 0) for r in p["steps"][t + 1 :])


def test_by_step_tables_add_up_to_the_pooled_one(probe):
    _, p = probe
    a = analyze_probe(p)
    for name in ("always_rise", "ddot_full", "ntk1", "ntk2"):
        pooled = a["metrics"]["step"][name]
        steps = [s[name] for s in a["by_step"] if s[name]["tokens"]]
        assert sum(s["tokens"] for s in steps) == pooled["tokens"]
        hits = sum(s["agreement"] * s["tokens"] * s["coverage"] for s in steps)
        made = sum(s["tokens"] * s["coverage"] for s in steps)
        assert hits / made == pytest.approx(pooled["agreement"], rel=1e-12)
