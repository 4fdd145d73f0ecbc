r"""Chord (midpoint) refutations: a convex f satisfies, for every a and b,

.. math::
    f\!\left(\tfrac{a + b}{2}\right) \le \tfrac12 \bigl(f(a) + f(b)\bigr)

(Jensen's inequality at weight 1/2; Boyd & Vandenberghe 2004, §3.1.1). A pair (a, b)
with :math:`f(m) > \tfrac12 (f(a) + f(b))` proves that f is not convex, with no
Hessian: it refutes a kinked or jumping loss (``min``, ``-|x|``, ``floor``, a
``jnp.where`` on the logits, ``sort``, ``argmax``) whose Hessian is PSD, or zero, on
every smooth piece.

The search evaluates the loss in float64 at many random pairs (logits of several
scales, near-ties where kinks are, short and long chords), at each searched V and
sampled token k, one compilation per V (the sampled token an argument); the stage stops
at 2 x ``--timeout`` seconds. The points are dyadic rationals (so the midpoint is
exact); the best candidates are re-checked **exactly**: the loss's jaxpr is evaluated
by the SymPy bridge at the rational logits (every primitive on numbers,
``sort``/``floor``/``argmax`` included) and the gap is computed at 50 significant
digits. Only a positive exact gap, with the float64 gap at the same rational points
agreeing in sign, is a refutation.

Where it applies: the checker's verdict is about the Hessian with ``stop_gradient``
values held constant. A chord violation of the loss itself refutes that only when no
detached value depends on the logits, so the stage runs only when the program has no
``stop_gradient`` of a value of the logits, except the max-shift inside
``jax.nn.log_softmax`` (read on the jaxpr) and a shift the SymPy bridge removes
exactly (``logsumexp``'s): the function is the same for every value of the shift.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
from jax.extend import core as jcore

from theorycheck import _jaxpr
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus

__all__ = ["chord_records", "chord_stage", "frozen_logit_values", "search_pairs"]

#: The chord refuter runs (a switch for same-run before/after measurements).
ENABLED = True

#: digits of the exact re-check.
DIGITS = 50
#: pairs evaluated per (V, k).
NUM_PAIRS = 2048
#: candidates re-checked exactly per (V, k), best float64 gap first.
MAX_RECHECK = 6
#: the largest V searched.
MAX_VOCAB = 16


def _prims(jaxpr) -> tuple[str, ...]:
    return tuple(e.primitive.name for e in jaxpr.eqns)


def _log_softmax_body() -> tuple[str, ...]:
    """The primitives of ``jax.nn.log_softmax``'s body (a named jit), traced here."""
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(jax.nn.log_softmax)(jnp.zeros(3))
    (eqn,) = closed.jaxpr.eqns
    return _prims(_jaxpr.sub_jaxpr(eqn)[0])


def _depends(jaxpr, tainted_in: list[bool]) -> list[object]:
    """Every ``stop_gradient`` of a value of the logits, recursing into calls, except
    inside ``jax.nn.log_softmax`` (a jit of that name whose body is JAX's own:
    z - sg(max z) - log sum exp(z - sg(max z)) is the same for every value of the
    shift)."""
    found = []
    safe_body = _log_softmax_body()

    def walk(jx, taint_in, safe):
        taint = dict(zip(jx.invars, taint_in))

        def t(v):
            return False if isinstance(v, jcore.Literal) else taint.get(v, False)

        for eqn in jx.eqns:
            ins = [t(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name == "stop_gradient" and any(ins) and not safe:
                found.append(eqn)
            sub = _jaxpr.sub_jaxpr(eqn) if name in _jaxpr.CALL_JAXPR else None
            if sub is not None:
                inner_safe = safe or (
                    str(eqn.params.get("name", "")) == "log_softmax"
                    and _prims(sub[0]) == safe_body
                )
                outs = walk(sub[0], ins, inner_safe)
                for v, o in zip(eqn.outvars, outs):
                    taint[v] = o
                continue
            for body in jcore.jaxprs_in_params(eqn.params):
                walk(body, [any(ins)] * len(body.invars), safe)
            for v in eqn.outvars:
                taint[v] = any(ins)
        return [t(v) for v in jx.outvars]

    walk(jaxpr, tainted_in, False)
    return found


def frozen_logit_values(loss, vocab: int, inputs: dict, exact=None) -> list[str]:
    """Where the loss depends on a detached value of the logits (``file:line`` each);
    empty when it does not.

    A ``stop_gradient`` of a value of the logits outside ``jax.nn.log_softmax`` is
    looked at once more in SymPy (at ``V = vocab``, ``exact`` inputs): the bridge
    removes a max-shift that cancels exactly (``logsumexp``'s), and a loss whose
    expression then has no frozen value of the logits does not depend on one.
    """
    names = sorted(inputs)
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(lambda z, *vals: loss(z, 0, **dict(zip(names, vals))))(
            jnp.zeros(vocab), *[jnp.asarray(inputs[n]) for n in names]
        )
    eqns = _depends(closed.jaxpr, [True] + [False] * len(names))
    if not eqns:
        return []
    from theorycheck.bridge import sympy_from_jax
    from theorycheck.symbolic import Frozen

    try:
        z = sp.symbols(f"z0:{vocab}", real=True)
        expr = sympy_from_jax(loss, z, sampled=0, inputs=exact or inputs)
    except Exception:  # noqa: BLE001 - no symbolic form: the detached values stand
        return [_jaxpr.where(e) for e in eqns]
    if any(a.free_symbols for a in expr.atoms(Frozen)):
        return [_jaxpr.where(e) for e in eqns]
    return []


def _starts(rng, v: int, n: int):
    """Midpoints and half-chords: several scales, and near-ties (kinks of max/sort)."""
    scales = np.array([0.3, 1.0, 3.0, 8.0])
    m = rng.standard_normal((n, v)) * scales[rng.integers(0, 4, n)][:, None]
    tie = rng.random(n) < 0.3
    m[tie] = m[tie][:, :1] + 1e-3 * rng.standard_normal((tie.sum(), v))
    steps = np.array([0.01, 0.1, 0.5, 1.5, 4.0])
    d = rng.standard_normal((n, v)) * steps[rng.integers(0, 5, n)][:, None]
    return m, d


_COMPILED: dict = {}


def _compiled(loss, v: int, inputs: dict):
    """One compilation per (loss, V): the sampled token is an argument."""
    key = (id(loss), v, tuple(sorted((n, id(x)) for n, x in inputs.items())))
    if key not in _COMPILED:
        if len(_COMPILED) > 64:
            _COMPILED.clear()

        def one(z, k):
            return loss(z, k, **inputs)

        _COMPILED[key] = (jax.jit(jax.vmap(one, in_axes=(0, None))), loss, inputs)
    return _COMPILED[key][0]


def search_pairs(loss, v: int, k: int, inputs: dict, *, seed: int, num_pairs: int):
    """Float64 midpoint gaps ``f(m) - (f(a) + f(b))/2`` for random pairs; returns
    ``(a, b, gap)`` sorted by relative gap, largest first (positive gaps only)."""
    rng = np.random.default_rng(seed)
    m, d = _starts(rng, v, num_pairs)
    a, b = m - d, m + d
    a = np.round(a * 2**20) / 2**20  # dyadic: the midpoint is exact in float64
    b = np.round(b * 2**20) / 2**20
    mid = (a + b) / 2
    with jax.enable_x64(True):
        f = _compiled(loss, v, inputs)
        kk = jnp.asarray(k, jnp.int32)
        fa, fb, fm = (np.asarray(f(jnp.asarray(x), kk)) for x in (a, b, mid))
    gap = fm - (fa + fb) / 2
    scale = 1.0 + np.abs(fa) + np.abs(fb) + np.abs(fm)
    rel = np.where(np.isfinite(gap), gap / scale, -np.inf)
    order = np.argsort(-rel)
    keep = [i for i in order[: 4 * MAX_RECHECK] if rel[i] > 1e-9]
    return [(a[i], b[i], float(gap[i])) for i in keep]


def _exact(loss, point, k, exact_inputs):
    from theorycheck.bridge import sympy_from_jax

    z = [sp.Rational(Fraction(float(x))) for x in point]
    return sympy_from_jax(loss, z, sampled=k, inputs=exact_inputs)


def exact_gap(loss, a, b, k, exact_inputs) -> sp.Float:
    """``f(m) - (f(a) + f(b))/2`` at :data:`DIGITS` digits, the loss evaluated exactly
    at the rational points by the SymPy bridge."""
    mid = (np.asarray(a) + np.asarray(b)) / 2
    fa, fb, fm = (_exact(loss, x, k, exact_inputs) for x in (a, b, mid))
    return sp.N(fm - (fa + fb) / 2, DIGITS)


@dataclasses.dataclass(frozen=True)
class Chord:
    a: list[float]
    b: list[float]
    vocab: int
    sampled: int
    gap: float
    gap_float: float


def chord_stage(  # noqa: C901 - the search, the budget and the exact re-check
    loss,
    vocabs,
    tokens,
    build,
    record,
    *,
    seed: int = 0,
    num_pairs: int = NUM_PAIRS,
    budget_s: float = float("inf"),
):
    """The chord refuter's record (``refuted`` with a counterexample, or unknown /
    skipped saying why).

    Args:
        loss: the one traced program.
        vocabs: the V searched (those above :data:`MAX_VOCAB` are left out).
        tokens: ``V -> the sampled tokens``.
        build: ``(V, k) -> inputs`` (``.numeric``, ``.exact``).
        record: the ``params`` the counterexample carries.
        budget_s: wall-clock seconds for the whole stage (checked before each search
            and each exact re-check; what ran is reported).
    """
    import time

    stop = time.monotonic() + budget_s
    name = "chord"
    vs = [v for v in sorted(vocabs) if v <= MAX_VOCAB]
    if not vs:
        return StageRecord(
            name, StageStatus.SKIPPED, f"runs for V <= {MAX_VOCAB}", Stage.CHORD
        )
    try:
        first = build(vs[0], 0)
        frozen = frozen_logit_values(loss, vs[0], first.numeric, first.exact)
    except Exception as err:  # noqa: BLE001 - never a traceback to the user
        detail = f"could not read the program ({type(err).__name__})"
        return StageRecord(name, StageStatus.SKIPPED, detail, Stage.CHORD)
    if frozen:
        detail = (
            "not run: the loss detaches a value of the logits (stop_gradient at "
            f"{', '.join(sorted(set(frozen))[:3])}); the verdict is about the Hessian "
            "with it held constant, which a chord of the loss itself does not test"
        )
        return StageRecord(name, StageStatus.SKIPPED, detail, Stage.CHORD)
    total, unconfirmed, out_of_time = 0, "", False
    for v in vs:
        for k in tokens(v):
            if time.monotonic() > stop:
                out_of_time = True
                break
            inputs = build(v, k)
            try:
                cands = search_pairs(
                    loss,
                    v,
                    k,
                    inputs.numeric,
                    seed=seed + 7919 * v + k,
                    num_pairs=num_pairs,
                )
            except Exception as err:  # noqa: BLE001
                detail = f"the float64 search failed ({type(err).__name__})"
                return StageRecord(name, StageStatus.SKIPPED, detail, Stage.CHORD)
            total += num_pairs
            for a, b, g in cands[:MAX_RECHECK]:
                if time.monotonic() > stop:
                    out_of_time = True
                    break
                try:
                    exact = exact_gap(loss, a, b, k, inputs.exact)
                except Exception as err:  # noqa: BLE001 - no exact route: not a refutation
                    unconfirmed = (
                        f"a float64 violation at V = {v}, k = {k} could not be "
                        f"re-checked exactly ({str(err)[:160]})"
                    )
                    continue
                if not exact.is_real or not exact > sp.Float(10) ** (-30):
                    continue
                return _refuted(Chord(list(a), list(b), v, k, float(exact), g), record)
    detail = f"no midpoint violation found ({total} pairs)"
    if out_of_time:
        detail += f"; stopped at its time budget ({budget_s:.3g} s = 2 x --timeout)"
    if unconfirmed:
        detail += f"; {unconfirmed}"
    return StageRecord(name, StageStatus.UNKNOWN, detail, Stage.CHORD, samples=total)


def _refuted(c: Chord, record) -> StageRecord:
    a, b = np.asarray(c.a), np.asarray(c.b)
    mid, half = (a + b) / 2, (b - a) / 2
    detail = (
        f"f(m) - (f(a) + f(b))/2 = {c.gap:.6g} > 0 (exact, {DIGITS} digits; float64 "
        f"{c.gap_float:.6g}) at V = {c.vocab}, k = {c.sampled}, a = "
        f"{np.round(a, 6).tolist()}, b = {np.round(b, 6).tolist()}"
    )
    ce = {
        "kind": "chord",
        "logits": [float(x) for x in mid],
        "sampled": int(c.sampled),
        "params": record,
        "direction": [float(x) for x in half],
        # the second difference f(m + d) + f(m - d) - 2 f(m) = -2 gap < 0
        "curvature": -2.0 * c.gap,
        "vocab": int(c.vocab),
        "a": [float(x) for x in a],
        "b": [float(x) for x in b],
        "gap": c.gap,
    }
    scope = Scope.of(c.vocab)
    return StageRecord(
        "chord",
        StageStatus.REFUTED,
        detail,
        Stage.CHORD,
        scope,
        scope,
        ce,
        tokens=frozenset({c.sampled}),
    )


def chord_records(
    records, resolved, params, searched, tokens, record, seed=0, timeout_s=20.0
):
    """The pipeline's hook: the chord refuter, when the stages before it left the
    verdict ``unknown`` (an empty list otherwise)."""
    from theorycheck.convexity._dcp import undecided
    from theorycheck.convexity._resolve import build_inputs

    if not ENABLED or not undecided(records):
        return []
    built = {}

    def build(v, k):
        if (v, k) not in built:
            built[v, k] = build_inputs(resolved, params, v, k, exact=True)
        return built[v, k]

    return [
        chord_stage(
            resolved.loss,
            searched,
            tokens,
            build,
            record,
            seed=seed,
            budget_s=2.0 * timeout_s,
        )
    ]
