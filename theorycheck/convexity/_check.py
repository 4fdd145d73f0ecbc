r"""``check_convexity``: structure → symbolic → formal → numeric search, one verdict.

A loss is *logits-convex* when its logit Hessian (frozen quantities held constant, as
``jax.hessian`` treats ``stop_gradient``) is positive semidefinite at every logit
vector.
Verdicts are sound: ``convex`` only with a proof (a structure theorem for every V, or z3
at the listed V); ``not_convex`` only with a counterexample re-checked exactly (z3
model,
rational arithmetic) or by two float64 routes (autodiff Hessian-vector product and a
second difference with ``stop_gradient`` values frozen);
otherwise ``unknown``. The LCO paper's logits-convexity definition (Hessian PSD) is from
secondary sources (papers.md §2.1); its text is NOT FOUND.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck.convexity import _search
from theorycheck.convexity._budget import Deadline, StageTimeout
from theorycheck.convexity._resolve import build_inputs, resolve

__all__ = ["ConvexityResult", "check_convexity", "local_check", "sanity_check"]

#: The symbolic stages (structure, then the formal stage's derivations and z3 claims)
#: share a wall-clock budget of this many times ``timeout_s``.
SYMBOLIC_BUDGET_FACTOR = 5


@dataclasses.dataclass
class ConvexityResult:
    """The verdict and how it was reached (the CLI's JSON object)."""

    loss: str
    verdict: str
    scope: str
    methods: list[dict[str, str]]
    counterexample: dict[str, Any] | None
    condition: str | None
    params: dict[str, float]
    family: str | None = None
    fit: Any = None
    #: the structure stage's full record (certificates, region, affine map), if run
    structure: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "loss": self.loss,
            "verdict": self.verdict,
            "scope": self.scope,
            "methods": self.methods,
            "counterexample": self.counterexample,
            "condition": self.condition,
        }


def sanity_check(loss, vocab: int, sampled: int, inputs) -> None:
    """Evaluates the loss once: it must run and return one finite scalar.

    Raises:
        BadInput: naming what went wrong.
    """
    z = np.linspace(-1.0, 1.0, vocab)
    try:
        with jax.enable_x64(True):
            out = jax.jit(lambda x: loss(x, sampled, **inputs))(
                jnp.asarray(z, jnp.float64)
            )
    except BadInput:
        raise
    except Exception as err:  # the user's function: report whatever it raised
        raise BadInput(f"the loss raised {type(err).__name__}: {err}") from err
    if out.shape != ():
        raise BadInput(f"the loss returns shape {tuple(out.shape)}, not a scalar")
    if not bool(jnp.isfinite(out)):
        raise BadInput(
            f"the loss is not finite ({float(out)}) at logits {np.asarray(z)}"
        )


def _has_live_kink(derived) -> bool:
    """True when a Piecewise/Min/Max depends on the logits outside ``Frozen``."""
    import sympy as sp

    from theorycheck.symbolic import Frozen

    body = derived.expr.xreplace({f: sp.Dummy() for f in derived.expr.atoms(Frozen)})
    z = set(derived.logits)
    return any(a.free_symbols & z for a in body.atoms(sp.Piecewise, sp.Min, sp.Max))


def _has_frozen_switch(derived) -> bool:
    """True when a ``Frozen`` value holds a Piecewise whose condition moves with the
    logits (a detached mask or clipped weight)."""
    import sympy as sp

    from theorycheck.symbolic import Frozen

    z = set(derived.logits)
    return any(
        c.free_symbols & z
        for f in derived.expr.atoms(Frozen)
        for pw in f.atoms(sp.Piecewise)
        for _, c in pw.args
        if isinstance(c, sp.Basic)
    )


def _shape_check(loss, vocab: int, sampled: int, inputs) -> None:
    """Traces the loss once (no compilation): it must run and return a scalar."""
    try:
        with jax.enable_x64(True):
            out = jax.eval_shape(
                lambda x: loss(x, sampled, **inputs),
                jax.ShapeDtypeStruct((vocab,), jnp.float64),
            )
    except Exception as err:  # the user's function: report whatever it raised
        raise BadInput(f"the loss raised {type(err).__name__}: {err}") from err
    if out.shape != ():
        raise BadInput(f"the loss returns shape {tuple(out.shape)}, not a scalar")


def _recheck(loss, logits, u, inputs, where: str) -> tuple[dict[str, str], float]:
    """Float64 re-check of a counterexample by two routes: autodiff (HVP) and a second
    difference of the loss with its ``stop_gradient`` values frozen at the point.

    Returns:
        The method entry and the autodiff curvature ``uᵀ H u``.
    """
    check = _search.recheck(loss, logits, 0, inputs, u)
    curv, fd = check.autodiff, check.frozen_fd
    if check.confirmed:
        status = "confirmed"
    elif curv < 0:
        status = "autodiff only (finite differences cannot resolve it)"
    else:
        status = "below float64 resolution (the exact check stands)"
    fd_text = "n/a" if fd is None else f"{fd:.6g}"
    return {
        "method": "float64 re-check",
        "status": status,
        "detail": f"u^T H u = {curv:.6g} (autodiff), {fd_text} (frozen finite "
        f"differences) at {where}",
    }, curv


def _structure_job(spec: str, params, sampled: int, timeout_ms: int):
    """The structure stage, run in a separate process (module level: picklable)."""
    from theorycheck.convexity._structural import analyse_structure

    resolved = resolve(spec)
    return analyse_structure(
        resolved.loss,
        sampled,
        lambda v: build_inputs(resolved, params, v, sampled)[1],
        timeout_ms=timeout_ms,
    )


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
        params: ``--set`` values (``adv``, ``q``, hyperparameters).
        timeout_s: z3 time budget per claim; the symbolic stages together get
            ``SYMBOLIC_BUDGET_FACTOR * timeout_s`` of wall clock, after which they
            report ``unknown`` (timed out) and the verdict rests on the other stages.
        num_starts: numeric search starts per V.
        seed: seed of the numeric search.

    Returns:
        A :class:`ConvexityResult`.

    Raises:
        BadInput: unknown spec, bad parameter, loss that raises / is not a finite
        scalar.
    """
    # SymPy and z3 are imported here only: the local check (--at) does not need them.
    from theorycheck.bridge import UnsupportedOperation
    from theorycheck.convexity._formal_stage import formal_psd
    from theorycheck.convexity._structural import derive

    params = dict(params or {})
    if not vocab or min(vocab) < 2:
        raise BadInput(f"--vocab {list(vocab)}: every V must be >= 2")
    resolved = resolve(spec)
    sampled = 0
    numeric_in = {
        v: build_inputs(resolved, params, v, sampled) for v in set(vocab) | {3, 4}
    }
    record = numeric_in[min(vocab)][2]
    for v in sorted(set(vocab) | {3}):
        sanity_check(resolved.loss, v, sampled, numeric_in[v][0])
    methods: list[dict[str, str]] = []
    result = ConvexityResult(resolved.name, "unknown", "", methods, None, None, record)
    timeout_ms = int(timeout_s * 1000)

    def counterexample(logits, u, curvature, vocab_size):
        return {
            "logits": [float(x) for x in logits],
            "sampled": sampled,
            "params": record,
            "direction": [float(x) for x in u],
            "curvature": float(curvature),
            "vocab": vocab_size,
        }

    # 1. Structure (every V), from the symbolic form derived from the JAX function.
    derived = {}
    budget = Deadline(SYMBOLIC_BUDGET_FACTOR * timeout_s)
    structure_timed_out = False
    timed_out = (
        f"timed out: the symbolic budget ({budget.seconds:.3g} s = "
        f"{SYMBOLIC_BUDGET_FACTOR} x --timeout) ran out"
    )
    try:
        struct, derived = budget.run_in_process(
            _structure_job, spec, params, sampled, timeout_ms
        )
        methods.append(
            {"method": "structure", "status": struct.status, "detail": struct.detail}
        )
        result.family, result.fit = struct.family, struct.fit
        result.structure = struct
        result.condition = struct.condition
        if struct.status == "proved":
            result.verdict, result.scope = "convex", "all V >= 2"
        elif struct.status == "refuted":
            from theorycheck.convexity._structural import witness

            pk, _ = struct.witness
            v = max(3, min(vocab))
            if struct.affine is not None and len(set(struct.affine.beta)) > 1:
                v = 3  # a non-uniform shift is known at the derived V only
            logits, u = witness(struct, v, sampled)
            inputs_v = numeric_in.get(v, numeric_in[3])[0]
            entry, curv = _recheck(
                resolved.loss, logits, u, inputs_v, f"pi_k = {float(pk):.6g}, V = {v}"
            )
            methods.append(entry)
            result.verdict, result.scope = "not_convex", "all V >= 3"
            result.counterexample = counterexample(logits, u, curv, v)
    except UnsupportedOperation as err:
        methods.append(
            {
                "method": "symbolic",
                "status": "skipped",
                "detail": f"unsupported operation: {err}; numeric only",
            }
        )
    except StageTimeout:
        structure_timed_out = True
        methods.append(
            {"method": "structure", "status": "unknown", "detail": timed_out}
        )
    # 2. Formal, at each requested V (a second route, or the only proof).
    if derived or result.verdict == "unknown":
        for v in sorted(vocab):
            if v > 5:
                methods.append(
                    {
                        "method": f"z3 V={v}",
                        "status": "skipped",
                        "detail": "formal stage runs for V <= 5",
                    }
                )
                continue

            if structure_timed_out and v in (3, 4):
                # The same derivation as the structure stage: it would run out again.
                methods.append(
                    {"method": f"z3 V={v}", "status": "unknown", "detail": timed_out}
                )
                continue

            def formal(v=v):
                d = derived.get(v) or derive(
                    resolved.loss, v, sampled, numeric_in[v][1]
                )
                return formal_psd(d, timeout_ms=timeout_ms)

            try:
                out = budget.run(formal)
            except UnsupportedOperation as err:
                methods.append(
                    {"method": f"z3 V={v}", "status": "skipped", "detail": str(err)}
                )
                continue
            except StageTimeout:
                methods.append(
                    {"method": f"z3 V={v}", "status": "unknown", "detail": timed_out}
                )
                continue
            methods.append(
                {"method": f"z3 V={v}", "status": out.status, "detail": out.detail}
            )
            if out.status == "refuted" and result.counterexample is None:
                probs = [float(x) for x in out.probabilities]
                logits = [math.log(x) for x in probs]
                u = [float(x) for x in out.direction]
                amap = derived[v].affine if v in derived else None
                if amap is not None:  # a point of L~(z'): back to the loss's z
                    logits, u = (list(a) for a in amap.to_logits(logits, u))
                curv = float(out.curvature)
                ce = counterexample(logits, u, curv, v)
                ce["probabilities_exact"] = [str(x) for x in out.probabilities]
                ce["curvature_exact"] = str(out.curvature)
                result.counterexample = ce
                methods.append(
                    _recheck(
                        resolved.loss,
                        logits,
                        u,
                        numeric_in[v][0],
                        f"z3 counterexample, V = {v}",
                    )[0]
                )
                result.verdict, result.scope = "not_convex", f"V = {v}"
            elif out.status == "proved" and result.verdict == "unknown":
                result.verdict = "convex"
                result.scope = (
                    f"V = {v}"
                    if not result.scope
                    else result.scope.replace("V = ", "V in {") + f", {v}}}"
                )
    # 3. Numeric search (second route for a proof; the only route when symbolic fails).
    total = 0
    found = None
    for v in sorted(vocab):
        out = _search.search(
            resolved.loss,
            v,
            sampled,
            numeric_in[v][0],
            seed=seed + v,
            num_starts=num_starts,
        )
        total += out.num_samples
        if out.found and found is None:
            found = (v, out)
    if found is not None:
        v, out = found
        methods.append(
            {
                "method": "numeric search",
                "status": "refuted",
                "detail": f"u^T H u = {out.curvature:.6g} (autodiff), "
                f"{out.curvature_fd:.6g} (frozen finite differences)"
                f" at V = {v}",
            }
        )
        if result.verdict == "convex":
            result.verdict = "unknown"
            methods.append(
                {
                    "method": "consistency",
                    "status": "conflict",
                    "detail": "a proof and a numeric counterexample disagree",
                }
            )
        elif result.counterexample is None:
            result.verdict, result.scope = "not_convex", f"V = {v}"
            result.counterexample = counterexample(
                out.logits, out.direction, out.curvature, v
            )
    else:
        methods.append(
            {
                "method": "numeric search",
                "status": "unknown",
                "detail": f"no counterexample found ({total} samples)",
            }
        )
    if result.verdict == "convex" and derived and _has_live_kink(derived[3]):
        # PSD on every smooth piece does not make a function with kinks convex
        # (a concave kink, e.g. a min of two pieces, breaks it): no claim.
        result.verdict, result.scope = "unknown", ""
        methods.append(
            {
                "method": "kinks",
                "status": "unknown",
                "detail": "Hessian PSD on every smooth piece; the loss has "
                "non-frozen Piecewise kinks, which are not analysed",
            }
        )
    if result.verdict == "convex" and derived and _has_frozen_switch(derived[3]):
        methods.append(
            {
                "method": "frozen switches",
                "status": "note",
                "detail": "a stop_gradient value (mask or clipped weight) switches "
                "with the logits: the Hessian is PSD with it held constant, as "
                "training differentiates it; where it switches the loss is not smooth "
                "(a mask makes it jump), which the verdict does not cover",
            }
        )
    if result.verdict == "unknown" and not result.scope:
        result.scope = "V in {" + ", ".join(map(str, sorted(vocab))) + "}"
    return result


def local_check(spec: str, logits, sampled: int, *, params=None) -> dict[str, Any]:
    """Smallest logit-Hessian eigenvalue at one point (any V; Lanczos above V = 512).

    Args:
        spec: registry name or ``path/to/file.py:function``.
        logits: shape ``[V]``.
        sampled: ``k``.
        params: ``--set`` values.

    Returns:
        ``{"loss", "min_eigenvalue", "psd", "method", "residual"}``.
    """
    from theorycheck.numeric._hessian import min_eigenvalue

    resolved = resolve(spec)
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 1 or z.size < 2 or not np.all(np.isfinite(z)):
        raise BadInput(f"--at: need >= 2 finite logits, got {z.size} values")
    if not 0 <= sampled < z.size:
        raise BadInput(f"--sampled {sampled} is out of range for V = {z.size}")
    numeric, _, record = build_inputs(
        resolved, dict(params or {}), z.size, sampled, exact=False
    )
    _shape_check(resolved.loss, z.size, sampled, numeric)
    res = min_eigenvalue(resolved.loss, z, sampled, inputs=numeric)
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
        "params": record,
    }
