"""Shared helpers of the survey claims: one token's coefficient c three ways.

c = d(objective)/d log pi_k. With objective = -loss and pi = softmax(z), the logit
gradient of the objective of a token rule is c (e_k - pi), so
c = -(d loss/d z_k) / (1 - pi_k). Routes: the registry's analytic ``coefficient``,
float64 autodiff of the registry's JAX ``loss``, and the exact derivative of its SymPy
spec at rational probabilities.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.claims import require_float64
from theorycheck.losses import LOSSES
from theorycheck.symbolic import unfreeze


def three_token(pk, vocab: int = 3):
    """A distribution with pi_k = pk (k = 0), the rest uniform (floats or Rationals)."""
    rest = (1 - pk) / (vocab - 1)
    return [pk] + [rest] * (vocab - 1)


def _coefficient_inputs(name: str, on_policy: bool) -> dict:
    spec = LOSSES[name]
    extra = {}
    if "divergence" in spec.coefficient_inputs:
        if not on_policy:
            raise ValueError(f"{name} needs whole distributions")
        extra["divergence"] = 0.0
    if "ddot" in spec.coefficient_inputs:
        extra["ddot"] = 0.0
    if name == "gspo_token":
        extra["seq_log_ratio"] = 0.0
    return extra


def analytic_coefficient(name, p, q, adv, *, on_policy=False, **params):
    """The registry's closed-form coefficient (float64) and its gate flag."""
    require_float64()
    spec = LOSSES[name]
    extra = {**_coefficient_inputs(name, on_policy), **params}
    c, gated = spec.coefficient(
        jnp.asarray(p, jnp.float64), jnp.asarray(q, jnp.float64), adv, **extra
    )
    return float(c), bool(gated)


@functools.cache
def _value_and_grad(name: str, sampled: int, params: tuple, jit: bool = True):
    spec = LOSSES[name]
    ratio = "behavior_logp" in spec.inputs

    def f(zz, mu, adv):
        inputs = {"behavior_logp": mu} if ratio else {}
        return spec.loss(zz, sampled, adv=adv, **inputs, **dict(params))

    vg = jax.value_and_grad(f)
    return jax.jit(vg) if jit else vg


def autodiff_coefficient(name, policy, behavior, adv, *, sampled=0, jit=True, **params):
    """c from float64 autodiff of the registry loss; also the objective value
    (``jit=False``: eager, cheaper for a handful of evaluations)."""
    require_float64()
    z = jnp.log(jnp.asarray(policy, jnp.float64))
    mu = jnp.log(jnp.asarray(behavior, jnp.float64))
    fn = _value_and_grad(name, sampled, tuple(sorted(params.items())), jit)
    val, grad = fn(z, mu, jnp.asarray(adv, jnp.float64))
    pi = jax.nn.softmax(z)
    c = -grad[sampled] / (1.0 - pi[sampled])
    # every other component must be -c * pi_j (the token-rule form)
    rest = np.delete(np.asarray(grad - c * pi), sampled)
    if np.max(np.abs(rest)) > 1e-9 * max(1.0, abs(float(c))):
        raise ValueError(f"{name}: gradient is not c (e_k - pi): residual {rest}")
    return float(c), -float(val)


def symbolic_coefficient(name, policy, behavior, adv, *, sampled=0, **params):
    """Exact c and objective value from the registry SymPy spec at rational points."""
    spec = LOSSES[name]
    vocab = len(policy)
    z = sp.symbols(f"z0:{vocab}", real=True)
    inputs = {"adv": sp.nsimplify(adv)}
    if "behavior_logp" in spec.inputs:
        inputs["behavior_logp"] = [sp.log(x) for x in behavior]
    expr = spec.symbolic(list(z), sampled, **inputs, **params)
    at = {zi: sp.log(pi) for zi, pi in zip(z, policy)}
    d = unfreeze(sp.diff(expr, z[sampled])).subs(at)
    c = sp.simplify(-d / (1 - policy[sampled]))
    value = sp.simplify(-unfreeze(expr).subs(at))
    return c, value
