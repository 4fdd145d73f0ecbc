r"""``check_convexity``: the stages in order, then one pure combiner decides.

A loss is *logits-convex* when its logit Hessian (frozen quantities held constant, as
``jax.hessian`` treats ``stop_gradient``) is positive semidefinite at every logit
vector. Verdicts are sound: ``convex`` only with a proof (a structure theorem for every
V when the jaxpr is one program for every V, or z3 at the listed V); ``not_convex``
only with a counterexample re-checked exactly (z3 model, rational arithmetic; a
structural witness at 50 digits) and in float64 (autodiff Hessian-vector product and a
second difference with ``stop_gradient`` values frozen); otherwise ``unknown``. The
rules live in :func:`theorycheck.convexity._combine.combine`. The LCO paper's
logits-convexity definition (Hessian PSD) is from secondary sources (docs/papers.md
§2.1);
its text is NOT FOUND.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck._progress import stage
from theorycheck.convexity import _stages as st
from theorycheck.convexity._budget import Deadline
from theorycheck.convexity._chord import chord_records
from theorycheck.convexity._combine import combine
from theorycheck.convexity._dcp import dcp_records
from theorycheck.convexity._resolve import ResolvedLoss, build_inputs, resolve
from theorycheck.convexity._sanity import sanity_check, shape_check
from theorycheck.convexity._types import (
    Scope,
    Stage,
    StageRecord,
    StageStatus,
    StructureFamily,
    Verdict,
)

__all__ = ["ConvexityResult", "check_convexity", "local_check", "sanity_check"]

#: The symbolic stages (structure, then the formal stage's derivations and z3 claims)
#: share a wall-clock budget of this many times ``timeout_s``.
SYMBOLIC_BUDGET_FACTOR = 5


@dataclasses.dataclass(kw_only=True)
class ConvexityResult:
    """The verdict and how it was reached (the CLI's JSON object is :meth:`to_json`).

    ``resolved`` and ``settings`` (the ``--set`` values) let the report rebuild the
    inputs without resolving the spec again.
    """

    loss: str
    verdict: Verdict
    scope: str
    methods: list[dict[str, str]]
    counterexample: dict[str, Any] | None
    condition: str | None
    params: dict[str, Any]
    family: str | None = None
    fit: Any = None
    reason: str | None = None
    resolved: ResolvedLoss | None = None
    settings: dict[str, float] = dataclasses.field(default_factory=dict)
    #: the structure stage's full record, if it ran
    structure: Any = None

    @property
    def families(self) -> tuple[StructureFamily | str, ...]:
        """The structural family names (``StructureFamily`` members; a name the enum
        does not know yet is kept as text)."""
        names = self.family.split("+") if self.family else []
        known = {f.value for f in StructureFamily}
        return tuple(StructureFamily(n) if n in known else n for n in names)

    def to_json(self) -> dict[str, Any]:
        return {
            "loss": self.loss,
            "params": self.params,
            "verdict": str(self.verdict),
            "scope": self.scope,
            "reason": self.reason,
            "methods": self.methods,
            "counterexample": self.counterexample,
            "condition": self.condition,
        }


#: The largest V checked: the vocabulary-scale search keeps about 30 float64 vectors
#: of length V (about 1 GB at this V); a larger V is refused up front instead of
#: growing until the kernel kills the process.
MAX_VOCAB = 1 << 22


def _check_args(vocab, timeout_s: float, num_starts: int) -> None:
    if not vocab or min(vocab) < 2:
        raise BadInput(f"vocab {list(vocab)}: every V must be >= 2")
    if max(vocab) > MAX_VOCAB:
        need = 30 * 8 * max(vocab) / 2**30
        raise BadInput(
            f"vocab {max(vocab)}: at most {MAX_VOCAB} (the search keeps about 30 "
            f"float64 vectors of length V: about {need:.3g} GiB here)"
        )
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise BadInput(f"timeout_s {timeout_s}: must be a finite number > 0")
    if num_starts < 1:
        raise BadInput(f"num_starts = {num_starts}: must be >= 1")


def _structure_records(rec, out, resolved, inputs, record):
    """The structure record, and the float64 re-check of its witness (at V = 3, a V
    it derived; a witness with positive curvature in both routes withdraws it)."""
    if rec.status is not StageStatus.REFUTED or out.witness is None:
        return [rec]
    from theorycheck.convexity._structural import witness

    pk, _ = out.witness
    v = 3  # the theorem was derived at V = 3 and 4: its witness is checked there
    logits, u = witness(out.structure, v, 0)
    where = f"pi_k = {float(pk):.6g}, V = {v}"
    check = st.recheck_stage(resolved.loss, logits, u, inputs(v, 0).numeric, where)
    curv = check.counterexample["curvature"]
    clean = dataclasses.replace(check, counterexample=None)
    if check.counterexample["positive"]:
        return [st.withdraw(rec, "its witness has positive curvature"), clean]
    ce = st._counterexample(logits, u, curv, v, 0, record)
    return [st.attach(rec, ce), clean]


def _formal_records(resolved, inputs, vocab, tokens, out, budget, timeout_s, record):
    """z3 at each requested V <= 5 and each of its sampled tokens."""
    from theorycheck.convexity._structural import derive

    timeout_ms = int(timeout_s * 1000)
    timed_out = st.timed_out_detail(budget, SYMBOLIC_BUDGET_FACTOR)
    records, seen = [], {}

    def derive_at(k):
        def derive_fn(v):
            key = (v, k)
            cached = out.derived.get(v) if k == 0 else None
            seen[key] = cached or derive(resolved.loss, v, k, inputs(v, k).exact)
            return seen[key]

        return derive_fn

    for v in sorted(vocab):
        for k in tokens(v) if v <= 5 else [0]:
            if any(r.counterexample for r in records):
                break  # a confirmed counterexample decides; other k add nothing
            name = f"z3 V={v}" + (f" k={k}" if k else "")
            stage(f"formal: z3 at V = {v}, k = {k}")
            if out.timed_out and v in (3, 4) and k == 0:
                records.append(
                    StageRecord(name, StageStatus.UNKNOWN, timed_out, st.Stage.FORMAL)
                )
                continue
            if out.failed or (k == 0 and out.unsupported_at == v):
                # the same translation would fail again
                detail = "the symbolic translation failed (see above)"
                records.append(
                    StageRecord(name, StageStatus.SKIPPED, detail, st.Stage.FORMAL)
                )
                continue
            frec, fout = st.formal_stage(
                derive_at(k), v, budget, timeout_ms, timed_out, k
            )
            if frec.status is StageStatus.REFUTED:
                records += _formal_refutation(
                    frec, fout, resolved, inputs, v, k, seen, record
                )
            else:
                records.append(frec)
    return records


def _formal_refutation(frec, fout, resolved, inputs, v, k, seen, record):
    logits, u, exact = st.formal_counterexample(fout, v)
    amap = getattr(seen.get((v, k)), "affine", None)
    if amap is not None:  # a point of L~(z'): back to the loss's z
        logits, u = (list(a) for a in amap.to_logits(logits, u))
    where = f"z3 counterexample, V = {v}, k = {k}"
    check = st.recheck_stage(resolved.loss, logits, u, inputs(v, k).numeric, where, k)
    clean = dataclasses.replace(check, counterexample=None)
    if check.counterexample["positive"]:
        # the exact check and both float64 routes disagree: trust neither
        why = "its counterexample has positive curvature in float64"
        return [st.withdraw(frec, why), clean]
    ce = st._counterexample(logits, u, float(fout.curvature), v, k, record)
    return [st.attach(frec, ce | exact), clean]


#: The vocabulary sizes of the tokenizers RL users train (Llama 2 / Mistral 7B,
#: Mistral v3, SmolLM2 / StarCoder, GPT-2, Llama 3, DeepSeek-V3, Qwen2 / Qwen2.5,
#: Qwen2.5 padded, GPT-OSS o200k, Gemma 3): a loss whose formula is not shown to
#: be one for every V is probed at each of them (:func:`_tokenizer_records`).
TOKENIZER_VOCABS = (
    32000, 32768, 49152, 50257, 128256, 129280, 151936, 152064, 201088, 262144,
)  # fmt: skip


def _probes(v: int, k: int):
    """``(where, logits, direction)`` probed at one V: the uniform point and one
    with the sampled logit 3 above and below the rest, along the variance
    direction of two other tokens and along ``e_k - e_j``."""
    i, j = [t for t in (0, 1, 2) if t != k][:2]
    for shift in (0.0, 3.0, -3.0):
        z = np.zeros(v)
        z[k] = shift
        for name, (a, b) in (("e_i - e_j", (i, j)), ("e_k - e_j", (k, j))):
            u = np.zeros(v)
            u[a], u[b] = 1.0, -1.0
            yield f"z_k = {shift:g}, rest 0, u = {name}, V = {v}", z, u


def _curvatures(loss, v: int, numeric, probes) -> np.ndarray:
    """``uᵀ H u`` at every probe, by one compiled Hessian-vector product per V."""
    # the per-token inputs are arguments: as constants of the compiled program XLA
    # would fold them (minutes at V = 262144)
    scalars = {k: v for k, v in numeric.items() if np.ndim(v) == 0}

    def curvature(z, u, arrays):
        grad = jax.grad(lambda x: loss(x, 0, **scalars, **arrays))
        return u @ jax.jvp(grad, (z,), (u,))[1]

    with jax.enable_x64(True):
        arrays = {
            k: jnp.asarray(v, jnp.float64) for k, v in numeric.items() if np.ndim(v) > 0
        }
        zs = jnp.asarray(np.stack([z for _, z, _ in probes]), jnp.float64)
        us = jnp.asarray(np.stack([u for _, _, u in probes]), jnp.float64)
        run = jax.jit(jax.vmap(curvature, in_axes=(0, 0, None)))
        return np.asarray(run(zs, us, arrays))


def _tokenizer_records(records, resolved, gen, inputs, vocab) -> list[StageRecord]:
    """The loss at the tokenizer sizes (and the requested V above 512), evaluated at
    that V: a few Hessian-vector products (:func:`_probes`); the most negative one
    is re-checked in float64 by two routes. Runs when the derivation in V does not
    show one formula for every V and no counterexample is known yet; its
    refutation names that V only."""
    if any(r.counterexample for r in records) or (
        gen.vform is not None and gen.vform.covered and gen.vform.v_free
    ):
        return []
    sizes = sorted(set(TOKENIZER_VOCABS) | {v for v in vocab if v > 512})
    if callable(getattr(resolved.loss, "symbolic_v", None)):
        # a translated (PyTorch) loss is rebuilt at each V: not at vocabulary scale
        detail = "not probed at the tokenizer sizes: the translation is built per V"
        return [StageRecord("tokenizer sizes", StageStatus.SKIPPED, detail, Stage.NOTE)]
    record = inputs(min(vocab), 0).params
    stage(f"probing the loss at V = {', '.join(map(str, sizes))}")
    for v in sizes:
        numeric = inputs(v, 0).numeric
        probes = list(_probes(v, 0))
        try:
            curv = _curvatures(resolved.loss, v, numeric, probes)
        except Exception:  # noqa: BLE001 - the user's loss at this V: not probed
            continue
        curv = np.where(np.isfinite(curv), curv, np.inf)  # not finite: no witness
        if not curv.min() < -st.POSITIVE_CURVATURE:
            continue
        where, z, u = probes[int(np.argmin(curv))]
        check = st.recheck_stage(resolved.loss, z, u, numeric, where)
        if check.status is StageStatus.CONFIRMED:
            return _tokenizer_refutation(check, where, z, u, v, record)
    detail = (
        f"no negative curvature at V = {', '.join(map(str, sizes))} "
        f"({6 * len(sizes)} Hessian-vector products at that V; not a proof)"
    )
    return [StageRecord("tokenizer sizes", StageStatus.UNKNOWN, detail, Stage.NOTE)]


def _tokenizer_refutation(check, where, z, u, v, record) -> list[StageRecord]:
    curv = check.counterexample["curvature"]
    rec = StageRecord(
        "tokenizer sizes",
        StageStatus.REFUTED,
        f"u^T H u = {curv:.6g} at {where} (evaluated at that V)",
        Stage.SEARCH,
        Scope.of(v),
        Scope.of(v),
        counterexample=st._counterexample(z, u, curv, v, 0, record),
    )
    return [rec, dataclasses.replace(check, counterexample=None)]


def _v_records(resolved, gen, inputs, record) -> list[StageRecord]:
    """The derivation in V's refutation for every V >= V0, where its form's
    :math:`F_w` is negative for those V (:func:`theorycheck.convexity._vform.
    v_threshold`), with its witness (all logits 0, direction e_1 - e_2) re-checked
    in float64 at V0; nothing when it does not apply or does not re-check."""
    from theorycheck.convexity._vform import v_threshold

    v0 = v_threshold(gen.vform) if gen.vform is not None else None
    if v0 is None or v0 > MAX_VOCAB:
        return []
    logits, u = np.zeros(v0), np.zeros(v0)
    u[1], u[2] = 1.0, -1.0
    where = f"all logits 0, u = e_1 - e_2, V = {v0}"
    check = st.recheck_stage(resolved.loss, logits, u, inputs(v0, 0).numeric, where)
    if check.status is not StageStatus.CONFIRMED:
        return [dataclasses.replace(check, counterexample=None)]
    detail = (
        f"the loss is F(x, w, T) = {gen.vform.form}; dF/dw < 0 for every V >= {v0} "
        "(a polynomial in V times a positive factor): the direction u = e_i - e_j "
        "(two other tokens) has u^T H u = dF/dw * variance < 0 at every point"
    )
    ce = st._counterexample(logits, u, check.counterexample["curvature"], v0, 0, record)
    return [
        StageRecord(
            "derivation in V",
            StageStatus.REFUTED,
            detail,
            Stage.FORMAL,
            Scope.every(v0),
            Scope.every(v0),
            counterexample=ce,
        ),
        dataclasses.replace(check, counterexample=None),
    ]


def _symbolic_stages(
    resolved, spec, params, inputs, vocab, timeout_s, tokens, dynamic, meanwhile=None
):
    """Structure (+ its witness re-check) at k = 0, then z3 at each requested V and
    sampled token. ``meanwhile()`` (the numeric search) runs in this process while
    the structure stage's worker process derives; its result is returned too. The
    worker's limit moves by the time the search ran beside it, and the formal stage
    gets what is left of that extended budget."""
    timeout_ms = int(timeout_s * 1000)
    budget = Deadline(SYMBOLIC_BUDGET_FACTOR * timeout_s)
    record = inputs(min(vocab), 0).params
    stage("structure: deriving the logit Hessian symbolically (every V)")
    pending = st.structure_start(spec, params, 0, budget, timeout_ms, dynamic)
    began = time.monotonic()
    try:
        beside = meanwhile() if meanwhile is not None else None
    except BaseException:
        if pending is not None:
            pending.cancel()
        raise
    # the search took CPU from the worker while it ran: the worker's limit moves by
    # that long, so it gets at least the wall time it had alone
    overlap = time.monotonic() - began
    if pending is not None:
        pending.extend(overlap)
    rec, out, used = st.structure_finish(pending, budget, SYMBOLIC_BUDGET_FACTOR)
    budget = Deadline.after(budget.seconds, used - overlap)
    records = _structure_records(rec, out, resolved, inputs, record)
    if out.derived or rec.status not in (StageStatus.PROVED, StageStatus.REFUTED):
        records += _formal_records(
            resolved, inputs, vocab, tokens, out, budget, timeout_s, record
        )
    return records, out, beside


def _within(scope: Scope, gen) -> bool:
    """Every V of ``scope`` is one where relabelling the tokens was shown."""
    if gen.equivariant_v is None:
        return True
    return scope.from_v is None and all(gen.every_token_at(v) for v in scope.at)


def _tokens_only_traced(record, gen):
    """The ``sampled tokens`` record, narrowed to the traced V."""
    if record.stage is not Stage.TOKENS:
        return record
    listed = ", ".join(map(str, gen.equivariant_v))
    detail = (
        f"equivariant under relabelling the tokens at the traced V = {listed} only "
        f"({gen.why_v}): the verdict covers the sampled tokens checked"
    )
    return dataclasses.replace(record, status=StageStatus.UNKNOWN, detail=detail)


def _search_vocabs(vocab, differ, gen) -> list[int]:
    """The V searched: the requested ones, every V where the program differs, and,
    unless the loss is one formula for every V and equivariant under relabelling the
    tokens, V = 2, a V above every integer constant that meets V, ``k`` or ``iota``
    (two above the largest; at most 512) and V = 16 unless that V is already larger;
    and the V beyond the traced ones where the program was seen to change
    (``gen.changes``)."""
    out = set(vocab) | set(differ) | set(gen.changes)
    if differ or not gen.uniform or not gen.equivariant:
        above = max(gen.constants, default=0) + 2
        out |= {2} | ({above} if above <= 512 else set())
        if not 16 < above <= 512:
            out.add(16)
    return sorted(out)


def check_convexity(
    spec: str,
    *,
    vocab: tuple[int, ...] = (3,),
    params: dict[str, float] | None = None,
    timeout_s: float = 20.0,
    num_starts: int = 512,
    seed: int = 0,
) -> ConvexityResult:
    r"""Decides whether a loss is convex in the logits (PSD logit Hessian everywhere).

    .. math::
        \text{convex} \iff \forall z \in \mathbb R^V:\ \nabla_z^2 L(z) \succeq 0

    The verdict's scope names the vocabulary sizes and the sampled tokens it covers
    (``all V >= 2, every sampled token`` only with the two arguments of
    :mod:`theorycheck.convexity._genericity`).

    Args:
        spec: registry name or ``path/to/file.py:function``.
        vocab: vocabulary sizes for the formal and numeric stages (each ≥ 2).
        params: ``--set`` values (``adv``, ``q``, hyperparameters); a key the loss
            does not take is refused.
        timeout_s: z3 time budget per claim; the symbolic stages together get
            ``SYMBOLIC_BUDGET_FACTOR * timeout_s`` of wall clock, after which they
            report ``unknown`` (timed out) and the verdict rests on the other stages.
        num_starts: numeric search starts per V.
        seed: seed of the numeric search.

    Returns:
        A :class:`ConvexityResult`.

    Raises:
        BadInput: unknown spec, bad or unknown parameter, loss that raises / is not a
        finite real scalar.
    """
    from theorycheck.convexity._genericity import one_program

    params = dict(params or {})
    _check_args(vocab, timeout_s, num_starts)
    resolved = resolve(spec)
    stage(f"{resolved.name}: checking the loss runs")
    generic, differ, gen = st.invariance_stage(resolved, params)
    given = resolved
    if gen.traced:  # every stage evaluates the one program that was analysed
        resolved = dataclasses.replace(resolved, loss=one_program(resolved.loss))
    searched = _search_vocabs(vocab, differ, gen)

    def tokens(v: int) -> list[int]:
        return [0] if gen.every_token_at(v) else sorted({0, 1, v - 1})

    built: dict[tuple[int, int], Any] = {}

    def inputs(v: int, k: int):
        if (v, k) not in built:  # exact SymPy inputs only where z3 runs (V <= 5)
            built[v, k] = build_inputs(resolved, params, v, k, exact=v <= 5)
        return built[v, k]

    for v in sorted(set(vocab) | {3}):
        for k in tokens(v) if v == min(vocab) else [0]:
            sanity_check(resolved.loss, v, k, inputs(v, k).numeric, resolved.name)
    record = inputs(min(vocab), 0).params

    def search():
        stage(f"numeric search at V = {', '.join(map(str, searched))}")
        return st.search_stage(
            resolved.loss,
            searched,
            tokens,
            lambda v, k: inputs(v, k).numeric,
            record,
            seed=seed,
            num_starts=num_starts,
            dynamic=gen.traced,
        )

    records, out, searched_rec = _symbolic_stages(
        resolved, spec, params, inputs, vocab, timeout_s, tokens, gen.traced, search
    )
    records[1:1] = generic + _v_records(resolved, gen, inputs, record)
    records += _tokenizer_records(records, resolved, gen, inputs, vocab)
    records.append(searched_rec)
    if out.derived.get(3) is not None and any(
        r.status is StageStatus.PROVED
        for r in records
        if r.stage in ("structure", "formal")
    ):
        records += [
            r
            for r in (st.kink_stage(out.derived[3]), st.switch_stage(out.derived[3]))
            if r is not None
        ]
    records += dcp_records(records, resolved, searched, inputs)
    records += chord_records(
        records, resolved, params, searched, tokens, record, seed, timeout_s
    )
    every = all(gen.every_token_at(v) for v in searched)
    checked_tokens = "" if every else "sampled tokens k in {0, 1, V - 1}"
    decision = combine(records, Scope.of(*searched), checked_tokens)
    if gen.equivariant and not _within(decision.scope, gen):
        # relabelling was shown at the traced V only: a decision that names another
        # V covers the sampled tokens checked there, not every token
        records = [_tokens_only_traced(r, gen) for r in records]
        decision = combine(records, Scope.of(*searched), checked_tokens)
    return ConvexityResult(
        loss=resolved.name,
        verdict=decision.verdict,
        scope=decision.text,
        methods=[m.to_json() for m in decision.methods],
        counterexample=decision.counterexample,
        condition=decision.condition,
        params=record,
        family=out.family,
        fit=out.fit,
        reason=decision.reason,
        resolved=given,
        settings=params,
        structure=out.structure,
    )


def local_check(spec: str, logits, sampled: int, *, params=None) -> dict[str, Any]:
    """Smallest logit-Hessian eigenvalue at one point (any V; Lanczos above V = 512).

    Args:
        spec: registry name or ``path/to/file.py:function``.
        logits: shape ``[V]``.
        sampled: ``k``.
        params: ``--set`` values.

    Returns:
        ``{"loss", "min_eigenvalue", "psd", "method", "residual", "params"}``.

    Raises:
        BadInput: bad logits or ``sampled``, a bad parameter, or a loss (or Hessian)
            that is not finite at the point.
    """
    from theorycheck.numeric import min_eigenvalue

    resolved = resolve(spec)
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 1 or z.size < 2 or not np.all(np.isfinite(z)):
        raise BadInput(f"logits: need >= 2 finite logits, got {z.size} values")
    if z.size > MAX_VOCAB:
        raise BadInput(f"logits: {z.size} values, at most {MAX_VOCAB}")
    if not 0 <= sampled < z.size:
        raise BadInput(f"sampled {sampled} is out of range for V = {z.size}")
    built = build_inputs(resolved, dict(params or {}), z.size, sampled, exact=False)
    numeric = built.numeric
    shape_check(resolved.loss, z.size, sampled, numeric, resolved.name)
    with jax.enable_x64(True):
        value = float(resolved.loss(jnp.asarray(z), sampled, **numeric))
    if not math.isfinite(value):
        raise BadInput(
            f"the loss {resolved.name} is not finite ({value}) at {_where(z)}"
        )
    res = min_eigenvalue(resolved.loss, z, sampled, inputs=numeric)
    if not math.isfinite(res.value):
        raise BadInput(f"the logit Hessian is not finite at {_where(z)}")
    # A Lanczos value is an upper bound on lambda_min: "psd" only if it is >= -residual
    # and the method is exact (dense); a negative value is a certificate either way.
    tol = 1e-12 + 2 * res.residual
    psd = (
        bool(res.value >= -tol)
        if res.method == "dense"
        else (False if res.value < -tol else None)
    )
    return {
        "loss": resolved.name,
        "min_eigenvalue": res.value,
        "psd": psd,
        "method": res.method,
        "residual": res.residual,
        "params": built.params,
    }


def _where(z: np.ndarray) -> str:
    shown = ", ".join(f"{x:.6g}" for x in z[:5])
    return f"logits [{shown}{', ...' if z.size > 5 else ''}] (V = {z.size})"
