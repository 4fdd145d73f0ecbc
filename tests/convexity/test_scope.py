"""What a verdict covers: every sampled token and every V only with an argument.

Meta-tests: each loss of ``examples/losses/adversarial.py`` was built so that a
checker which decides ``k = 0`` at V = 3, 4 and extends the answer to every token and
every V says ``convex`` although the loss is not convex (the truth is derived by hand
in each docstring). The verdicts must be sound: never ``convex`` for a non-convex loss,
never ``not_convex`` without a counterexample that an independent ``jax.hessian``
confirms at its own V and k.
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.convexity import _stages as st
from theorycheck.convexity import check_convexity
from theorycheck.convexity._combine import combine
from theorycheck.convexity._genericity import analyse, one_program
from theorycheck.convexity._invariance import program_text_of, same_program
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus, Verdict

EX = pathlib.Path(__file__).resolve().parents[2] / "examples" / "losses"
ADV = f"{EX / 'adversarial.py'}"

#: name -> (truth, equivariant, one formula for every V), derived by hand.
TRUTH = {
    "last_token_flip": ("not_convex", False, False),
    "python_branch": ("not_convex", False, True),
    "float_factor": ("not_convex", False, True),
    "token_threshold": ("not_convex", False, True),
    "take_one_hot": ("convex", True, True),
    "fixed_token": ("convex", False, True),
    "iota_threshold": ("not_convex", False, False),
    "iota_weighted": ("not_convex", False, False),
    "count_from_five": ("not_convex", False, False),
    "mu_threshold": ("not_convex", True, False),
    "vocab_scale": ("not_convex", True, False),
    "mean_squares": ("convex", True, True),
    "carried_witness": ("not_convex", False, False),
    "shape_branch": ("not_convex", True, False),
    "len_branch": ("not_convex", False, False),
}
#: Python branches on V that no traced V reaches: the relabelling argument can be
#: shown at the traced V only.
HIDDEN_V = {"shape_branch", "len_branch"}


def _module():
    spec = importlib.util.spec_from_file_location("adversarial", ADV)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _genericity(name):
    resolved = resolve(f"{ADV}:{name}")
    closed, dynamic, failure = st._traces(resolved, {}, st.GENERIC_VOCABS)
    assert failure is None
    texts = {v: program_text_of(c) for v, c in closed.items()}
    inputs = build_inputs(resolved, {}, 3, 0, exact=False).numeric
    arrays = tuple(k for k, v in inputs.items() if np.ndim(v) > 0)
    gen = analyse(closed, arrays, dynamic=dynamic, same=not same_program(texts))
    _, _, staged = st.invariance_stage(resolved, {})  # with the symbolic-V trace
    assert (staged.equivariant, staged.why_k) == (gen.equivariant, gen.why_k)
    return staged


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_the_extension_arguments_see_each_planted_dependence(name):
    _, equivariant, uniform = TRUTH[name]
    gen = _genericity(name)
    # "uniform" may only be claimed where the formula is one for every V; the
    # relabelling argument only where the loss treats every token alike (the fixed
    # token -log pi_0 is convex at every k, but it is not relabelled with k: no claim).
    every_v = gen.equivariant and gen.equivariant_v is None
    if name in HIDDEN_V:  # the concrete traces alone would claim every V
        assert gen.equivariant_v is not None and not gen.uniform, gen
        assert "symbolic vocabulary size" in gen.why_v
    else:
        assert every_v is equivariant, gen
    if not uniform:
        assert not gen.uniform, gen
    assert gen.traced is (name != "python_branch")


def test_every_adversarial_loss_is_in_the_truth_table():
    names = {n for n in dir(_module()) if not n.startswith("_") and n != "jax"}
    assert names - {"jnp"} == set(TRUTH)


def _confirm(name, ce, inputs):
    """An independent float64 re-check: u^T H u by forward-over-reverse autodiff at
    the counterexample's own V and k (a Hessian-vector product: the counterexample
    may be at a tokenizer's V, where a dense Hessian would not fit in memory)."""
    loss = getattr(_module(), name)
    with jax.enable_x64(True):
        z = jnp.asarray(ce["logits"], jnp.float64)
        u = jnp.asarray(ce["direction"], jnp.float64)
        grad = jax.grad(lambda x: loss(x, ce["sampled"], **inputs))
        return float(u @ jax.jvp(grad, (z,), (u,))[1])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRUTH))
def test_adversarial_verdicts_are_sound(name):
    truth = TRUTH[name][0]
    res = check_convexity(f"{ADV}:{name}", num_starts=64)
    if truth == "not_convex":
        assert res.verdict != "convex", (res.scope, res.methods)
    if res.verdict == "not_convex":
        ce = res.counterexample
        resolved = resolve(f"{ADV}:{name}")
        inputs = build_inputs(resolved, {}, ce["vocab"], ce["sampled"], exact=False)
        assert _confirm(name, ce, inputs.numeric) < 0
        assert truth == "not_convex"
    # The planted losses are decided (the corpus below states the fraction).
    assert res.verdict == truth, (res.scope, res.methods)


@pytest.mark.slow
def test_a_witness_is_not_carried_to_another_vocabulary():
    # log pi_k for V <= 5, -log pi_k from V = 6 on: the counterexample at V = 3 must
    # not be reported at V = 8 (where the loss is convex).
    res = check_convexity(f"{ADV}:carried_witness", vocab=(8,), num_starts=64)
    assert res.verdict == "not_convex"
    assert res.counterexample["vocab"] < 6
    assert "8" not in res.scope.split(",")[0]


def test_positive_curvature_in_both_routes_is_never_a_counterexample():
    resolved = resolve("sft")
    inputs = build_inputs(resolved, {}, 3, 0, exact=False).numeric
    rec = st.recheck_stage(
        resolved.loss, [0.0, 0.0, 0.0], [1.0, -1.0, 0.0], inputs, "z"
    )
    assert rec.status is StageStatus.UNCONFIRMED and rec.counterexample["positive"]
    refuted = StageRecord(
        "structure",
        StageStatus.REFUTED,
        "d",
        Stage.STRUCTURE,
        Scope.every(3),
        Scope.of(3, 4),
        counterexample={"curvature": -1.0},
    )
    out = combine([st.withdraw(refuted, "positive curvature")], Scope.of(3))
    assert out.verdict is Verdict.UNKNOWN


def _rec(stage, status, scope, tokens):
    return StageRecord("m", status, "d", stage, scope, scope, tokens=tokens)


def test_tokens_extend_only_beside_the_relabelling_argument():
    proof = _rec(Stage.FORMAL, StageStatus.PROVED, Scope.of(3), frozenset({0}))
    tokens = StageRecord("sampled tokens", StageStatus.CONFIRMED, "d", Stage.TOKENS)
    out = combine([proof], Scope.of(3))
    assert out.verdict is Verdict.CONVEX and out.text == "V = 3, sampled token k = 0"
    out = combine([proof, tokens], Scope.of(3))
    assert out.text == "V = 3, every sampled token"
    # a proof at k = 0 and a counterexample at k = 2 do not contradict each other
    ce = {"curvature": -1.0}
    ref = StageRecord(
        "numeric search",
        StageStatus.REFUTED,
        "d",
        Stage.SEARCH,
        Scope.of(3),
        Scope.of(3),
        ce,
        tokens=frozenset({2}),
    )
    out = combine([proof, ref], Scope.of(3))
    assert (
        out.verdict is Verdict.NOT_CONVEX and out.text == "V = 3, sampled token k = 2"
    )
    assert not any(m.stage is Stage.CONSISTENCY for m in out.methods)
    # all three tokens at V = 3 decided: every token at V = 3
    proofs = [
        _rec(Stage.FORMAL, StageStatus.PROVED, Scope.of(3), frozenset({k}))
        for k in (0, 1, 2)
    ]
    assert combine(proofs, Scope.of(3)).text == "V = 3, every sampled token"


def test_one_program_evaluates_the_traced_program():
    loss = resolve("sft").loss
    wrapped = one_program(loss)
    z = jnp.asarray([0.3, -1.0, 2.0])
    for k in range(3):
        assert float(wrapped(z, k)) == pytest.approx(float(loss(z, k)))
    # a Python branch on the sampled token cannot be evaluated through it
    with pytest.raises(jax.errors.ConcretizationTypeError):
        one_program(_module().python_branch)(z, 1)
