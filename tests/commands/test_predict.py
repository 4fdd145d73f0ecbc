"""Tests for ``theorycheck predict``: JSON contract, values by numpy, exit 2."""

import json

import numpy as np
import pytest

from theorycheck.cli import main

KEYS = {
    "divergence",
    "ddot",
    "ddot_tolerance",
    "local",
    "global",
    "ratio",
    "ratio_direction",
    "predicted_direction",
    "ratio_mask",
    "predictive_mask",
    "second_order",
    "first_order_radius",
}
MU = "0.5,0.3,0.1,0.1"
PI = "0.3,0.3,0.2,0.2"


def _run(capsys, *argv):
    rc = main(["predict", *argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def test_predict_json_keys_and_kl_values_by_numpy(capsys):
    got = _run(capsys, "--behavior", MU, "--policy", PI, "--sampled", "1", "--adv", "1")
    assert set(got) == KEYS
    mu = np.array([0.5, 0.3, 0.1, 0.1], np.float64)
    pi = np.array([0.3, 0.3, 0.2, 0.2], np.float64)
    assert got["divergence"] == pytest.approx(np.sum(mu * np.log(mu / pi)), rel=1e-12)
    assert got["local"] == pytest.approx(0.0, abs=1e-15)
    assert got["global"] == pytest.approx(np.sum(pi * (mu - pi)), rel=1e-12)
    v = np.eye(4)[1] - pi
    var = np.sum(pi * v * v) - np.sum(pi * v) ** 2
    assert got["second_order"] == pytest.approx(var, rel=1e-12)
    # r = 1: the ratio sees no move; the global term predicts an increase of KL,
    # D = 0.117 > 0.05, so only the predictive mask blocks the update
    assert (got["ratio_direction"], got["predicted_direction"]) == (0, 1)
    assert (got["ratio_mask"], got["predictive_mask"]) == (1, 0)
    span = 1 - pi[1] + 0.3  # R = 1 - pi_k + max_{i != k} pi_i
    assert got["first_order_radius"] == pytest.approx(8 * got["ddot"] / span**2)


def test_predict_ratio_and_predictive_directions_can_disagree(capsys):
    # r = 0.3 / 0.25 > 1 with A > 0: the ratio says "moving away", but Ddot < 0.
    got = _run(
        capsys,
        "--behavior",
        "0.25,0.25,0.5",
        "--policy",
        "0.3,0.6,0.1",
        "--sampled",
        "0",
        "--adv",
        "1",
        "--delta",
        "0.01",
    )
    assert got["ratio_direction"] == 1
    assert got["predicted_direction"] == -1 and got["ddot"] < 0
    assert (got["ratio_mask"], got["predictive_mask"]) == (0, 1)


@pytest.mark.parametrize(
    "est", ["topk-aggregated", "topk-uniform", "topk-proportional"]
)
def test_predict_topk_estimators_equal_full_when_k_is_v(capsys, est):
    base = [
        "--behavior",
        MU,
        "--policy",
        PI,
        "--sampled",
        "2",
        "--adv",
        "-1",
        "--divergence",
        "tv",
    ]
    full = _run(capsys, *base)
    top = _run(capsys, *base, "--estimator", est, "--topk", "4")
    for key in ("divergence", "ddot", "second_order"):
        assert top[key] == pytest.approx(full[key], rel=1e-12, abs=1e-15)


def test_predict_human_output(capsys):
    assert (
        main(
            [
                "predict",
                "--behavior",
                MU,
                "--policy",
                PI,
                "--sampled",
                "0",
                "--adv",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Ddot" in out and "predictive mask" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--behavior", "0.5,0.6,-0.1"], "--behavior entry 2"),
        (["--behavior", "0.5,0.3,0.3"], "--behavior sums to"),
        (["--policy", "0.5,0.5,0.0"], "--policy entry 2"),
        (["--policy", "0.5,x,0.5"], "--policy"),
        (["--policy", "0.5,1.5,-1"], "--policy entry 1"),
        (["--sampled", "3"], "--sampled 3"),
        (["--sampled", "-1"], "--sampled -1"),
        (["--estimator", "topk-uniform", "--topk", "0"], "--topk 0"),
        (["--estimator", "topk-uniform", "--topk", "4"], "--topk 4"),
        (["--behavior", "0.5,0.5,0.0", "--sampled", "2"], "probability 0"),
        (["--behavior", "0.5,0.5"], "entries"),
        (["--delta", "-0.1"], "--delta"),
        (["--adv", "nan"], "--adv"),
        (["--topk", "2"], "--topk 2 is used only by a top-K --estimator"),
        (["--support", "k-slots"], "--support k-slots is used only"),
    ],
)
def test_predict_bad_input_exits_2_naming_the_value(capsys, argv, needle):
    args = {
        "--behavior": "0.5,0.3,0.2",
        "--policy": "0.2,0.3,0.5",
        "--sampled": "0",
        "--adv": "1",
    }
    extra = []
    it = iter(argv)
    for flag in it:
        value = next(it)
        if flag in args:
            args[flag] = value
        else:
            extra += [flag, value]
    flat = [x for kv in args.items() for x in kv]
    rc = main(["predict", *flat, *extra, "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1
