"""Meta-tests of the soundness rules: for each rule, a deliberately wrong loss that the
checker would call convex without the rule, now caught."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck import BadInput
from theorycheck.convexity import _search, _stages, check_convexity
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus

HEADER = "import jax\nimport jax.numpy as jnp\n\n"


def _spec(tmp_path, body, func="loss"):
    path = tmp_path / f"{func}_file.py"
    path.write_text(HEADER + body)
    return f"{path}:{func}"


def test_the_functions_own_default_is_used(tmp_path):
    # -adv log pi_k with the function's default adv = -1: not convex. Injecting the
    # documented adv = 1 (the old rule) would check cross-entropy and say convex.
    spec = _spec(
        tmp_path,
        "def loss(z, k, adv=-1.0):\n    return -adv * jax.nn.log_softmax(z)[k]\n",
    )
    res = check_convexity(spec, num_starts=32)
    assert res.params == {"adv": -1.0}
    assert (
        res.verdict == "not_convex" and res.scope == "all V >= 3, every sampled token"
    )
    # --set beats the function's default
    res = check_convexity(spec, params={"adv": 1.0}, num_starts=32)
    assert res.params == {"adv": 1.0} and res.verdict == "convex"


def test_precedence_and_documented_defaults_only_without_a_default(tmp_path):
    spec = _spec(
        tmp_path,
        "def loss(z, k, *, adv, behavior_logp, eps=0.1):\n"
        "    return -adv * jax.nn.log_softmax(z)[k] + 0 * behavior_logp[k] + eps\n",
    )
    built = build_inputs(resolve(spec), {"eps": 0.3}, 4, 0)
    assert built.params["adv"] == 1.0 and built.params["eps"] == 0.3
    assert built.params["q"] == 0.5
    assert built.params["behavior_logp"].startswith("log mu; mu_k = q")
    np.testing.assert_allclose(
        np.exp(built.numeric["behavior_logp"]), [0.5, 1 / 6, 1 / 6, 1 / 6]
    )
    assert "eps" in built.numeric  # --set: passed explicitly
    kept = build_inputs(resolve(spec), {}, 4, 0)
    assert "eps" not in kept.numeric and kept.params["eps"] == 0.1  # the function's


@pytest.mark.parametrize(
    "params,needle",
    [
        ({"bta": 2.0}, "unknown parameter 'bta'; it takes: adv, beta, q"),
        ({"behavior_logp": 0.0}, "an array input, built from q"),
        ({"q": 1.5}, "q = 1.5: the behavior probability must be in (0, 1)"),
        ({"beta": float("inf")}, "must be finite"),
    ],
)
def test_unknown_or_bad_keys_are_refused(tmp_path, params, needle):
    spec = _spec(
        tmp_path,
        "def loss(z, k, adv=1.0, beta=0.5, behavior_logp=None):\n"
        "    return -adv * jax.nn.log_softmax(z)[k]\n",
    )
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace(")", r"\)")):
        check_convexity(spec, params=params)


def test_registry_rule_refuses_a_parameter_it_does_not_have():
    with pytest.raises(BadInput, match="ppo: unknown parameter 'delta'; it takes: adv"):
        check_convexity("ppo", params={"delta": 0.1})
    with pytest.raises(BadInput, match="unknown parameter 'adv'"):
        check_convexity("sft", params={"adv": 1.0})


BRANCHY = """
def loss(z, k):
    lp = jax.nn.log_softmax(z)
    if z.shape[0] >= 5:  # a different formula from V = 5 on
        return lp[k]
    return -lp[k]

def loss_convex(z, k):
    lp = jax.nn.log_softmax(z)
    return -2.0 * lp[k] if z.shape[0] >= 5 else -lp[k]
"""


def _vocab_record(res) -> dict:
    """The ``vocab invariance`` method of a verdict."""
    return next(m for m in res.methods if m["method"] == "vocab invariance")


def test_all_v_only_when_the_jaxpr_is_one_program(tmp_path):
    path = tmp_path / "branchy.py"
    path.write_text(HEADER + BRANCHY)
    # Cross-entropy at V = 3, 4 (the structure fits agree) but not convex from V = 5:
    # the jaxprs differ, the search runs there too and finds the counterexample.
    res = check_convexity(f"{path}:loss", num_starts=32)
    vocab = _vocab_record(res)
    assert vocab["status"] == "unknown"
    assert "V = 5, 16" in vocab["detail"]
    # refuted at V = 5 by the search and at the first tokenizer size by its probe
    assert res.verdict == "not_convex"
    assert res.scope == "V in {5, 32000}, sampled token k = 0"
    assert res.counterexample["vocab"] in (5, 32000)
    # Convex at every V but a different program: the scope is the V decided.
    res = check_convexity(f"{path}:loss_convex", num_starts=32)
    # (which V the stages decide depends on the run; never "all V", never a V that
    # was only probed)
    assert res.verdict == "convex" and res.scope.startswith("V in {")
    assert res.scope.endswith("}, every sampled token") and "32000" not in res.scope


HIDDEN = """
def above_40(z, k):
    lp = jax.nn.log_softmax(z)
    if z.shape[0] > 40:  # the same program at every traced V, another above 40
        return lp[k]
    return -lp[k]

def above_1000(z, k):
    lp = jax.nn.log_softmax(z)
    return lp[k] if z.size > 1000 else -lp[k]

def token_0_above_30(z, k):
    lp = jax.nn.log_softmax(z)
    if len(z) > 30:  # not equivariant above 30
        return -lp[k] + 2.0 * lp[0]
    return -lp[k]
"""


def test_a_branch_on_v_that_no_traced_v_reaches(tmp_path):
    # The jaxprs at V = 2, 3, 4, 5, 16 are one program and equivariant: only the
    # trace with a symbolic V shows that the Python compares V with a constant.
    path = tmp_path / "hidden.py"
    path.write_text(HEADER + HIDDEN)
    res = check_convexity(f"{path}:above_40", num_starts=32)
    vocab = _vocab_record(res)
    assert vocab["status"] == "unknown"
    assert "symbolic vocabulary size" in vocab["detail"]
    assert "'V' > '40'" in vocab["detail"]
    # the search runs above the constant of the comparison and refutes there; the
    # relabelling argument was shown at the traced V only
    assert res.verdict == "not_convex"
    assert res.scope == "V in {42, 32000}, sampled token k = 0"
    assert res.counterexample["vocab"] in (42, 32000)
    # a constant beyond the search's reach: refuted where a tokenizer's V lies
    res = check_convexity(f"{path}:above_1000", num_starts=32)
    assert res.verdict == "not_convex" and res.scope == "V = 32000, sampled token k = 0"
    # len(z) raises on a symbolic V without naming a constant: the programs at
    # V = 16 and 64 differ, a bisection finds V = 31, and there (not equivariant)
    # the search checks k = 0, 1, V - 1
    res = check_convexity(f"{path}:token_0_above_30", num_starts=32)
    assert res.verdict == "not_convex"
    assert res.scope == "V in {31, 32000}, sampled token k = 0"


def test_a_wrong_proof_is_withdrawn_by_a_rechecked_counterexample(
    tmp_path, monkeypatch
):
    spec = _spec(tmp_path, "def loss(z, k):\n    return jax.nn.log_softmax(z)[k]\n")
    real = _stages.structure_finish

    def wrong_prover(*args, **kwargs):  # claims convex for every V, "always"
        _, out, used = real(*args, **kwargs)
        fake = StageRecord(
            "structure",
            StageStatus.PROVED,
            "a deliberately wrong proof",
            Stage.STRUCTURE,
            Scope.every(2),
            Scope.of(3, 4),
            condition="always",
        )
        return fake, _stages.StructureOutcome(out.derived), used

    monkeypatch.setattr(_stages, "structure_finish", wrong_prover)
    res = check_convexity(spec, num_starts=32)
    assert res.verdict == "not_convex" and res.condition is None
    assert res.counterexample is not None and res.counterexample["curvature"] < 0
    conflicts = [m for m in res.methods if m["method"] == "consistency"]
    assert any("structure proved convex (all V >= 2)" in m["detail"] for m in conflicts)


def _k3_loss(z, k, adv=-1.0, beta=1.0, ent=0.0):
    """PG + k3 KL penalty to a fixed reference (log 1/3) + entropy bonus."""
    lp = jax.nn.log_softmax(z)
    lr = jnp.log(1.0 / 3.0) - lp[k]
    entropy = -jnp.sum(jnp.exp(lp) * lp)
    return -adv * lp[k] + beta * (jnp.exp(lr) - 1.0 - lr) - ent * entropy


@pytest.mark.parametrize("ent", [0.0, 0.01])
def test_search_finds_moderate_negative_curvature_of_pg_k3_entropy(ent):
    # Without the entropy term, at z = 0 (r = 1): H = v v^T - S (k3 gives v v^T, the
    # PG part with A = -1 gives -S), so lambda_min = -1/3 on the direction orthogonal
    # to 1 and v: the closed form against jax.hessian.
    h = jax.hessian(lambda z: _k3_loss(z, 0, ent=ent))(jnp.zeros(3))
    lam = float(np.linalg.eigvalsh(np.asarray(h))[0])
    if ent == 0.0:
        assert abs(lam + 1.0 / 3.0) < 1e-12
    assert lam < -0.3
    out = _search.search(lambda z, k: _k3_loss(z, k, ent=ent), 3, 0, {}, seed=3)
    assert out.found and out.curvature < 0
    assert abs(out.curvature_fd - out.curvature) <= 1e-2 * abs(out.curvature)
