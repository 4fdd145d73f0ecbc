r"""``check_convexity``: the stages in order, then one pure combiner decides.

A loss is *logits-convex* when its logit Hessian (frozen quantities held constant, as
``jax.hessian`` treats ``stop_gradient``) is positive semidefinite at every logit
vector. Verdicts are sound: ``convex`` only with a proof (a structure theorem for every
V when the jaxpr is one program for every V, or z3 at the listed V); ``not_convex``
only with a counterexample re-checked exactly (z3 model, rational arithmetic; a
structural witness at 50 digits) and in float64 (autodiff Hessian-vector product and a
second difference with ``stop_gradient`` values frozen); otherwise ``unknown``. The
rules live in :func:`theorycheck.convexity._combine.combine`. The LCO paper's
logits-convexity definition (Hessian PSD) is from secondary sources (papers.md §2.1);
its text is NOT FOUND.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck._progress import stage
from theorycheck.convexity import _stages as st
from theorycheck.convexity._budget import Deadline
from theorycheck.convexity._combine import combine
from theorycheck.convexity._resolve import ResolvedLoss, build_inputs, resolve
from theorycheck.convexity._sanity import sanity_check, shape_check
from theorycheck.convexity._types import Family, MethodResult, Scope, Status, Verdict

__all__ = ["ConvexityResult", "check_convexity", "local_check", "sanity_check"]

#: The symbolic stages (structure, then the formal stage's derivations and z3 claims)
#: share a wall-clock budget of this many times ``timeout_s``.
SYMBOLIC_BUDGET_FACTOR = 5


@dataclasses.dataclass
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
    def families(self) -> tuple[Family | str, ...]:
        """The structural family names (``Family`` members; a name the enum does not
        know yet is kept as text)."""
        names = self.family.split("+") if self.family else []
        known = {f.value for f in Family}
        return tuple(Family(n) if n in known else n for n in names)

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


def _check_args(vocab, timeout_s: float, num_starts: int) -> None:
    if not vocab or min(vocab) < 2:
        raise BadInput(f"vocab {list(vocab)}: every V must be >= 2")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise BadInput(f"timeout_s {timeout_s}: must be a finite number > 0")
    if num_starts < 1:
        raise BadInput(f"num_starts = {num_starts}: must be >= 1")


def _symbolic_stages(resolved, spec, params, inputs, vocab, timeout_s):
    """Structure (+ its witness re-check), then z3 at each requested V."""
    from theorycheck.convexity._structural import derive

    sampled, timeout_ms = 0, int(timeout_s * 1000)
    budget = Deadline(SYMBOLIC_BUDGET_FACTOR * timeout_s)
    record = inputs[min(vocab)].params
    stage("structure: deriving the logit Hessian symbolically (every V)")
    rec, out = st.structure_stage(
        spec, params, sampled, budget, timeout_ms, SYMBOLIC_BUDGET_FACTOR
    )
    records = [rec]
    if rec.status is Status.REFUTED and out.witness is not None:
        from theorycheck.convexity._structural import witness

        pk, _ = out.witness
        v = max(3, min(vocab))
        amap = getattr(out.structure, "affine", None)
        if amap is not None and len(set(amap.beta)) > 1:
            v = 3  # a non-uniform shift is known at the derived V only
        logits, u = witness(out.structure, v, sampled)
        where = f"pi_k = {float(pk):.6g}, V = {v}"
        check = st.recheck_stage(resolved.loss, logits, u, inputs[v].numeric, where)
        curv = check.counterexample["curvature"]
        ce = st._counterexample(logits, u, curv, v, sampled, record)
        records = [st.attach(rec, ce), dataclasses.replace(check, counterexample=None)]
    if out.derived or rec.status not in (Status.PROVED, Status.REFUTED):
        timed_out = st.timed_out_detail(budget, SYMBOLIC_BUDGET_FACTOR)

        seen = {}

        def derive_fn(v):
            seen[v] = out.derived.get(v) or derive(
                resolved.loss, v, sampled, inputs[v].exact
            )
            return seen[v]

        for v in sorted(vocab):
            stage(f"formal: z3 at V = {v}")
            if out.timed_out and v in (3, 4):  # the same derivation would run out
                records.append(
                    MethodResult(
                        f"z3 V={v}", Status.UNKNOWN, timed_out, st.Stage.FORMAL
                    )
                )
                continue
            if out.failed:  # the same translation would fail again
                detail = "the symbolic translation failed (see above)"
                records.append(
                    MethodResult(f"z3 V={v}", Status.SKIPPED, detail, st.Stage.FORMAL)
                )
                continue
            frec, fout = st.formal_stage(derive_fn, v, budget, timeout_ms, timed_out)
            if frec.status is Status.REFUTED and not any(
                r.counterexample for r in records
            ):
                logits, u, exact = st.formal_counterexample(fout, v)
                amap = getattr(seen.get(v), "affine", None)
                if amap is not None:  # a point of L~(z'): back to the loss's z
                    logits, u = (list(a) for a in amap.to_logits(logits, u))
                where = f"z3 counterexample, V = {v}"
                check = st.recheck_stage(
                    resolved.loss, logits, u, inputs[v].numeric, where
                )
                ce = st._counterexample(
                    logits, u, float(fout.curvature), v, sampled, record
                )
                frec = st.attach(frec, ce | exact)
                records += [frec, dataclasses.replace(check, counterexample=None)]
            else:
                records.append(frec)
    return records, out


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
    params = dict(params or {})
    _check_args(vocab, timeout_s, num_starts)
    resolved = resolve(spec)
    sampled = 0
    stage(f"{resolved.name}: checking the loss runs")
    invariance, differ = st.invariance_stage(resolved, params, sampled)
    searched = sorted(set(vocab) | set(differ))
    inputs = {
        # exact SymPy inputs only where the symbolic stages run (V <= 5)
        v: build_inputs(resolved, params, v, sampled, exact=v <= 5)
        for v in set(searched) | {3, 4}
    }
    for v in sorted(set(vocab) | {3}):
        sanity_check(resolved.loss, v, sampled, inputs[v].numeric, resolved.name)
    record = inputs[min(vocab)].params
    records, out = _symbolic_stages(resolved, spec, params, inputs, vocab, timeout_s)
    records.insert(1, invariance)
    stage(f"numeric search at V = {', '.join(map(str, searched))}")
    records.append(
        st.search_stage(
            resolved.loss,
            searched,
            sampled,
            {v: inputs[v].numeric for v in searched},
            record,
            seed=seed,
            num_starts=num_starts,
        )
    )
    if out.derived.get(3) is not None and any(
        r.status is Status.PROVED for r in records if r.stage in ("structure", "formal")
    ):
        records += [
            r
            for r in (st.kink_stage(out.derived[3]), st.switch_stage(out.derived[3]))
            if r is not None
        ]
    decision = combine(records, Scope.of(*searched))
    return ConvexityResult(
        resolved.name,
        decision.verdict,
        str(decision.scope),
        [m.to_json() for m in decision.methods],
        decision.counterexample,
        decision.condition,
        record,
        out.family,
        out.fit,
        decision.reason,
        resolved,
        params,
        out.structure,
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
