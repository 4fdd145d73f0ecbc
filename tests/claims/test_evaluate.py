"""The status rules, one meta-test per rule: each status is reachable and computed."""

import json

import pytest

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Correction,
    Method,
    Outcome,
    Status,
    evaluate,
    run_check,
)


def _const(outcome, cx=None):
    def run():
        return CheckResult(outcome, f"constant {outcome}", counterexample=cx)

    return run


PASS = _const(Outcome.PASS)
FAIL = _const(Outcome.FAIL, {"x": 0.5})
UNK = _const(Outcome.UNKNOWN)


def _claim(*checks, correction=None):
    return Claim(
        "t.c",
        "test",
        "DERIVED",
        "a statement",
        tuple(Check(f"c{i}", m, r) for i, (m, r) in enumerate(checks)),
        correction=correction,
    )


def _corr(*checks):
    return Correction(
        "a corrected statement",
        tuple(Check(f"k{i}", m, r) for i, (m, r) in enumerate(checks)),
    )


def test_holds_needs_every_pass_and_two_kinds():
    claim = _claim((Method.SYMBOLIC, PASS), (Method.NUMERIC, PASS))
    assert evaluate(claim).status is Status.HOLDS


def test_holds_refused_with_one_kind():
    # Meta: two passing checks of the SAME kind are not independent routes.
    claim = _claim((Method.NUMERIC, PASS), (Method.NUMERIC, PASS))
    assert evaluate(claim).status is Status.UNKNOWN


def test_holds_refused_when_one_check_is_unknown():
    claim = _claim((Method.SYMBOLIC, PASS), (Method.NUMERIC, PASS), (Method.Z3, UNK))
    assert evaluate(claim).status is Status.UNKNOWN


def test_no_checks_is_unknown():
    assert evaluate(_claim()).status is Status.UNKNOWN


def test_fails_on_a_counterexample():
    claim = _claim((Method.SYMBOLIC, PASS), (Method.Z3, FAIL))
    result = evaluate(claim)
    assert result.status is Status.FAILS
    assert result.methods[1].result.counterexample == {"x": 0.5}


def test_fails_even_with_a_single_failing_check():
    assert evaluate(_claim((Method.Z3, FAIL))).status is Status.FAILS


def test_holds_with_correction_when_correction_passes_two_kinds():
    corr = _corr((Method.Z3, PASS), (Method.PROPERTY, PASS))
    claim = _claim((Method.Z3, FAIL), (Method.NUMERIC, PASS), correction=corr)
    result = evaluate(claim)
    assert result.status is Status.HOLDS_WITH_CORRECTION
    assert result.correction.status == "holds"


@pytest.mark.parametrize(
    "corr_checks",
    [
        ((Method.Z3, PASS), (Method.Z3, PASS)),  # one kind only
        ((Method.Z3, PASS), (Method.NUMERIC, UNK)),  # undecided
        ((Method.Z3, PASS), (Method.NUMERIC, FAIL)),  # the correction fails too
        (),  # no checks
    ],
)
def test_correction_that_does_not_hold_leaves_fails(corr_checks):
    claim = _claim((Method.Z3, FAIL), correction=_corr(*corr_checks))
    assert evaluate(claim).status is Status.FAILS


def test_correction_not_run_when_statement_holds():
    calls = []

    def counted():
        calls.append(1)
        return CheckResult(Outcome.PASS, "ok")

    claim = _claim(
        (Method.Z3, PASS),
        (Method.NUMERIC, PASS),
        correction=_corr((Method.Z3, counted), (Method.NUMERIC, counted)),
    )
    result = evaluate(claim)
    assert result.status is Status.HOLDS
    assert result.correction.status == "not_run" and calls == []


def test_correction_does_not_rescue_an_unknown_statement():
    corr = _corr((Method.Z3, PASS), (Method.NUMERIC, PASS))
    claim = _claim((Method.Z3, UNK), (Method.NUMERIC, PASS), correction=corr)
    assert evaluate(claim).status is Status.UNKNOWN


def test_a_check_that_raises_is_unknown_never_pass():
    def boom():
        raise RuntimeError("solver crashed")

    claim = _claim((Method.SYMBOLIC, PASS), (Method.NUMERIC, boom))
    result = evaluate(claim)
    assert result.status is Status.UNKNOWN
    bad = result.methods[1]
    assert bad.outcome is Outcome.UNKNOWN
    assert "RuntimeError: solver crashed" in bad.result.detail
    assert result.errors == (bad,)


def test_a_check_returning_the_wrong_type_is_unknown():
    claim = _claim((Method.SYMBOLIC, PASS), (Method.NUMERIC, lambda: True))
    result = evaluate(claim)
    assert result.status is Status.UNKNOWN
    assert "not a CheckResult" in result.methods[1].result.detail


def test_a_fail_without_counterexample_is_unknown():
    # CheckResult refuses it; the harness turns the refusal into UNKNOWN.
    claim = _claim(
        (Method.SYMBOLIC, PASS),
        (Method.NUMERIC, lambda: CheckResult(Outcome.FAIL, "no witness")),
    )
    assert evaluate(claim).status is Status.UNKNOWN


def test_quick_is_passed_only_to_checks_that_take_it():
    seen = {}

    def with_quick(*, quick=False):
        seen["quick"] = quick
        return CheckResult(Outcome.PASS, "ok")

    def with_kwargs(**kw):
        seen["kw"] = kw
        return CheckResult(Outcome.PASS, "ok")

    assert run_check(Check("a", Method.NUMERIC, with_quick), quick=True).outcome is (
        Outcome.PASS
    )
    run_check(Check("b", Method.NUMERIC, with_kwargs), quick=True)
    run_check(Check("c", Method.NUMERIC, PASS), quick=True)
    assert seen == {"quick": True, "kw": {"quick": True}}


def test_claim_result_json_has_the_contract_keys():
    corr = _corr((Method.Z3, PASS), (Method.PROPERTY, PASS))
    claim = _claim((Method.Z3, FAIL), (Method.NUMERIC, PASS), correction=corr)
    out = json.loads(json.dumps(evaluate(claim).to_json()))
    assert set(out) >= {
        "id",
        "source",
        "provenance",
        "statement",
        "status",
        "correction",
        "objection",
        "methods",
        "seconds",
    }
    assert out["status"] == "holds_with_correction"
    assert set(out["methods"][0]) >= {
        "method",
        "name",
        "status",
        "detail",
        "counterexample",
        "data",
    }
    assert out["methods"][0]["status"] == "fail"
    assert out["methods"][0]["counterexample"] == {"x": 0.5}
    assert out["correction"]["status"] == "holds"
