"""``theorycheck coefficient``: the survey's worked examples, the JSON contract, and bad
input (exit 2, one line naming the bad value)."""

from __future__ import annotations

import json

import pytest

from theorycheck.cli import main

KEYS = {
    "loss",
    "p",
    "q",
    "ratio",
    "log_ratio",
    "adv",
    "params",
    "coefficient",
    "gated",
}


def _json(capsys, *argv):
    assert main(["coefficient", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_coefficient_survey_ppo_keeps_c_minus_4(capsys):
    out = _json(capsys, "ppo", "--p", "0.4", "--q", "0.1", "--adv", "-1")
    assert set(out) == KEYS
    assert out["ratio"] == pytest.approx(4.0, rel=1e-12)
    assert out["coefficient"] == pytest.approx(-4.0, rel=1e-12)
    assert out["gated"] is False


def test_coefficient_survey_dual_clip_gives_zero(capsys):
    out = _json(capsys, "dual_clip", "--p", "0.4", "--q", "0.1", "--adv", "-1")
    assert out["params"]["kappa"] == 3.0
    assert out["coefficient"] == 0.0 and out["gated"] is True


def test_coefficient_survey_ppo_keeps_what_dppo_gates(capsys):
    ppo = _json(capsys, "ppo", "--p", "0.74", "--q", "0.90", "--adv", "-1")
    dppo = _json(capsys, "dppo_binary_tv", "--p", "0.74", "--q", "0.90", "--adv", "-1")
    assert ppo["coefficient"] == pytest.approx(-0.74 / 0.90, rel=1e-12)
    assert ppo["gated"] is False
    assert dppo["coefficient"] == 0.0 and dppo["gated"] is True
    assert dppo["params"]["delta"] == 0.15


def test_coefficient_set_overrides_default(capsys):
    # r = 1.25: inside DAPO's default window (1.28), outside it once eps_high = 0.2.
    base = _json(capsys, "dapo", "--p", "0.625", "--q", "0.5", "--adv", "1")
    tight = _json(
        capsys,
        "dapo",
        "--p",
        "0.625",
        "--q",
        "0.5",
        "--adv",
        "1",
        "--set",
        "eps_high=0.2",
    )
    assert base["coefficient"] == 1.25 and not base["gated"]
    assert tight["coefficient"] == 0.0 and tight["gated"]
    assert tight["params"]["eps_high"] == 0.2


def test_coefficient_human_output_names_the_gate(capsys):
    assert (
        main(["coefficient", "dual_clip", "--p", "0.4", "--q", "0.1", "--adv", "-1"])
        == 0
    )
    out = capsys.readouterr().out
    assert "c = 0" in out and "gated" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["nope", "--p", "0.5", "--q", "0.5", "--adv", "1"], "'nope'"),
        (["ppo", "--p", "0", "--q", "0.5", "--adv", "1"], "--p 0.0"),
        (["ppo", "--p", "0.5", "--q", "1.5", "--adv", "1"], "--q 1.5"),
        (["ppo", "--p", "0.5", "--q", "0.5", "--adv", "nan"], "--adv nan"),
        (
            ["ppo", "--p", "0.5", "--q", "0.5", "--adv", "1", "--set", "kappa=3"],
            "'kappa'",
        ),
        (
            [
                "dual_clip",
                "--p",
                "0.5",
                "--q",
                "0.5",
                "--adv",
                "1",
                "--set",
                "kappa=0.5",
            ],
            "kappa=0.5",
        ),
        (
            ["cispo", "--p", "0.5", "--q", "0.5", "--adv", "1", "--set", "low=6"],
            "low=6.0",
        ),
        (
            ["ppo", "--p", "0.5", "--q", "0.5", "--adv", "1", "--set", "eps_low"],
            "KEY=VALUE",
        ),
        (["predictive_kl", "--p", "0.5", "--q", "0.5", "--adv", "1"], "ddot"),
        (["sft", "--p", "0.5", "--q", "0.5", "--adv", "1"], "'sft'"),
    ],
)
def test_coefficient_bad_input_exits_2_naming_the_value(capsys, argv, needle):
    assert main(["coefficient", *argv, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and needle in captured.err


def test_coefficient_unknown_key_lists_valid_keys(capsys):
    assert (
        main(
            [
                "coefficient",
                "ppo",
                "--p",
                "0.5",
                "--q",
                "0.5",
                "--adv",
                "1",
                "--set",
                "kappa=3",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "eps_low" in err and "eps_high" in err and "log_ratio_clamp" in err


def test_coefficient_window_may_start_at_zero(capsys):
    # SkyRL's CISPO window is [0, 5] and TRL's (0, epsilon_high]: low = 0 is valid.
    # r = 0.1 lies below the survey's l = 0.5 (clipped up) but inside [0, 5].
    survey = _json(capsys, "cispo", "--p", "0.05", "--q", "0.5", "--adv", "1")
    skyrl = _json(
        capsys, "cispo", "--p", "0.05", "--q", "0.5", "--adv", "1", "--set", "low=0"
    )
    assert survey["coefficient"] == pytest.approx(0.5, rel=1e-12)
    assert skyrl["coefficient"] == pytest.approx(0.1, rel=1e-12)
    assert skyrl["params"]["low"] == 0.0 and skyrl["gated"] is False
    glm5 = _json(
        capsys, "glm5", "--p", "0.05", "--q", "0.5", "--adv", "1", "--set", "low=0"
    )
    assert glm5["coefficient"] == pytest.approx(0.1, rel=1e-12) and not glm5["gated"]
