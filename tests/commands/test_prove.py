"""``theorycheck prove``: the example claims, the JSON contract, reports, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from theorycheck.cli import main

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples" / "claims")
CLAIM_KEYS = {
    "id",
    "source",
    "provenance",
    "statement",
    "status",
    "verdict",
    "correction",
    "objection",
    "quote",
    "location",
    "kind",
    "assumptions",
    "extends",
    "methods",
    "seconds",
}


def _json(capsys, *argv):
    assert main(["prove", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_prove_example_claims_statuses(capsys):
    out = _json(capsys, EXAMPLES, "--quick")
    got = {c["id"]: c["status"] for c in out["claims"]}
    assert got == {
        "example.log_softmax_gradient": "holds",
        "example.max_prob_at_most_half": "holds_with_correction",
    }
    for c in out["claims"]:
        assert CLAIM_KEYS <= set(c)
        for m in c["methods"]:
            assert {"method", "name", "status", "detail"} <= set(m)


def test_prove_only_selects_one_claim(capsys):
    out = _json(capsys, EXAMPLES, "--only", "example.log_softmax_gradient")
    assert [c["id"] for c in out["claims"]] == ["example.log_softmax_gradient"]


def test_prove_human_table_and_report(capsys, tmp_path):
    assert main(["prove", EXAMPLES, "--quick", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "holds_with_correction" in out and "counterexample" in out
    md = (tmp_path / "proofs.md").read_text()
    assert "`example.max_prob_at_most_half`" in md
    data = json.loads((tmp_path / "proofs.json").read_text())
    assert len(data["claims"]) == 2


def test_prove_failing_claim_is_exit_0_not_an_error(capsys, tmp_path):
    f = tmp_path / "wrong.py"
    f.write_text(
        "from theorycheck.claims import Check, CheckResult, Claim, Method, Outcome\n"
        "def _cx():\n"
        "    return CheckResult(Outcome.FAIL, '2 > 1', counterexample={'x': 2})\n"
        "W = Claim('w.bad', 's', 'DERIVED', 'x <= 1', "
        "(Check('brute', Method.NUMERIC, _cx),))\n"
    )
    out = _json(capsys, str(f))
    assert out["claims"][0]["status"] == "fails"
    assert out["claims"][0]["methods"][0]["counterexample"] == {"x": 2}


def test_prove_raising_check_is_reported_on_stderr(capsys, tmp_path):
    f = tmp_path / "raises.py"
    f.write_text(
        "from theorycheck.claims import Check, Claim, Method\n"
        "def _boom():\n"
        "    raise ZeroDivisionError('oops')\n"
        "R = Claim('r.boom', 's', 'DERIVED', 'st', "
        "(Check('boom', Method.NUMERIC, _boom),))\n"
    )
    assert main(["prove", str(f), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["claims"][0]["status"] == "unknown"
    assert "ZeroDivisionError: oops" in cap.err


def test_prove_bad_input_exits_2(capsys, tmp_path):
    assert main(["prove", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0]
    assert main(["prove", EXAMPLES, "--only", "no.such_id"]) == 2
    assert "no.such_id" in capsys.readouterr().err
    assert main(["prove", EXAMPLES, "--quick", "--remeasure"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--remeasure" in err[0]


def test_prove_with_no_path_runs_the_projects_claims_from_any_folder(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # no ./proofs here
    monkeypatch.delenv("THEORYCHECK_PROOFS", raising=False)
    out = _json(capsys, "--only", "dppo.ppo_ratio_is_single_sample_tv", "--quick")
    assert [c["id"] for c in out["claims"]] == ["dppo.ppo_ratio_is_single_sample_tv"]


def test_a_renamed_claim_is_still_selected_by_its_old_id(capsys):
    out = _json(capsys, "--only", "lco.prop4_7_gradient_norm_bounds", "--quick")
    (claim,) = out["claims"]
    assert claim["id"] == "lco.prop4_7_norms_diminish_without_sigma_bound"
    assert claim["aliases"] == ["lco.prop4_7_gradient_norm_bounds"]
