"""Registry-wide checks: every token rule's analytic coefficient against autodiff of its
JAX loss (1000 randomized float64 cases per rule, then the boundaries of every clip,
gate and guard), and the defaults shared by loss, coefficient and symbolic spec."""

from __future__ import annotations

import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.losses._cases import behavior_with_prob, logits_with_prob, random_pq
from theorycheck.losses import LOSSES, TOKEN_RULES, RuleFamily
from theorycheck.numeric import binary_kl, ddot, divergence
from theorycheck.testing import assert_close

N_CASES = 1000
#: top-K rules are tested with K = 3 < V = 6 so that the tail bucket is non-empty.
PARAM_OVERRIDES = {
    name: {"topk": 3}
    for name in (
        "dppo_topk_tv",
        "dppo_topk_kl",
        "dppo_topk_tv_k_slots",
        "dppo_topk_kl_k_slots",
    )
}


def _coefficient_inputs(name, spec, params, z, k, mu, rng, *, sequence):
    """Extra inputs: the whole-distribution quantities, computed by
    theorycheck.numeric."""
    n = z.shape[0]
    loss_kw, coef_kw = {}, {}
    if name in ("dppo_topk_tv", "dppo_topk_kl"):
        kind = name.removeprefix("dppo_")
        coef_kw["divergence"] = divergence(mu, z, k, kind=kind, topk=params["topk"])
    if name in ("dppo_topk_tv_k_slots", "dppo_topk_kl_k_slots"):
        kind = name.removeprefix("dppo_").removesuffix("_k_slots")
        coef_kw["divergence"] = divergence(
            mu, z, k, kind=kind, topk=params["topk"], support="k_slots"
        )
    if name.startswith("predictive_"):
        kind = name.removeprefix("predictive_")
        topk = int(params["topk"])
        if topk:
            coef_kw["divergence"] = divergence(mu, z, k, kind=f"topk_{kind}", topk=topk)
            coef_kw["ddot"] = ddot(
                mu, z, k, kind=kind, estimator="topk_aggregated", topk=topk
            ).ddot
        else:
            coef_kw["divergence"] = divergence(mu, z, k, kind=kind)
            coef_kw["ddot"] = ddot(mu, z, k, kind=kind).ddot
    if name == "gspo" and sequence:
        loss_kw["other_log_ratio"] = rng.uniform(-0.5, 0.5, size=n) * 1e-3
        loss_kw["length"] = rng.integers(1, 5, size=n).astype(np.float64)
    if name == "gspo_token" and sequence:
        loss_kw["seq_log_ratio"] = rng.uniform(-1e-3, 1e-3, size=n)
    for key in loss_kw:
        if key in spec.coefficient_inputs:
            coef_kw[key] = loss_kw[key]
    return loss_kw, coef_kw


def _objective_grads(spec, params, z, k, mu, adv, loss_kw):
    def one(z1, k1, mu1, a1, extra):
        kw = {"adv": a1, **extra, **params}
        if "behavior_logp" in spec.inputs:
            kw["behavior_logp"] = mu1
        return jax.grad(lambda zz: -spec.loss(zz, k1, **kw))(z1)

    # jit: one compilation per rule is several times cheaper than eager dispatch.
    return jax.jit(jax.vmap(one))(
        jnp.asarray(z),
        jnp.asarray(k),
        jnp.asarray(mu),
        jnp.asarray(adv),
        {key: jnp.asarray(v) for key, v in loss_kw.items()},
    )


def _check(name, p, q, adv, params, seed, *, sequence=True):
    """Autodiff gradient of the objective == c (e_k - pi) on every case; with
    ``sequence=False`` GSPO sees one-token responses (its ratio is p/q)."""
    spec = LOSSES[name]
    rng = np.random.default_rng(seed)
    n = p.shape[0]
    k = rng.integers(0, 6, size=n)
    z = np.stack([logits_with_prob(rng, p[i], k[i]) for i in range(n)])
    mu = np.stack([behavior_with_prob(rng, q[i], k[i]) for i in range(n)])
    loss_kw, coef_kw = _coefficient_inputs(
        name, spec, params, z, k, mu, rng, sequence=sequence
    )
    grads = _objective_grads(spec, params, z, k, mu, adv, loss_kw)
    pi = jax.nn.softmax(jnp.asarray(z), axis=-1)
    p_real = pi[jnp.arange(n), k]
    coefficient = jax.jit(
        lambda p1, q1, a1, kw: spec.coefficient(p1, q1, a1, **kw, **params)
    )
    c, gated = coefficient(
        p_real, jnp.exp(jnp.asarray(mu)[jnp.arange(n), k]), jnp.asarray(adv), coef_kw
    )
    direction = jax.nn.one_hot(k, 6, dtype=pi.dtype) - pi
    expected = jnp.asarray(c)[:, None] * direction
    assert_close(grads, expected, err_msg=name)
    return np.asarray(c), np.asarray(gated)


def _params(name):
    return {**LOSSES[name].defaults, **PARAM_OVERRIDES.get(name, {})}


@pytest.mark.parametrize("name", TOKEN_RULES)
def test_coefficient_matches_autodiff_on_random_cases(name):
    p, q, adv = random_pq(np.random.default_rng(0), N_CASES)
    c, gated = _check(name, p, q, adv, _params(name), seed=1)
    assert np.all(np.isfinite(c))
    assert not np.any(c[gated] != 0.0), "a gated token has a nonzero coefficient"


def _ratio_boundaries(name, params):
    """Ratios at which the rule's clip or gate switches (empty for ungated rules)."""
    if name in ("ppo", "dapo", "dual_clip", "gspo", "gspo_token", "clip_cov", "luspo"):
        out = [1.0 - params["eps_low"], 1.0 + params["eps_high"]]
        return out + ([params["kappa"]] if name == "dual_clip" else [])
    if name == "gmpo":  # log-space bounds
        return [math.exp(-params["eps_low"]), math.exp(params["eps_high"])]
    if name in ("cispo", "glm5"):
        return [params["low"], params["high"]]
    if name in ("dppo_capped", "dppo_binary_kl_capped"):
        return [params["cap"]]
    if name == "vespo":  # TRL clamps log w at log 1e-8
        return [1e-8]
    return []


def _boundary_pq(name, params):
    """(p, q) pairs 1e-9 (relative) either side of every boundary, and of the guard."""
    pairs = []
    for b in _ratio_boundaries(name, params):
        for side in (1 - 1e-9, 1 + 1e-9):
            for q in (0.05, 0.15):
                pairs.append((b * side * q, q))
    return pairs + _mask_boundary_pq(name, params) + _guard_pq(params)


def _mask_boundary_pq(name, params):
    """(p, q) pairs either side of a binary-divergence mask's threshold."""
    pairs = []
    if name in ("dppo_binary_tv", "dppo_capped"):
        for q in (0.3, 0.6):
            for sign in (-1, 1):
                for eps in (-1e-9, 1e-9):
                    pairs.append((q + sign * (params["delta"] + eps), q))
    if name in ("dppo_binary_kl", "dppo_binary_kl_capped"):
        for q in (0.3, 0.6):
            for p in _binary_kl_level(q, params["delta"]):
                for side in (1 - 1e-9, 1 + 1e-9):
                    pairs.append((q + (p - q) * side, q))
    return pairs


def _guard_pq(params):
    """(p, q) pairs either side of the log-ratio guard, on both sides of r = 1."""
    pairs = []
    if "log_ratio_clamp" in params and math.isfinite(params["log_ratio_clamp"]):
        g = params["log_ratio_clamp"]
        for e in (-1e-6, 1e-6):
            pairs.append((0.5, 0.5 * math.exp(-(g + e))))
            pairs.append((1e-10, 1e-10 * math.exp(g + e)))
    return pairs


def _binary_kl_level(q, delta):
    """The two p with binary_kl(p, q) = delta (bisection on each side of q)."""
    out = []
    for lo, hi in ((1e-12, q), (q, 1 - 1e-12)):
        f = lambda p: float(binary_kl(p, q)) - delta  # noqa: E731
        a, b = lo, hi
        for _ in range(200):
            m = 0.5 * (a + b)
            if (f(a) > 0) == (f(m) > 0):
                a = m
            else:
                b = m
        out.append(0.5 * (a + b))
    return out


@pytest.mark.parametrize("name", TOKEN_RULES)
def test_coefficient_matches_autodiff_at_boundaries(name):
    params = _params(name)
    pairs = _boundary_pq(name, params)
    if not pairs:
        pytest.skip(f"{name} has no clip, gate or guard boundary")
    p = np.array([pq[0] for pq in pairs for _ in (1, -1)], dtype=np.float64)
    q = np.array([pq[1] for pq in pairs for _ in (1, -1)], dtype=np.float64)
    adv = np.array([a for _ in pairs for a in (1.3, -0.7)], dtype=np.float64)
    c, gated = _check(name, p, q, adv, params, seed=2, sequence=False)
    # Both sides of a gate boundary are present: the gate flips somewhere.
    if _ratio_boundaries(name, params) and name not in ("cispo", "vespo"):
        assert gated.any() and not gated.all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_symbolic_and_coefficient_defaults_match_loss(name):
    spec = LOSSES[name]

    def kw_defaults(fn):
        return {
            n: p.default
            for n, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY
            and p.default is not p.empty
            and n in spec.defaults
        }

    assert kw_defaults(spec.symbolic) == dict(spec.defaults)
    if spec.coefficient is not None:
        assert kw_defaults(spec.coefficient) == dict(spec.defaults)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_registry_entry_is_documented(name):
    spec = LOSSES[name]
    doc = inspect.getdoc(spec.loss)
    assert doc and ".. math::" in doc and "References:" in doc
    assert spec.reference and spec.description
    assert isinstance(spec.family, RuleFamily) and spec.family in (
        "token",
        "sequence",
        "distribution",
    )


def test_a_rule_family_outside_the_enum_is_refused():
    import dataclasses

    spec = LOSSES["ppo"]
    with pytest.raises(ValueError, match="family 'tokens' is not one of"):
        dataclasses.replace(spec, family="tokens")
    assert dataclasses.replace(spec, family="sequence").family is RuleFamily.SEQUENCE


#: rules whose coefficient is not A times a nonnegative weight: DRO adds -beta log r,
#: KL-Cov -kappa sgn(log r) on its selected tokens (test_penalty_rules_can_flip_...).
ADDITIVE_PENALTY = ("dro", "kl_cov")


# Each example is a vector of 64 tokens, so 40 examples cover 2560 draws per rule.
@settings(max_examples=40)
@given(st.integers(0, 2**32 - 1))
def test_coefficient_never_flips_the_advantage_sign(seed):
    rng = np.random.default_rng(seed)
    p, q, adv = random_pq(rng, 64)
    extra = {
        "divergence": rng.uniform(0.0, 0.4, 64),
        "ddot": rng.normal(0, 0.1, 64),
        "seq_log_ratio": rng.normal(0, 1e-3, 64),
        "other_log_ratio": rng.normal(0, 1e-3, 64),
    }
    for name in TOKEN_RULES:
        spec = LOSSES[name]
        kw = {k: v for k, v in extra.items() if k in spec.coefficient_inputs}
        c, gated = spec.coefficient(p, q, adv, **kw)
        c = np.asarray(c)
        if name not in ADDITIVE_PENALTY:
            assert np.all(c * adv >= 0.0), name  # c = A x (nonnegative weight)
        assert np.all(c[np.asarray(gated)] == 0.0), name


def test_penalty_rules_can_flip_the_advantage_sign():
    # DRO: c = A - beta log r. With A = 0.1, beta = 1 and r = e (p = e q) the
    # penalty wins: c = 0.1 - 1 < 0 although A > 0. KL-Cov likewise on a selected
    # token: c = A r - kappa sgn(log r).
    q = 0.1
    c, _ = LOSSES["dro"].coefficient(math.e * q, q, 0.1, beta=1.0)
    assert float(c) == pytest.approx(0.1 - 1.0)
    c, _ = LOSSES["kl_cov"].coefficient(0.2, 0.1, 0.01, selected=1.0, kl_coef=0.1)
    assert float(c) == pytest.approx(0.01 * 2 - 0.1)
