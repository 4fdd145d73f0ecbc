"""theorycheck.testing.assert_matches_rule on trainer-shaped losses written for
these tests: it passes where the math is the rule's (documented conventions
included, per token and per reduction) and fails, with the points, where it is
not."""

import pytest

torch = pytest.importorskip("torch")

from tests.torchfront import trainer_examples as ex  # noqa: E402
from theorycheck.testing import assert_matches_rule  # noqa: E402


def test_verl_cispo_is_cispo_per_token_and_token_mean():
    out = assert_matches_rule(
        ex.verl_cispo,
        "cispo",
        signature="verl",
        params={"clip_ratio_low": 0.3, "clip_ratio_high": 0.5},
        reduction="token_mean",
    )
    assert out["rule_params"]["low"] == pytest.approx(0.7)
    assert out["rule_params"]["high"] == pytest.approx(1.5)
    assert out["mapping"] == {"clip_ratio_low": "low", "clip_ratio_high": "high"}
    # the 1e-8 of the token mean is the only difference, and it is classified
    assert set(out["classes"]) <= {
        "length bias (a 1e-8 in the denominator of the token mean)"
    }


def test_the_length_bias_fails_when_only_equality_is_allowed():
    with pytest.raises(AssertionError, match="length bias"):
        assert_matches_rule(ex.verl_cispo, "cispo", signature="verl", allow=("equal",))


def test_a_wrong_loss_fails_with_its_points():
    params = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
    with pytest.raises(AssertionError, match=r"is not dapo .*points differ.*real"):
        assert_matches_rule(
            ex.verl_ppo_wrong_clip, "dapo", signature="verl", params=params
        )


def test_the_same_loss_passes_where_the_bounds_agree():
    assert_matches_rule(ex.verl_ppo_wrong_clip, "ppo", signature="verl")


def test_skyrl_ppo_up_to_float32_ratio_rounding():
    out = assert_matches_rule(
        ex.skyrl_ppo,
        "ppo",
        signature="skyrl",
        params={"eps_clip_high": 0.28},
        reduction="token_mean",
    )
    assert out["rule_params"]["eps_high"] == pytest.approx(0.28)
    assert "real" not in out["classes"]
    with pytest.raises(AssertionError, match="float32 ratio rounding"):
        assert_matches_rule(ex.skyrl_ppo, "ppo", signature="skyrl", allow=("equal",))


def test_skyrl_sapo_reads_its_section():
    out = assert_matches_rule(
        ex.skyrl_sapo, "sapo", signature="skyrl", params={"sapo.tau_neg": 2.0}
    )
    assert out["rule_params"]["tau_neg"] == 2.0
    assert out["verdict"] == "EQUAL"


def test_miles_compiled_function_is_unwrapped_and_is_ppo():
    out = assert_matches_rule(
        ex.miles_ppo,
        "dapo",
        signature="miles",
        params={"eps_clip": 0.2, "eps_clip_high": 0.28},
        reduction="token_sum",
    )
    assert out["verdict"] == "EQUAL"
    assert out["mapping"] == {"eps_clip": "eps_low", "eps_clip_high": "eps_high"}
