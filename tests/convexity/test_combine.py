"""The verdict rules, unit-tested on the pure combiner (no JAX, no SymPy)."""

from __future__ import annotations

import pytest

from theorycheck.convexity._combine import combine
from theorycheck.convexity._types import (
    Scope,
    Stage,
    StageRecord,
    StageStatus,
    Verdict,
)

CE = {"logits": [0.0, 0.0, 0.0], "direction": [1.0, -1.0, 0.0], "curvature": -0.5}


def structure(status=StageStatus.PROVED, condition="always", claim=None):
    claim = claim or (
        Scope.every(2) if status is StageStatus.PROVED else Scope.every(3)
    )
    decided = (
        Scope.of(3, 4)
        if status in (StageStatus.PROVED, StageStatus.REFUTED)
        else Scope()
    )
    ce = CE if status is StageStatus.REFUTED else None
    return StageRecord(
        "structure", status, "d", Stage.STRUCTURE, claim, decided, ce, condition
    )


def invariance(same=True):
    status = StageStatus.CONFIRMED if same else StageStatus.UNKNOWN
    return StageRecord("vocab invariance", status, "d", Stage.INVARIANCE)


def z3(v, status):
    scope = (
        Scope.of(v) if status in (StageStatus.PROVED, StageStatus.REFUTED) else Scope()
    )
    ce = CE if status is StageStatus.REFUTED else None
    return StageRecord(f"z3 V={v}", status, "d", Stage.FORMAL, scope, scope, ce)


def search(v=None, samples=832):
    if v is None:
        return StageRecord(
            "numeric search", StageStatus.UNKNOWN, "d", Stage.SEARCH, samples=samples
        )
    s = Scope.of(v)
    return StageRecord(
        "numeric search",
        StageStatus.REFUTED,
        "d",
        Stage.SEARCH,
        s,
        s,
        CE,
        samples=samples,
    )


def test_scope_text_and_algebra():
    assert str(Scope.every(2)) == "all V >= 2"
    assert str(Scope.of(3)) == "V = 3" and str(Scope.of(4, 3)) == "V in {3, 4}"
    assert str(Scope.of(2).union(Scope.every(3))) == "V in {2} and all V >= 3"
    assert str(Scope.of(3, 5).union(Scope.every(4))) == "V in {3} and all V >= 4"
    assert Scope.every(3).meets(Scope.of(7)) and not Scope.of(3).meets(Scope.of(4))
    assert not Scope() and str(Scope()) == "no V"


def test_structure_proof_for_every_v_needs_one_program():
    out = combine([structure(), invariance(True), search()], Scope.of(3))
    assert out.verdict is Verdict.CONVEX and str(out.scope) == "all V >= 2"
    # Meta-test: without the invariance evidence the same proof covers only V = 3, 4.
    out = combine([structure(), invariance(False), search()], Scope.of(3))
    assert out.verdict is Verdict.CONVEX and str(out.scope) == "V in {3, 4}"
    out = combine([structure(), search()], Scope.of(3))
    assert str(out.scope) == "V in {3, 4}"


def test_counterexample_wins_over_a_proof_and_names_the_contradiction():
    recs = [structure(), invariance(True), z3(3, StageStatus.PROVED), search(5)]
    out = combine(recs, Scope.of(3, 5))
    assert out.verdict is Verdict.NOT_CONVEX and str(out.scope) == "V = 5"
    assert out.counterexample == CE
    conflicts = [m for m in out.methods if m.method == "consistency"]
    # the all-V structure proof contradicts V = 5; the z3 proof at V = 3 does not
    assert any("structure proved convex (all V >= 2)" in m.detail for m in conflicts)
    assert not any("z3 V=3 proved" in m.detail for m in conflicts)
    assert out.condition is None  # never "always" beside a counterexample
    assert any("region (always)" in m.detail for m in conflicts)


def test_restricted_proof_does_not_conflict_with_a_counterexample_elsewhere():
    recs = [structure(), invariance(False), search(5)]
    out = combine(recs, Scope.of(3, 5))
    assert out.verdict is Verdict.NOT_CONVEX and str(out.scope) == "V = 5"
    assert not [m for m in out.methods if m.status is StageStatus.CONFLICT]
    notes = [m.detail for m in out.methods if m.method == "consistency"]
    assert notes == [
        "the structure's region (always) holds at V in {3, 4}, sampled token k = 0 "
        "only; not reported "
        "beside the counterexample at V = 5"
    ]
    assert out.condition is None


def test_structural_refutation_scope_follows_invariance():
    ref = structure(StageStatus.REFUTED, "pi_k >= 1/2 (V >= 3)")
    out = combine([ref, invariance(True), search()], Scope.of(3))
    assert out.verdict is Verdict.NOT_CONVEX and str(out.scope) == "all V >= 3"
    assert out.condition == "pi_k >= 1/2 (V >= 3)"
    out = combine([ref, invariance(False), search()], Scope.of(3))
    assert str(out.scope) == "V in {3, 4}"


def test_z3_proof_alone_is_convex_at_its_v():
    recs = [
        structure(StageStatus.UNKNOWN, None),
        invariance(),
        z3(3, StageStatus.PROVED),
    ]
    out = combine(recs + [search()], Scope.of(3))
    assert out.verdict is Verdict.CONVEX and str(out.scope) == "V = 3"


def test_kinks_block_a_proof():
    kink = StageRecord("kinks", StageStatus.UNKNOWN, "d", Stage.KINKS)
    out = combine([structure(), invariance(), kink, search()], Scope.of(3))
    assert out.verdict is Verdict.UNKNOWN and out.condition is None
    assert "kinks" in out.reason and "832 samples" in out.reason


@pytest.mark.parametrize(
    "records,needle",
    [
        (
            [structure(StageStatus.UNKNOWN, None), z3(3, StageStatus.UNKNOWN)],
            "undecided",
        ),
        (
            [StageRecord("symbolic", StageStatus.SKIPPED, "sort", Stage.STRUCTURE)],
            "no prover could run (sort)",
        ),
    ],
)
def test_unknown_says_which(records, needle):
    out = combine([*records, search(samples=100)], Scope.of(3))
    assert out.verdict is Verdict.UNKNOWN and str(out.scope) == "V = 3"
    assert needle in out.reason
    assert "searched without finding a counterexample (100 samples)" in out.reason


def test_unknown_never_prints_always_or_never():
    out = combine(
        [structure(StageStatus.UNKNOWN, "always (V >= 3)"), search()], Scope.of(3)
    )
    assert out.verdict is Verdict.UNKNOWN and out.condition is None


def test_enums_serialise_as_plain_strings():
    rec = z3(3, StageStatus.PROVED)
    assert rec.to_json() == {"method": "z3 V=3", "status": "proved", "detail": "d"}
    assert Verdict.NOT_CONVEX == "not_convex" and f"{Verdict.CONVEX}" == "convex"


def test_result_families_are_enum_members():
    from theorycheck.convexity import ConvexityResult, StructureFamily

    res = ConvexityResult(
        loss="x",
        verdict=Verdict.CONVEX,
        scope="",
        methods=[],
        counterexample=None,
        condition=None,
        params={},
    )
    assert res.families == ()
    res.family = "cross_entropy+regression"
    assert res.families == (StructureFamily.CROSS_ENTROPY, StructureFamily.REGRESSION)
    res.family = "sampled_token+affine"  # a name the enum does not know: kept as text
    assert res.families == (StructureFamily.SAMPLED_TOKEN, "affine")


def test_a_refutation_without_its_counterexample_does_not_count():
    bare = StageRecord(
        "structure",
        StageStatus.REFUTED,
        "d",
        Stage.STRUCTURE,
        Scope.every(3),
        Scope.of(3, 4),
    )
    out = combine([bare, invariance(), search()], Scope.of(3))
    assert out.verdict is Verdict.UNKNOWN
    # z3 refutations are exact by construction: one without a float64 copy counts
    out = combine([z3(3, StageStatus.REFUTED), search()], Scope.of(3))
    assert out.verdict is Verdict.NOT_CONVEX
