"""Adversarial corpus: losses whose convexity depends on V in ways that traces at a
few V cannot see. Three classes:

1. a coefficient that depends on V through the token axis (a sum of log-probabilities,
   a count of the tokens smuggled through the logits);
2. Python that reads V's value (``in``, ``%``, a dictionary keyed by V, ``int``);
3. rounding read as the identity (``reduce_precision``, low-precision casts).

The sound answers: never ``convex`` for every V; where the derivation in V reaches
the loss (class 1), ``not_convex`` from the V where the sign turns, with a
counterexample re-checked there; elsewhere ``not_convex`` at the first tokenizer
size where the loss is not convex (evaluated at that V); rounding never proved
convex.
"""

from __future__ import annotations

import numpy as np
import pytest

from theorycheck.convexity import check_convexity
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._vform import derive_in_v, v_threshold

HEADER = (
    "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n\n"
    "def ce(z, k):\n    return -jax.nn.log_softmax(z)[k]\n\n"
)

#: name -> (body, the V it is refuted at, whether the derivation in V finds that V
#: exactly: scope ``all V >= V0``; otherwise the first tokenizer size where the loss
#: is not convex is refuted there: scope ``V = V0``)
CASES = {
    # class 1: H = (1 - V/100) S
    "sum_of_logprobs": (
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    return -lp[k] + 0.01 * jnp.sum(lp)\n",
        101,
        True,
    ),
    # class 1: the same sum as a dot product with ones, coefficient 1/50
    "dot_with_ones": (
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    return -lp[k] + 0.02 * jnp.dot(jnp.ones_like(z), lp)\n",
        51,
        True,
    ),
    # class 1: V counted through the logits, exp(z - z) = 1
    "count_by_exp": (
        "def loss(z, k):\n    n = jnp.sum(jnp.exp(z - z))\n"
        "    return (1.0 - 0.05 * n) * jax.nn.logsumexp(z) - z[k]\n",
        21,
        True,
    ),
    # class 1: V counted by a comparison, (z == z) = 1
    "count_by_eq": (
        "def loss(z, k):\n    n = jnp.sum(z == z)\n"
        "    return (1.0 - 0.05 * n) * jax.nn.logsumexp(z) - z[k]\n",
        21,
        True,
    ),
    # class 1: log V from logsumexp(0 z): not a polynomial in V, not followed
    "log_v_by_logsumexp": (
        "def loss(z, k):\n    c = 1.0 - 0.3 * jax.nn.logsumexp(0.0 * z)\n"
        "    return c * jax.nn.logsumexp(z) - z[k]\n",
        32000,
        False,
    ),
    # class 1: V from 1 / max(softmax(0 z)): a maximum that does not cancel
    "v_by_max_softmax": (
        "def loss(z, k):\n    n = 1.0 / jnp.max(jax.nn.softmax(0.0 * z))\n"
        "    return (1.0 - 0.05 * n) * jax.nn.logsumexp(z) - z[k]\n",
        32000,
        False,
    ),
    # class 2: a tokenizer special-cased by its size
    "python_in": (
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    if z.shape[0] in (50257, 151936):\n        return lp[k]\n"
        "    return -lp[k]\n",
        50257,
        False,
    ),
    # class 2: padded vocabularies
    "python_mod": (
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    if z.shape[0] % 64 == 0:\n        return lp[k]\n    return -lp[k]\n",
        32000,
        False,
    ),
    # class 2: a table keyed by V
    "python_dict": (
        "SCALE = {50257: 1.0}\n\n"
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    return SCALE.get(z.shape[0], -1.0) * lp[k]\n",
        50257,
        False,
    ),
    # class 2: int(V) raises with a symbolic V; the except branch hides it
    "python_int": (
        "def loss(z, k):\n    lp = jax.nn.log_softmax(z)\n"
        "    try:\n        n = int(z.shape[0])\n    except Exception:\n        n = 3\n"
        "    return -lp[k] if n < 1000 else lp[k]\n",
        32000,
        False,
    ),
}

ROUNDING = {
    "reduce_precision": (
        "def loss(z, k):\n"
        "    return lax.reduce_precision(ce(z, k), exponent_bits=8, mantissa_bits=7)\n"
    ),
    "bfloat16_round_trip": (
        "def loss(z, k):\n"
        "    return ce(z, k).astype(jnp.bfloat16).astype(jnp.float64)\n"
    ),
    "float16_logits": (
        "def loss(z, k):\n    return ce(z.astype(jnp.float16).astype(jnp.float64), k)\n"
    ),
}


def _spec(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + body)
    return f"{path}:loss"


def _vform(spec):
    resolved = resolve(spec)
    built = build_inputs(resolved, {}, 3, 0, exact=False)
    return derive_in_v(resolved.loss, built.numeric, built.params)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_derivation_in_v_never_extends_what_it_cannot_follow(tmp_path, name):
    body, v0, exact = CASES[name]
    vform = _vform(_spec(tmp_path, name, body))
    assert not (vform.covered and vform.v_free), vform
    assert v_threshold(vform) == (v0 if exact else None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_all_v_verdict_without_the_argument(tmp_path, name):
    body, v0, exact = CASES[name]
    res = check_convexity(_spec(tmp_path, name, body), num_starts=32, timeout_s=5.0)
    assert str(res.verdict) == "not_convex", res.scope
    assert res.scope.startswith(f"all V >= {v0}" if exact else f"V = {v0},"), res.scope
    assert res.counterexample["vocab"] == v0
    if exact:  # the derivation's witness: every logit 0, u = e_1 - e_2
        assert np.allclose(res.counterexample["logits"], 0.0)


@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_is_never_the_identity(tmp_path, name):
    spec = _spec(tmp_path, name, ROUNDING[name])
    assert not _vform(spec).covered
    res = check_convexity(spec, num_starts=32, timeout_s=5.0)
    assert str(res.verdict) != "convex", (res.scope, res.methods)


def test_the_derivation_covers_cross_entropy_for_every_v(tmp_path):
    vform = _vform(_spec(tmp_path, "ce", "def loss(z, k):\n    return ce(z, k)\n"))
    assert vform.covered and vform.v_free
    assert str(vform.form) == "-x + log(exp(w) + exp(x))"
