"""Rule look-up and hyperparameter validation: errors name the bad value and list the
valid names or keys."""

from __future__ import annotations

import math

import pytest

from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES
from theorycheck.losses._params import get_rule, parse_assignments, resolve_params


def test_get_rule_lists_valid_names():
    with pytest.raises(BadInput, match="valid: .*ppo"):
        get_rule("ppo2")
    with pytest.raises(BadInput, match="'lco_kld'"):
        get_rule("lco_kld", token=True)
    assert get_rule("lco_kld") is LOSSES["lco_kld"]


def test_resolve_params_merges_defaults_and_casts_integers():
    params, inputs = resolve_params(
        "dppo_topk_kl", {"topk": 5.0, "divergence": 0.1}, allow_inputs=True
    )
    assert params == {"delta": 0.05, "topk": 5, "log_ratio_clamp": 20.0}
    assert isinstance(params["topk"], int) and inputs == {"divergence": 0.1}


@pytest.mark.parametrize(
    "name,overrides,needle",
    [
        ("ppo", {"kappa": 3.0}, "valid: eps_low, eps_high, log_ratio_clamp"),
        ("ppo", {"eps_low": 1.0}, "eps_low=1.0"),
        ("dual_clip", {"kappa": 1.0}, "kappa=1.0"),
        ("cispo", {"low": 2.0, "high": 1.0}, "low=2.0"),
        ("cispo", {"low": -0.1}, "low=-0.1"),
        ("glm5", {"low": math.inf}, "low=inf"),
        ("dppo_topk_tv", {"topk": 2.5}, "topk=2.5"),
        ("sapo", {"tau_pos": -1.0}, "tau_pos=-1.0"),
        ("ppo", {"eps_high": math.inf}, "eps_high=inf"),
    ],
)
def test_resolve_params_rejects_bad_values(name, overrides, needle):
    with pytest.raises(BadInput) as err:
        resolve_params(name, overrides)
    assert needle in str(err.value)


def test_resolve_params_requires_distribution_inputs():
    with pytest.raises(BadInput, match="give the inputs ddot=VALUE, divergence=VALUE"):
        resolve_params("predictive_tv", {}, allow_inputs=True)


def test_parse_assignments_accepts_inf_and_rejects_nan():
    assert parse_assignments(["log_ratio_clamp=inf"]) == {"log_ratio_clamp": math.inf}
    with pytest.raises(BadInput, match="^assignment 'delta=nan': NaN"):
        parse_assignments(["delta=nan"])


@pytest.mark.parametrize(
    "items, message",
    [
        (["adv"], "^assignment 'adv': expected KEY=VALUE"),
        (["adv=x"], "^assignment 'adv=x': 'x' is not a number"),
        (["adv=1", "adv=2"], "^assignment 'adv=2': 'adv' is given twice"),
    ],
)
def test_parse_assignments_errors_name_the_assignment_not_a_flag(items, message):
    # library errors speak of arguments; the commands translate them to --set
    with pytest.raises(BadInput, match=message):
        parse_assignments(items)


def test_resolve_params_accepts_a_window_starting_at_zero():
    # the SkyRL and TRL windows start at 0 (the conventions report uses low = 0)
    params, _ = resolve_params("cispo", {"low": 0.0})
    assert params["low"] == 0.0
