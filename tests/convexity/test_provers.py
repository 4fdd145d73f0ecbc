"""The composition (DCP) prover, the chord refuter and the primitives the SymPy bridge
evaluates, on the planted corpus of ``examples/losses/provers.py`` (truth by hand in
each docstring, listed in ``scripts/gen_provers_table.py``'s ``TRUTH``).

Soundness first: no non-convex loss is proved by the composition rules, no convex
loss is refuted by a chord, and every chord refutation is re-checked here by an
independent float64 evaluation of the loss at its own a, b and k.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from theorycheck import bridge
from theorycheck.convexity import _chord, _dcp
from theorycheck.convexity._combine import combine
from theorycheck.convexity._genericity import one_program
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus, Verdict

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from gen_provers_table import TRUTH  # noqa: E402

PATH = "examples/losses/provers.py"


def _module():
    spec = importlib.util.spec_from_file_location("provers", ROOT / PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


M = _module()
PLANTED = TRUTH[PATH]
CONVEX = sorted(n for n, t in PLANTED.items() if t == "convex")
NOT_CONVEX = sorted(n for n, t in PLANTED.items() if t == "not_convex")
#: convex losses the rules are expected to prove (sort is read by no rule).
DCP_PROVES = sorted(set(CONVEX) - {"sort_top1_convex"})
#: kinked or jumping non-convex losses, whose Hessian is PSD (or 0) off the kinks.
KINKED = [
    "min_margin",
    "neg_abs",
    "capped_ce",
    "argmax_nll",
    "floor_jump",
    "round_jump",
    "rem_sawtooth",
    "int_cast_jump",
    "where_jump",
    "top1_sort",
]


def _loss(name):
    return one_program(getattr(M, name))


def _no_inputs(v, k):
    return types.SimpleNamespace(numeric={}, exact={})


def test_corpus_is_the_module():
    public = {
        n
        for n, f in vars(M).items()
        if callable(f) and not n.startswith("_") and f.__module__ == "provers"
    }
    assert public == set(PLANTED)


@pytest.mark.parametrize("name", DCP_PROVES)
def test_dcp_proves_the_convex_kinked_losses(name):
    out = _dcp.analyse(_loss(name), 3, {})
    assert out.curv in ("const", "affine", "convex"), out.why


@pytest.mark.parametrize("name", NOT_CONVEX)
def test_dcp_never_proves_a_non_convex_loss(name):
    for v in (2, 3, 5):
        out = _dcp.analyse(_loss(name), v, {})
        assert out.curv not in ("const", "affine", "convex")


@pytest.mark.parametrize(
    "name, primitive",
    [
        ("argmax_nll", "argmax"),
        ("floor_jump", "floor"),
        ("round_jump", "round"),
        ("rem_sawtooth", "rem"),
        ("int_cast_jump", "integer cast"),
        ("where_jump", "comparison"),
        ("top1_sort", "sort"),
        ("atan_margin", "atan"),
        ("atan2_ce", "atan2"),
        ("sort_top1_convex", "sort"),
    ],
)
def test_dcp_unknown_names_the_primitive_and_the_users_line(name, primitive):
    out = _dcp.analyse(_loss(name), 3, {})
    assert out.curv == "unknown"
    assert primitive in out.why and "provers.py:" in out.why
    assert "theorycheck" not in out.why


def test_dcp_signs_of_constants_decide():
    """A negative multiple of a convex term is concave; a product of two values of
    the logits is not read; a stop_gradient weight of unknown sign is not a
    non-negative multiple."""
    ce = lambda z, k: -jax.nn.log_softmax(z)[k]  # noqa: E731
    assert _dcp.analyse(lambda z, k: -2.0 * ce(z, k), 3, {}).curv == "concave"
    assert _dcp.analyse(lambda z, k: ce(z, k) * ce(z, k), 3, {}).curv == "unknown"
    w = lambda z, k: jax.lax.stop_gradient(z[k]) * ce(z, k)  # noqa: E731
    assert _dcp.analyse(w, 3, {}).curv == "unknown"
    pos = lambda z, k: jax.lax.stop_gradient(jnp.exp(z[k])) * ce(z, k)  # noqa: E731
    assert _dcp.analyse(pos, 3, {}).curv == "convex"


def test_dcp_logsumexp_with_a_zero_weight_is_not_read_as_log_convex():
    f = lambda z, k: jax.nn.logsumexp(z, b=jnp.array([1.0, 0.0, 2.0]))  # noqa: E731
    assert _dcp.analyse(f, 3, {}).curv == "unknown"


def _float_gap(loss, a, b, k):
    with jax.enable_x64(True):
        f = lambda z: float(loss(jnp.asarray(z, jnp.float64), k))  # noqa: E731
        m = (np.asarray(a) + np.asarray(b)) / 2
        return f(m) - (f(a) + f(b)) / 2


@pytest.mark.parametrize("name", KINKED)
def test_chord_refutes_the_kinked_losses(name):
    loss = _loss(name)
    rec = _chord.chord_stage(
        loss, [2, 3], lambda v: [0, v - 1], _no_inputs, {}, num_pairs=512
    )
    assert rec.status is StageStatus.REFUTED, rec.detail
    ce = rec.counterexample
    assert ce["gap"] > 0 and ce["kind"] == "chord"
    # independent float64 re-check at the counterexample's own a, b, V and k
    assert len(ce["a"]) == ce["vocab"]
    assert _float_gap(loss, ce["a"], ce["b"], ce["sampled"]) > 0
    assert rec.scope == Scope.of(ce["vocab"]) and rec.tokens == {ce["sampled"]}


@pytest.mark.parametrize("name", CONVEX)
def test_chord_never_refutes_a_convex_loss(name):
    rec = _chord.chord_stage(
        _loss(name), [3], lambda v: [0], _no_inputs, {}, num_pairs=512
    )
    assert rec.status is not StageStatus.REFUTED, rec.detail


def test_chord_does_not_run_beside_a_detached_value_of_the_logits():
    """A stop_gradient weight: the verdict is about the Hessian with it frozen, which
    a chord of the loss does not test; log_softmax's own max-shift is exempt."""

    def weighted(z, k):
        lp = jax.nn.log_softmax(z)
        return -jax.lax.stop_gradient(jnp.exp(lp[k])) * lp[k]

    rec = _chord.chord_stage(
        one_program(weighted), [3], lambda v: [0], _no_inputs, {}, num_pairs=64
    )
    assert rec.status is StageStatus.SKIPPED and "stop_gradient" in rec.detail
    assert _chord.frozen_logit_values(_loss("capped_ce"), 3, {}) == []
    assert _chord.frozen_logit_values(_loss("weighted_lse"), 3, {}) == []


def test_exact_gap_is_exact_at_a_kink():
    """min(z) - z_1 on a = (0, 1, 2), b = (2, 1, 0): m = (1, 1, 1); f(a) = f(b) = -1,
    f(m) = 0: the gap is exactly 1."""
    gap = _chord.exact_gap(_loss("min_margin"), [0.0, 1.0, 2.0], [2.0, 1.0, 0.0], 1, {})
    assert abs(gap - 1) < sp.Float(10) ** -45


#: rational logits and the loss's float64 value there must agree (every primitive
#: evaluated on numbers by the bridge).
POINT = [sp.Rational(3, 7), sp.Rational(-1, 2), sp.Rational(5, 4)]


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_bridge_evaluates_every_primitive_on_numbers(name):
    loss = _loss(name)
    exact = float(sp.N(bridge.sympy_from_jax(loss, POINT, sampled=1), 30))
    with jax.enable_x64(True):
        z = jnp.asarray([float(x) for x in POINT])
        assert exact == pytest.approx(float(loss(z, 1)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "name, primitive",
    [
        ("argmax_nll", "'argmax'"),
        ("floor_jump", "'floor'"),
        ("round_jump", "'round'"),
        ("rem_sawtooth", "'rem'"),
        ("int_cast_jump", "integer cast"),
        ("top1_sort", "'sort'"),
    ],
)
def test_bridge_refuses_a_jump_of_the_logits_naming_it(name, primitive):
    z = sp.symbols("z0:3", real=True)
    with pytest.raises(bridge.UnsupportedOperation) as err:
        bridge.sympy_from_jax(_loss(name), z, sampled=0)
    assert primitive in str(err.value) and "provers.py:" in str(err.value)


def test_bridge_translates_cond_switch_scan_and_atan():
    z = sp.symbols("z0:3", real=True)
    lse = sp.log(sum(sp.exp(x) for x in z))
    for name, want in [
        ("cond_branch", lse - z[0]),
        ("switch_branch", 2 * (lse - z[0])),
        ("fori_ce", 3 * (lse - z[0])),
        ("fori_log_pi", 2 * (z[0] - lse)),
        (
            "weighted_lse",
            sp.log(sp.exp(z[0]) + 2 * sp.exp(z[1]) + 3 * sp.exp(z[2])) - z[0],
        ),
    ]:
        got = bridge.sympy_from_jax(_loss(name), z, sampled=0)
        assert sp.simplify(got - want) == 0, name
    got = bridge.sympy_from_jax(_loss("atan_margin"), z, sampled=0)
    assert got.has(sp.atan)


def _rec(stage, status, **kw):
    return StageRecord("m", status, "", stage, **kw)


def test_combine_a_composition_proof_stands_beside_kinks():
    every = Scope.every(2)
    recs = [
        _rec(Stage.STRUCTURE, StageStatus.PROVED, scope=every, decided=Scope.of(3, 4)),
        _rec(Stage.INVARIANCE, StageStatus.CONFIRMED),
        _rec(Stage.KINKS, StageStatus.UNKNOWN),
    ]
    assert combine(recs, Scope.of(3)).verdict is Verdict.UNKNOWN
    dcp = _rec(Stage.DCP, StageStatus.PROVED, scope=every, decided=every, tokens=None)
    out = combine([*recs, dcp], Scope.of(3))
    assert out.verdict is Verdict.CONVEX
    assert out.text == "all V >= 2, every sampled token"


def test_combine_a_chord_refutation_wins_over_a_proof():
    ce = {"logits": [0.0, 0.0], "direction": [1.0, 0.0], "curvature": -1.0}
    recs = [
        _rec(
            Stage.STRUCTURE, StageStatus.PROVED, scope=Scope.of(3), decided=Scope.of(3)
        ),
        _rec(
            Stage.CHORD,
            StageStatus.REFUTED,
            scope=Scope.of(3),
            decided=Scope.of(3),
            counterexample=ce,
            tokens=frozenset({0}),
        ),
    ]
    out = combine(recs, Scope.of(3))
    assert out.verdict is Verdict.NOT_CONVEX
    assert out.text == "V = 3, sampled token k = 0"
    assert any(m.stage is Stage.CONSISTENCY for m in out.methods)


def test_chord_does_not_run_beside_a_shift_that_does_not_cancel():
    """sum(z - sg(max z)): with the max frozen, as the checker's Hessian holds it, the
    loss is affine (convex); the loss itself, sum(z) - V max(z), is concave. A chord
    of the loss must not refute it."""

    def shifted(z, k):
        return jnp.sum(z - jax.lax.stop_gradient(jnp.max(z)))

    rec = _chord.chord_stage(
        one_program(shifted), [3], lambda v: [0], _no_inputs, {}, num_pairs=256
    )
    assert rec.status is StageStatus.SKIPPED and "stop_gradient" in rec.detail


def test_dcp_reads_a_function_named_logaddexp_through_its_body():
    @jax.custom_jvp
    def logaddexp(a, b):
        return -jnp.abs(a - b)

    logaddexp.defjvp(lambda p, t: (logaddexp(*p), 0.0 * t[0]))
    out = _dcp.analyse(lambda z, k: logaddexp(z[0], z[1]), 3, {})
    assert out.curv != "convex"


def test_a_sympy_error_inside_the_bridge_is_a_named_unsupported_operation():
    """-(z > 0) inside SymPy (``bad operand type for unary -``) never reaches the user
    as such: the primitive and the user's line are named."""

    def loss(z, k):
        return -jax.nn.log_softmax(z)[k] + jnp.min(z > 0)

    with pytest.raises(bridge.UnsupportedOperation) as err:
        bridge.sympy_from_jax(loss, sp.symbols("z0:3", real=True), sampled=0)
    text = str(err.value)
    assert "'reduce_min'" in text and "test_provers.py:" in text
    assert "StrictGreaterThan" not in text
