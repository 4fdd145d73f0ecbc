"""Every registry entry's SymPy specification equals its JAX loss: values and logit
gradients at random points (V = 4, float64), the symbolic gradient taken with Frozen
quantities held constant. Two independent routes to the same function."""

from __future__ import annotations

import zlib

import jax
import numpy as np
import pytest
import sympy as sp

from tests.losses._cases import behavior_with_prob, logits_with_prob
from theorycheck.losses import LOSSES
from theorycheck.symbolic import unfreeze
from theorycheck.testing import assert_close

VOCAB = 4
Z = sp.symbols(f"z0:{VOCAB}", real=True)
#: top-K rules with K = 2 < V so that the tail bucket matters; a few more variants.
VARIANTS = {
    "dppo_topk_tv": {"topk": 2},
    "dppo_topk_kl": {"topk": 2},
    "dppo_topk_tv_k_slots": {"topk": 2},
    "dppo_topk_kl_k_slots": {"topk": 2},
    "predictive_kl_topk": {"topk": 2},
    "predictive_tv_topk": {"topk": 2},
}


def _inputs(name, spec, rng, k, p, q):
    inputs = {}
    if "adv" in spec.inputs:
        inputs["adv"] = float(rng.choice([-1.3, 0.7, 2.0]))
    if "behavior_logp" in spec.inputs:
        inputs["behavior_logp"] = behavior_with_prob(rng, q, k, VOCAB)
    if "old_logits" in spec.inputs:
        inputs["old_logits"] = rng.normal(size=VOCAB)
    if name == "gspo":
        inputs.update(other_log_ratio=1e-4, length=3)
    if name == "gspo_token":
        inputs["seq_log_ratio"] = -2e-4
    return inputs


def _cases():
    out = []
    for name in sorted(LOSSES):
        out.append((name, name, {}))
    for variant, params in VARIANTS.items():
        base = variant.removesuffix("_topk")
        out.append((variant, base, params))
    out.append(("lco_kld_dense", "lco_kld", {}))
    out.append(("lco_mse_code_dense", "lco_mse_code", {}))
    return out


@pytest.mark.parametrize("label,name,params", _cases(), ids=[c[0] for c in _cases()])
def test_symbolic_matches_loss_value_and_gradient(label, name, params):
    spec = LOSSES[name]
    rng = np.random.default_rng(zlib.crc32(label.encode()))
    # One compilation per rule (eager autodiff through the top-K code is far slower).
    value_and_grad = jax.jit(
        jax.value_and_grad(lambda zz, kk, inputs: spec.loss(zz, kk, **inputs, **params))
    )
    for _ in range(2):
        k = int(rng.integers(0, VOCAB))
        # Ratios in [0.5, 2]: gates and clips are exercised on both sides across rules.
        p = float(rng.uniform(0.15, 0.6))
        q = float(np.clip(p / np.exp(rng.uniform(-0.7, 0.7)), 0.05, 0.9))
        z = logits_with_prob(rng, p, k, VOCAB)
        inputs = _inputs(name, spec, rng, k, p, q)
        if label.endswith("_dense"):
            inputs["adv"] = rng.normal(size=VOCAB)
        expr = spec.symbolic(list(Z), k, **inputs, **params)
        at = dict(zip(Z, (sp.Float(v, 30) for v in z)))
        value = float(unfreeze(expr).subs(at).evalf(30))
        grad = [float(unfreeze(sp.diff(expr, zi)).subs(at).evalf(30)) for zi in Z]
        jax_value, jax_grad = value_and_grad(z, k, inputs)
        assert_close(jax_value, value, err_msg=f"{label} value")
        assert_close(jax_grad, grad, err_msg=f"{label} gradient")
