"""Shared helpers for the predictive-divergence-mask claims (not collected: the name
starts with ``_``)."""

from __future__ import annotations

import functools
import hashlib
import random
from pathlib import Path

import mpmath
import numpy as np
import sympy as sp

from theorycheck.claims import (
    CheckResult,
    failed,
    measured,
    require_float64,
    undecided,
)

SOURCE = "seed 002 (Predictive Divergence Masks, arXiv 2607.10848)"


def random_points(n: int, vocab: int, *, seed: int, spread: float = 2.0):
    """n float64 draws of (behavior mu, logits z, sampled k), mu and pi = softmax(z)
    strictly positive; mu is a perturbation of pi of random size."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=spread, size=(n, vocab))
    noise = rng.normal(size=(n, vocab)) * rng.uniform(0.05, 2.0, size=(n, 1))
    mu = softmax(z + noise)
    k = rng.integers(0, vocab, size=n)
    return mu, z, k


def rational_points(logits, extra=lambda rng: {}):
    """Exact test points for ``sympy_identity``: every logit a rational a/b with
    a in [-6, 6], b in [1, 4], drawn from ``random.Random(0)``, then ``extra(rng)`` (the
    other symbols, drawn from the same generator after the logits)."""
    rng = random.Random(0)
    while True:
        point = {s: sp.Rational(rng.randint(-6, 6), rng.randint(1, 4)) for s in logits}
        point.update(extra(rng))
        yield point


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ddot_kl_closed(mu: np.ndarray, pi: np.ndarray, k: np.ndarray):
    """Prop. 1 closed form, numpy: (local, global) with local = pi_k - mu_k,
    global = sum_i pi_i (mu_i - pi_i)."""
    idx = np.arange(len(k))
    local = pi[idx, k] - mu[idx, k]
    glob = np.sum(pi * (mu - pi), axis=-1)
    return local, glob


def sym_abs(x: sp.Expr) -> sp.Expr:
    """|x| as a Piecewise (the z3 encoder has no Abs)."""
    return sp.Piecewise((x, x >= 0), (-x, True))


def simplex(symbols) -> list:
    """Open-simplex assumptions p_i > 0, sum p = 1."""
    return [*(s > 0 for s in symbols), sp.Eq(sp.Add(*symbols), 1)]


_MODEL: list = []


def smollm2():
    """The embedded SmolLM2 checkpoint, loaded once per process."""
    if not _MODEL:
        from theorycheck.models import load_model

        _MODEL.append(load_model("smollm2"))
    return _MODEL[0]


#: The text whose next-token distributions are measured (teacher-forced).
MEASURE_TEXT = (
    "The capital of France is Paris. Two plus two equals four. Water boils at one "
    "hundred degrees Celsius at sea level, and the moon orbits the earth once every "
    "twenty-seven days. To solve 3x + 5 = 20, subtract five from both sides and divide "
    "by three, which gives x = 5."
)


@functools.cache
def precision_pair(quick: bool):
    """Next-token distributions of SmolLM2 at every position of MEASURE_TEXT:
    the trainer's float32 forward (pi, with its logits z) and the rollout engine's
    bfloat16 forward (mu), both as float64 arrays ``[N, V]`` (the first 24 tokens in
    a quick run). Once per process: the sign-disagreement measurement and the
    premise's replay read the same forwards."""
    import jax.numpy as jnp

    from theorycheck.models import cast_params, forward

    cfg, params, tok = smollm2()
    ids = tok.encode(MEASURE_TEXT).ids
    ids = np.asarray([ids[:24] if quick else ids], np.int32)
    z = np.asarray(forward(params, cfg, ids)[0], np.float64)
    zb = forward(cast_params(params, jnp.bfloat16), cfg, ids)[0]
    zb = np.asarray(zb.astype(jnp.float32), np.float64)
    return softmax(zb), z, softmax(z)


# --- 50-digit evaluation along the line z + t v (Remark 2 claims) ---------------

mpmath.mp.dps = 50


def line_divergence(mu, z, k, t, kind):
    """D(mu || softmax(z + t v)) at 50 digits, v = e_k - softmax(z)."""
    z = [mpmath.mpf(float(x)) for x in z]
    mu = [mpmath.mpf(float(x)) for x in mu]
    tot = mpmath.fsum(mpmath.exp(x) for x in z)
    pi = [mpmath.exp(x) / tot for x in z]
    v = [(1 if i == k else 0) - pi[i] for i in range(len(z))]
    moved = [z[i] + mpmath.mpf(t) * v[i] for i in range(len(z))]
    tot = mpmath.fsum(mpmath.exp(x) for x in moved)
    q = [mpmath.exp(x) / tot for x in moved]
    if kind == "kl":
        return mpmath.fsum(m * (mpmath.log(m) - mpmath.log(p)) for m, p in zip(mu, q))
    return mpmath.fsum(abs(m - p) for m, p in zip(mu, q)) / 2


def ddot_of(mu, z, k, kind):
    from theorycheck.numeric import ddot

    return float(ddot(np.log(mu), z, k, kind=kind).ddot)


def recheck(mu, z, k, t, kind):
    """(prediction t*Ḋ, realized ΔD at 50 digits) at one point."""
    dd = ddot_of(mu, z, k, kind)
    delta = line_divergence(mu, z, k, t, kind) - line_divergence(mu, z, k, 0, kind)
    return t * dd, float(delta)


def _mp_div(mu, z, kind):
    """D(mu || softmax(z)) at 50 digits."""
    return line_divergence(mu, z, 0, 0, kind)


def sgd_sign_flips(quick: bool = False) -> CheckResult:
    """One optax SGD step on -A w log pi_k (free logits): t = eta A w along v."""
    import jax
    import jax.numpy as jnp
    import optax

    require_float64()
    n = 10 if quick else 40
    mu, z, k = random_points(n, 8, seed=43)
    rates, first = {}, None
    for eta in (0.1, 0.5, 1.0, 2.0):
        wrong = {"kl": 0, "tv": 0}
        for i, (mi, zi, ki) in enumerate(zip(mu, z, k)):
            adv, w = (1.0 if i % 2 else -1.0), 1.0
            opt = optax.sgd(eta)
            params = jnp.asarray(zi)

            def loss(zz, ki=ki, adv=adv, w=w):
                return -adv * w * jax.nn.log_softmax(zz)[ki]

            updates, _ = opt.update(jax.grad(loss)(params), opt.init(params))
            new = np.asarray(optax.apply_updates(params, updates))
            for kind in ("kl", "tv"):
                pred = eta * adv * w * ddot_of(mi, zi, ki, kind)
                real = float(_mp_div(mi, new, kind) - _mp_div(mi, zi, kind))
                if np.sign(pred) != np.sign(real):
                    wrong[kind] += 1
                    if first is None:
                        first = {
                            "kind": kind,
                            "mu": mi.tolist(),
                            "logits": zi.tolist(),
                            "k": int(ki),
                            "adv": adv,
                            "eta": eta,
                            "predicted": pred,
                            "realized": real,
                        }
        rates[str(eta)] = {kind: wrong[kind] / n for kind in wrong}
    if first is None:
        return undecided(f"no sign flip in {n} points x 4 step sizes", data=rates)
    return failed(
        f"optax SGD steps on free logits ({n} points, V = 8): share of wrong "
        f"first-order signs by eta: {rates} (realized ΔD at 50 digits)",
        counterexample=first,
        data={"wrong_sign_rate_by_eta": rates},
    )


# --- Remark 2's small-step premise on SmolLM2 ----------------------------------------

#: The paper's learning rate (seed 002's hyperparameter ledger: lr = 1e-6).
PAPER_LR = 1e-6


def _kl_rows(mu, z):
    """KL(mu || softmax(z)) per row, float64 numpy."""
    logp = z - z.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    return np.sum(mu * (np.log(np.maximum(mu, 1e-300)) - logp), axis=-1)


def kl_change_50(mu, z0, z1) -> float:
    """KL(mu || softmax(z1)) - KL(mu || softmax(z0)) at 50 digits:
    -<mu, z1 - z0> + logsumexp(z1) - logsumexp(z0) (the mu log mu terms cancel)."""
    dz = mpmath.fsum(
        mpmath.mpf(float(m)) * (mpmath.mpf(float(b)) - mpmath.mpf(float(a)))
        for m, a, b in zip(mu, z0, z1)
    )

    def lse(z):
        top = float(np.max(z))
        return top + mpmath.log(
            mpmath.fsum(mpmath.exp(mpmath.mpf(float(x)) - top) for x in z)
        )

    return float(-dz + lse(z1) - lse(z0))


#: The committed SmolLM2 measurement of Remark 2's premise (``theorycheck prove
#: --remeasure``): one row per position, with its provenance.
PREMISE_STORE = (
    Path(__file__).resolve().parents[1] / "results" / "pdm_premise_smollm2.json"
)
#: The premise's measured setting (a full run) and the cheap one (a quick run, measured
#: now on the same checkpoint, the first 12 tokens).
PREMISE_FULL = {
    "model": "smollm2",
    "text": "MEASURE_TEXT",
    "text_sha256": hashlib.sha256(MEASURE_TEXT.encode()).hexdigest()[:16],
    "tokens": 32,
    "lr": PAPER_LR,
    "trainable_blocks": 2,
    "update": "Adam's first step, one token per update, A = +1/-1 alternating",
    "precision": "float32 trunk, float64 top; mu the bfloat16 forward",
}
PREMISE_QUICK = {**PREMISE_FULL, "tokens": 12}


def measure_premise(settings):
    """One single-token update per position of SmolLM2 on MEASURE_TEXT, in the
    project probe's setting: the last ``trainable_blocks`` blocks and the final norm
    trained in float64 (the tied head stays frozen), the frozen float32 trunk's
    residual stream computed once. The update is Adam's first step at learning rate
    ``lr`` (each parameter moves by lr * g / (|g| + 1e-8), the largest step Adam takes
    at that lr) on -A log pi_k, k the text's next token, A = +1 / -1 alternating. mu is
    the bfloat16 forward (the rollout engine), pi the trainer's (float32 trunk,
    float64 top). A sign flip is re-evaluated at 50 digits from the float64 logits
    (``realized_50``).

    Returns ``{"rows": [...]}``, one row per position: D = KL(mu || pi), the realized
    ΔD = KL(mu || pi_after) - KL(mu || pi), the first-order term <grad_z D, Δz> =
    <pi - mu, Δz> of the realized logit change Δz, Popoviciu's bound (max Δz - min
    Δz)^2 / 8 on the remainder, the mask's tabular prediction A * Ḋ, and the sampled
    token's log pi_k and log mu_k before the step (what :func:`premise_replay_gap`
    recomputes)."""
    import jax
    import jax.numpy as jnp

    from theorycheck.models import (
        cast_params,
        forward,
        hidden_states,
        logits_from_hidden,
        split_params,
    )

    if settings["model"] != "smollm2" or settings["text"] != "MEASURE_TEXT":
        raise ValueError(f"premise settings: {settings}")
    lr, blocks = settings["lr"], settings["trainable_blocks"]
    cfg, params, tok = smollm2()
    ids = np.asarray([tok.encode(MEASURE_TEXT).ids[: settings["tokens"]]], np.int32)
    zb = forward(cast_params(params, jnp.bfloat16), cfg, ids)[0]
    mu_all = softmax(np.asarray(zb.astype(jnp.float32), np.float64))
    hidden = hidden_states(params, cfg, ids, num_blocks=cfg.num_layers - blocks)
    hidden = hidden.astype(jnp.float64)  # the float32 trunk, the top in float64
    top, frozen = split_params(params, cfg, blocks)
    top = jax.tree_util.tree_map(lambda w: w.astype(jnp.float64), top)
    frozen = {  # only the (tied) head weights are read; the trunk's blocks are done
        k: v.astype(jnp.float64) for k, v in frozen.items() if k != "blocks"
    } | {"blocks": frozen["blocks"]}
    z0 = np.asarray(logits_from_hidden(top, frozen, cfg, hidden)[0])

    width = ids.shape[1]

    @jax.jit
    def step(t, fz, h, j, k, adv):
        # Position j's logits alone: the prefix 0..j rolled to the end and the rest
        # masked (left padding, the positions counted from the mask), so the head
        # (49152 x 576, most of the cost) runs on one row; causal attention makes
        # this position j's logits of the whole sequence.
        hj = jnp.roll(h, width - 1 - j, axis=1)
        mask = (jnp.arange(width) >= width - 1 - j).astype(jnp.int32)[None]

        def logits(tt):
            z = logits_from_hidden(tt, fz, cfg, hj, mask, rows=(width - 1, width))
            return z[0, 0]

        def loss(tt):
            return -adv * jax.nn.log_softmax(logits(tt))[k]

        g = jax.grad(loss)(t)
        moved = jax.tree_util.tree_map(
            lambda w, d: w - lr * d / (jnp.abs(d) + 1e-8), t, g
        )
        return logits(moved)

    rows = []
    for j in range(ids.shape[1] - 1):
        k, adv = int(ids[0, j + 1]), (1.0 if j % 2 == 0 else -1.0)
        z1 = np.asarray(step(top, frozen, hidden, j, k, adv))
        mu, zj = mu_all[j], z0[j]
        dz = z1 - zj
        before = _kl_rows(mu[None], zj[None])[0]
        realized = float(_kl_rows(mu[None], z1[None])[0] - before)
        first = float(np.dot(softmax(zj) - mu, dz))
        exact = None
        if np.sign(first) != np.sign(realized):
            exact = kl_change_50(mu, zj, z1)
        rows.append(
            {
                "position": j,
                "token": k,
                "adv": adv,
                "divergence": float(before),
                "realized": realized,
                "realized_50": exact,
                "first_order": first,
                "remainder_bound": float((dz.max() - dz.min()) ** 2 / 8),
                "logit_change_max": float(np.abs(dz).max()),
                "mask_prediction": adv * ddot_of(mu, zj, k, "kl"),
                "logp_trainer": float(zj[k] - _logsumexp(zj)),
                "logp_engine": float(np.log(mu[k])),
            }
        )
    return {"rows": rows}


def _logsumexp(z: np.ndarray) -> float:
    top = float(np.max(z))
    return top + float(np.log(np.sum(np.exp(z - top))))


@functools.cache
def premise_measurement(quick: bool):
    """The premise rows' :class:`theorycheck.claims.Measured`: in a full run the
    committed :data:`PREMISE_STORE` when its settings and code match (else measured
    now), in a quick run measured now at :data:`PREMISE_QUICK`. Once per process (the
    claim's two checks read the same rows)."""
    settings = PREMISE_QUICK if quick else PREMISE_FULL
    return measured(
        PREMISE_STORE,
        settings,
        functools.partial(measure_premise, settings),
        quick=quick,
    )


#: the most the sampled tokens' log-probs before the step may move between the
#: measured rows and their recomputation (:func:`premise_replay_gap`) before the rows
#: count as another checkpoint's or text's: the trainer's (float32 trunk, float64 top
#: vs a float32 forward of the whole text; measured 1.6e-5) and the engine's (bfloat16
#: forwards of 32 vs 67 tokens; measured 0.17, the probe's replay tolerance)
PREMISE_REPLAY_TOLERANCE = {"trainer": 1e-3, "engine": 0.25}


def premise_replay_gap(rows, quick: bool) -> dict:
    """The cheap recomputation route of the premise rows: the two forwards of
    :func:`precision_pair` (one float32, one bfloat16, no update) give every
    position's sampled-token log pi_k and log mu_k again (:func:`replay_gap`)."""
    mu, _, pi = precision_pair(quick)
    return replay_gap(rows, mu, pi, smollm2()[2].encode(MEASURE_TEXT).ids)


def replay_gap(rows, mu, pi, ids) -> dict:
    """The largest |difference| between the rows' ``logp_trainer`` / ``logp_engine``
    and log pi / log mu at their position and token, whether every row's token is
    the text's next token ``ids[position + 1]``, and whether both are within
    :data:`PREMISE_REPLAY_TOLERANCE` (False when a row lies beyond ``mu``)."""
    trainer, engine = 0.0, 0.0
    tokens_match = all(r["position"] + 1 < min(len(ids), len(mu) + 1) for r in rows)
    for r in rows:
        j, k = r["position"], r["token"]
        if not (j < len(mu) and j + 1 < len(ids)):
            continue
        tokens_match &= ids[j + 1] == k
        trainer = max(trainer, abs(float(np.log(pi[j, k])) - r["logp_trainer"]))
        engine = max(engine, abs(float(np.log(mu[j, k])) - r["logp_engine"]))
    ok = (
        bool(tokens_match)
        and trainer <= PREMISE_REPLAY_TOLERANCE["trainer"]
        and engine <= PREMISE_REPLAY_TOLERANCE["engine"]
    )
    return {
        "max_abs_logp_trainer": trainer,
        "max_abs_logp_engine": engine,
        "tokens_match": bool(tokens_match),
        "within_tolerance": ok,
    }
