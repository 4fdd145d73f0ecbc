"""The closed sets of choices of the numeric core: StrEnums that accept strings."""

from __future__ import annotations

import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.numeric import Divergence, Estimator, Support, ddot, divergence
from theorycheck.numeric._choices import choose


def test_choices_accept_strings_and_members_alike():
    assert choose(Estimator, "topk_uniform", "estimator") is Estimator.TOPK_UNIFORM
    assert choose(Support, Support.K_SLOTS, "support") is Support.K_SLOTS
    assert Divergence.TOPK_KL == "topk_kl" and f"{Divergence.TV}" == "tv"


def test_choices_reject_naming_the_value_and_the_valid_ones():
    with pytest.raises(BadInput, match="kind must be one of kl, tv, got 'reverse_kl'"):
        choose(Divergence, "reverse_kl", "kind", (Divergence.KL, Divergence.TV))
    with pytest.raises(BadInput, match="support must be one of union, k_slots"):
        choose(Support, "k-slots", "support")


def test_choices_give_the_same_numbers_as_strings():
    mu = np.log(np.array([0.5, 0.3, 0.2]))
    z = np.log(np.array([0.3, 0.3, 0.4]))
    by_name = ddot(mu, z, 1, kind="tv", estimator="topk_uniform", topk=1)
    by_member = ddot(
        mu, z, 1, kind=Divergence.TV, estimator=Estimator.TOPK_UNIFORM, topk=1
    )
    assert float(by_name.ddot) == float(by_member.ddot)
    assert float(divergence(mu, z, 1, kind="topk_kl", topk=1)) == float(
        divergence(mu, z, 1, kind=Divergence.TOPK_KL, topk=1, support=Support.UNION)
    )
    with pytest.raises(BadInput, match="estimator must be one of"):
        ddot(mu, z, 1, estimator="exact")
