"""The sampled-token structure theorem: every claim proved, and a wrong variant
refuted."""

import dataclasses

import pytest

from theorycheck.formal import prove, prove_sampled_token_theorem, sampled_token_claims


def test_prove_sampled_token_theorem_all_proved():
    results = prove_sampled_token_theorem()
    assert set(results) == {c.id for c in sampled_token_claims()}
    assert {r.status for r in results.values()} == {"proved"}


@pytest.mark.parametrize("drop", [3, 4])
def test_sampled_token_claims_fail_without_a_condition(drop):
    # Meta-test: dropping either condition (f' <= 0, or the margin) from the sufficiency
    # claim makes it false, so the proof above does depend on both.
    claim = sampled_token_claims()[0]
    weaker = dataclasses.replace(
        claim,
        assumptions=tuple(a for i, a in enumerate(claim.assumptions) if i != drop),
    )
    res = prove(weaker.claim, weaker.variables, assumptions=weaker.assumptions)
    assert res.status == "refuted"


def test_sampled_token_v2_claim_is_not_the_v3_claim():
    # For V = 2, f' > 0 alone does not break PSD: f'' large enough compensates.
    claims = {c.id: c for c in sampled_token_claims()}
    v2 = claims["v2_sufficient"]
    p, a, s, f1, f2 = v2.variables
    res = prove(v2.claim, v2.variables, assumptions=v2.assumptions + (f1 > 0,))
    assert res.status == "proved"
