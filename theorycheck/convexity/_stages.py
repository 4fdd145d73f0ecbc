r"""The checker's stages: each returns one :class:`StageRecord` (no verdict here).

* :func:`structure_stage`: a family theorem from the SymPy form (claim: every V);
* :func:`invariance_stage`: is the jaxpr one program for every V (the all-V evidence);
* :func:`formal_stage`: z3 decides PSD at one small V;
* :func:`recheck_stage`: the float64 re-check of a counterexample (two routes);
* :func:`search_stage`: the numeric search at each V;
* :func:`kink_stage`, :func:`switch_stage`: kinks and switching frozen values.

:func:`theorycheck.convexity._combine.combine` turns the records into the verdict.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.convexity import _search
from theorycheck.convexity._budget import Deadline, StageTimeout
from theorycheck.convexity._invariance import program_text_of, same_program
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus

#: The V at which the program is traced for the all-V and all-token arguments (V = 2
#: included: a scope "all V >= 2" needs the V = 2 program).
GENERIC_VOCABS = (2, 3, 4, 5, 16)

__all__ = [
    "GENERIC_VOCABS",
    "StructureOutcome",
    "formal_stage",
    "invariance_stage",
    "kink_stage",
    "recheck_stage",
    "search_stage",
    "structure_finish",
    "structure_stage",
    "structure_start",
    "switch_stage",
    "withdraw",
]


@dataclasses.dataclass(frozen=True)
class StructureOutcome:
    """What later stages reuse from the structure stage."""

    derived: dict
    family: str | None = None
    fit: Any = None
    witness: tuple[Fraction, str] | None = None
    #: the structure stage's own result record (certificates, regions, when present)
    structure: Any = None
    timed_out: bool = False
    failed: bool = False
    #: the V whose translation (k = 0) raised UnsupportedOperation, if one did
    unsupported_at: int | None = None


def _structure_job(spec: str, params, sampled: int, timeout_ms: int, dynamic: bool):
    """The structure stage, run in a separate process (module level: picklable)."""
    from theorycheck.bridge import UnsupportedOperation
    from theorycheck.convexity._genericity import one_program
    from theorycheck.convexity._structural import analyse_structure

    resolved = resolve(spec)
    asked = []

    def exact(v):
        asked.append(v)
        return build_inputs(resolved, params, v, sampled).exact

    try:
        return analyse_structure(
            one_program(resolved.loss) if dynamic else resolved.loss,
            sampled,
            exact,
            timeout_ms=timeout_ms,
        )
    except UnsupportedOperation as err:
        err.vocab = asked[-1] if asked else None  # the V whose translation failed
        raise


def timed_out_detail(budget: Deadline, factor: float) -> str:
    return (
        f"timed out: the symbolic budget ({budget.seconds:.3g} s = "
        f"{factor:g} x --timeout) ran out"
    )


def structure_stage(
    spec: str,
    params,
    sampled: int,
    budget: Deadline,
    timeout_ms: int,
    factor: float,
    dynamic: bool = False,
) -> tuple[StageRecord, StructureOutcome]:
    """Structure theorem (every V) from the SymPy form derived from the JAX function.

    Returns:
        The record (its ``scope`` is the claim for every V, ``decided`` the V derived)
        and what the formal stage reuses.
    """
    pending = structure_start(spec, params, sampled, budget, timeout_ms, dynamic)
    rec, out, _ = structure_finish(pending, budget, factor)
    return rec, out


def structure_start(spec, params, sampled, budget, timeout_ms, dynamic=False):
    """Starts :func:`structure_stage`'s work in the worker process and returns at
    once (collect it with :func:`structure_finish`; the caller may run the numeric
    stages meanwhile). ``None`` when the budget is already spent."""
    try:
        return budget.submit_in_process(
            _structure_job, spec, params, sampled, timeout_ms, dynamic
        )
    except StageTimeout:
        return None


def structure_finish(
    pending, budget: Deadline, factor: float
) -> tuple[StageRecord, StructureOutcome, float]:
    """The record and outcome of a started structure stage, and the seconds its
    work took in the worker (``inf`` when the budget ran out: nothing is left)."""
    from theorycheck.bridge import UnsupportedOperation

    try:
        if pending is None:
            raise StageTimeout("no time left")
        (struct, derived), seconds = pending.result()
    except UnsupportedOperation as err:
        detail = f"unsupported operation: {err}; numeric only"
        rec = StageRecord("symbolic", StageStatus.SKIPPED, detail, Stage.STRUCTURE)
        at = getattr(err, "vocab", None)
        return rec, StructureOutcome({}, unsupported_at=at), 0.0
    except StageTimeout:
        detail = timed_out_detail(budget, factor)
        rec = StageRecord("structure", StageStatus.UNKNOWN, detail, Stage.STRUCTURE)
        return rec, StructureOutcome({}, timed_out=True), math.inf
    except BadInput:
        raise
    except IndexError as err:  # JAX clamps (or fills) an out-of-range index silently
        raise BadInput(
            f"the loss indexes out of range (IndexError: {err}); JAX would clamp or "
            "fill the index silently"
        ) from err
    except Exception as err:  # the translation of the user's code; numeric stages go on
        detail = (
            f"the symbolic derivation failed ({type(err).__name__} inside SymPy); "
            "numeric only"
        )
        rec = StageRecord("symbolic", StageStatus.SKIPPED, detail, Stage.STRUCTURE)
        return rec, StructureOutcome({}, failed=True), 0.0
    status = StageStatus(struct.status)
    claim = {StageStatus.PROVED: Scope.every(2), StageStatus.REFUTED: Scope.every(3)}
    rec = StageRecord(
        "structure",
        status,
        struct.detail,
        Stage.STRUCTURE,
        scope=claim.get(status, Scope()),
        decided=Scope.of(*derived) if status in claim else Scope(),
        condition=struct.condition,
    )
    out = StructureOutcome(
        derived, struct.family, struct.fit, struct.witness, structure=struct
    )
    return rec, out, seconds


def _traces(resolved, params, vocabs):
    """Closed jaxprs by V with ``sampled`` traced; static ``k = 0`` where the loss
    branches on it in Python: ``(closed, dynamic, failure)``."""
    from theorycheck.convexity import _genericity

    built = {
        v: build_inputs(resolved, params, v, 0, exact=False).numeric for v in vocabs
    }
    for dynamic in (True, False):
        closed = {}
        try:
            for v in vocabs:
                closed[v] = _genericity.trace(
                    resolved.loss, v, built[v], dynamic=dynamic
                )
        except Exception as err:  # the user's function: narrows the scope
            if dynamic:
                continue
            return closed, dynamic, (v, err)
        return closed, dynamic, None
    raise AssertionError("unreachable")


#: V at which :func:`_program_changes` traces a loss that does not trace with a
#: symbolic V, beside the smallest V above its constants.
PROBE_VOCABS = (16, 64, 512)


def _program_changes(resolved, params, dynamic, above: int) -> tuple[int, ...]:
    """V at which the program changes, for a loss whose Python may depend on V (it
    does not trace with a symbolic V) and whose comparison named no constant, or
    not every one: the programs at :data:`PROBE_VOCABS` and at ``above`` (the V
    above the constants that were named) are compared in order, and where two
    neighbours differ (and ``above`` does not explain it) a bisection finds a V at
    which the program is not the one below it. The numeric search runs there too;
    the scope names the V searched either way, so this only decides where to look.
    """
    from theorycheck.convexity import _genericity

    texts: dict[int, str | None] = {}

    def text(v: int) -> str | None:
        if v not in texts:
            try:
                inputs = build_inputs(resolved, params, v, 0, exact=False).numeric
                texts[v] = program_text_of(
                    _genericity.trace(resolved.loss, v, inputs, dynamic=dynamic)
                )
            except Exception:  # the user's function at this V: not compared
                texts[v] = None
        return texts[v]

    def same(a: int, b: int) -> bool:
        got = {v: text(v) for v in (a, a + 1, b)}
        if any(t is None for t in got.values()):
            return True
        return not same_program(got)

    probes = sorted({v for v in (*PROBE_VOCABS, above) if 16 <= v <= 512})
    found = []
    for lo, hi in zip(probes, probes[1:]):
        if hi == above or same(lo, hi):
            continue
        while hi - lo > 1:  # lo's program, hi another one
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if same(lo, mid) else (lo, mid)
        found.append(hi)
    return tuple(found)


def invariance_stage(resolved, params):
    """Traces the loss at :data:`GENERIC_VOCABS` with ``sampled`` traced, compares
    the programs and reads the two extension arguments
    (:mod:`theorycheck.convexity._genericity`).

    Returns:
        ``(records, differ, genericity)``: the ``vocab invariance`` record
        (``confirmed``: one formula for every V), the ``sampled tokens`` record
        (``confirmed``: equivariant under relabelling the tokens), the V whose
        program differs, and the :class:`~theorycheck.convexity._genericity.
        Genericity`.
    """
    from theorycheck.convexity import _genericity

    vocabs = GENERIC_VOCABS
    closed, dynamic, failure = _traces(resolved, params, vocabs)
    # the inputs at V = 3, 4: the array names, and the symbolic-V trace's shapes
    at = {v: build_inputs(resolved, params, v, 0, exact=False).numeric for v in (3, 4)}
    arrays = tuple(k for k, v in at[3].items() if np.ndim(v) > 0)
    if failure is not None:
        v, err = failure
        detail = f"tracing at V = {v} raised {type(err).__name__}: {err}"
        gen = _genericity.Genericity(False, False, False, detail, detail)
        recs = [
            StageRecord(
                "vocab invariance", StageStatus.UNKNOWN, detail, Stage.INVARIANCE
            ),
            StageRecord("sampled tokens", StageStatus.UNKNOWN, detail, Stage.TOKENS),
        ]
        return recs, [v], gen
    texts = {v: program_text_of(c) for v, c in closed.items()}
    differ = same_program(texts)
    gen = _genericity.analyse(closed, arrays, dynamic=dynamic, same=not differ)
    why_sym, sym_constants = _genericity.symbolic_v(resolved.loss, at, dynamic=dynamic)
    hidden = bool(why_sym) and not differ and gen.uniform
    if why_sym:  # the Python may branch on V: the traced V are all that is shown
        constants = tuple(sorted(set(gen.constants) | set(sym_constants)))
        above = max(constants, default=0) + 2
        gen = dataclasses.replace(
            gen,
            uniform=False,
            why_v=gen.why_v or why_sym,
            constants=constants,
            equivariant_v=tuple(vocabs),
            changes=_program_changes(resolved, params, dynamic, above),
        )
    listed = ", ".join(map(str, vocabs))
    if not differ and gen.uniform:
        detail = (
            f"the jaxprs at V = {listed} are one program up to the vocabulary size, "
            "and no value in it depends on V but through the number of tokens"
        )
        vrec = StageRecord(
            "vocab invariance", StageStatus.CONFIRMED, detail, Stage.INVARIANCE
        )
    elif differ:
        detail = (
            f"the jaxpr at V = {', '.join(map(str, differ))} is not the V = "
            f"{vocabs[0]} program up to the vocabulary size (the code depends on V): "
            "no claim for every V, only for the V decided"
        )
        vrec = StageRecord(
            "vocab invariance", StageStatus.UNKNOWN, detail, Stage.INVARIANCE
        )
    elif hidden:
        detail = (
            f"one program at V = {listed}, but not shown to be one for every V "
            f"({gen.why_v}): no claim for every V, only for the V decided"
        )
        vrec = StageRecord(
            "vocab invariance", StageStatus.UNKNOWN, detail, Stage.INVARIANCE
        )
    else:
        detail = (
            f"one program at V = {listed}, but its formula depends on V "
            f"({gen.why_v}): no claim for every V, only for the V decided"
        )
        vrec = StageRecord(
            "vocab invariance", StageStatus.UNKNOWN, detail, Stage.INVARIANCE
        )
    vrec, gen = _derivation_gate(resolved, params, vrec, gen, vocabs)
    if gen.equivariant and gen.equivariant_v is not None:
        detail = (
            f"traced with sampled as an argument, the programs at V = {listed} are "
            "equivariant under relabelling the tokens: at these V the verdict at "
            "k = 0 holds for every k; at any other V the sampled tokens 0, 1, V - 1 "
            f"are checked ({gen.why_v})"
        )
        krec = StageRecord(
            "sampled tokens", StageStatus.CONFIRMED, detail, Stage.TOKENS
        )
    elif gen.equivariant:
        detail = (
            "traced with sampled as an argument, the program is equivariant under "
            "relabelling the tokens: the verdict at k = 0 holds for every k"
        )
        krec = StageRecord(
            "sampled tokens", StageStatus.CONFIRMED, detail, Stage.TOKENS
        )
    else:
        detail = (
            f"not shown equivariant under relabelling the tokens ({gen.why_k}): "
            "the verdict covers the sampled tokens checked"
        )
        krec = StageRecord("sampled tokens", StageStatus.UNKNOWN, detail, Stage.TOKENS)
    return [vrec, krec], differ, gen


def _derivation_gate(resolved, params, vrec, gen, vocabs):
    """The ``vocab invariance`` record stays confirmed only when the derivation in V
    (:mod:`theorycheck.convexity._vform`) covers the program and its form does not
    contain V; otherwise the scope of every decision is the V decided (the
    Genericity is then not uniform, and relabelling the tokens is shown at the
    traced V only)."""
    from theorycheck.convexity import _vform

    built = build_inputs(resolved, params, 3, 0, exact=False)
    vform = _vform.derive_in_v(resolved.loss, built.numeric, built.params)
    gen = dataclasses.replace(gen, vform=vform)
    if vrec.status is not StageStatus.CONFIRMED:
        return vrec, gen
    if vform.covered and vform.v_free:
        detail = (
            f"{vrec.detail}; derivation in V: the loss is F(x, w, T) = {vform.form} "
            "with x = z_k, w = log sum_(i != k) exp(z_i), T = sum_(i != k) z_i, and "
            "F does not contain V: its convexity conditions are the same at every V"
        )
        return dataclasses.replace(vrec, detail=detail), gen
    why = vform.why if vform.covered else f"not covered: {vform.why}"
    detail = (
        f"one program at V = {', '.join(map(str, vocabs))}, but the derivation in V "
        f"does not show one formula for every V ({why}): no claim for every V, only "
        "for the V decided"
    )
    vrec = dataclasses.replace(vrec, status=StageStatus.UNKNOWN, detail=detail)
    gen = dataclasses.replace(
        gen,
        uniform=False,
        why_v=gen.why_v or f"derivation in V: {why}",
        equivariant_v=gen.equivariant_v or tuple(vocabs),
    )
    return vrec, gen


def _counterexample(logits, u, curvature, vocab, sampled, params) -> dict[str, Any]:
    return {
        "logits": [float(x) for x in logits],
        "sampled": sampled,
        "params": params,
        "direction": [float(x) for x in u],
        "curvature": float(curvature),
        "vocab": int(vocab),
    }


#: Both float64 routes above this: positive curvature, never a counterexample.
POSITIVE_CURVATURE = 1e-10


def recheck_stage(loss, logits, u, inputs, where: str, sampled: int = 0) -> StageRecord:
    """Float64 re-check of ``uᵀHu`` by autodiff (HVP) and a frozen second difference.

    The record's detail carries both values; ``counterexample`` is not set here (the
    refuting record carries it, with the autodiff value). ``counterexample["positive"]``
    is True when both routes see positive curvature (above
    :data:`POSITIVE_CURVATURE`): the caller then withdraws the refutation.
    """
    check = _search.recheck(loss, logits, sampled, inputs, u)
    curv, fd = check.autodiff, check.frozen_fd
    positive = curv > POSITIVE_CURVATURE and fd is not None and fd > POSITIVE_CURVATURE
    if check.confirmed:
        status, why = StageStatus.CONFIRMED, ""
    elif positive:
        status, why = StageStatus.UNCONFIRMED, " (positive curvature in both routes: "
        why += "not a counterexample)"
    elif curv < 0:
        status, why = StageStatus.UNCONFIRMED, " (autodiff only: finite differences "
        why += "cannot resolve it)"
    else:
        status, why = StageStatus.UNCONFIRMED, " (below float64 resolution: the exact "
        why += "check stands)"
    fd_text = "n/a" if fd is None else f"{fd:.6g}"
    detail = (
        f"u^T H u = {curv:.6g} (autodiff), {fd_text} (frozen finite differences) "
        f"at {where}{why}"
    )
    return StageRecord(
        "float64 re-check",
        status,
        detail,
        Stage.RECHECK,
        counterexample={"curvature": curv, "positive": positive},
    )


def withdraw(rec: StageRecord, why: str) -> StageRecord:
    """``rec`` without its refutation (its counterexample did not re-check)."""
    return dataclasses.replace(
        rec,
        status=StageStatus.UNKNOWN,
        detail=f"{rec.detail}; {why}: the refutation is withdrawn",
        scope=Scope(),
        decided=Scope(),
        counterexample=None,
        condition=None,
    )


def attach(rec: StageRecord, ce: dict[str, Any]) -> StageRecord:
    """``rec`` with its counterexample."""
    return dataclasses.replace(rec, counterexample=ce)


def formal_stage(
    derive_fn, v: int, budget: Deadline, timeout_ms: int, timed_out: str, k: int = 0
):
    """z3 at one V and sampled token: ``(record, FormalOutcome | None)``; the scope
    is ``{v}``, the tokens ``{k}``."""
    from theorycheck.bridge import UnsupportedOperation
    from theorycheck.convexity._formal_stage import formal_psd

    name = f"z3 V={v}" + (f" k={k}" if k else "")
    if v > 5:
        detail = "formal stage runs for V <= 5"
        return StageRecord(name, StageStatus.SKIPPED, detail, Stage.FORMAL), None
    try:
        out = budget.run(lambda: formal_psd(derive_fn(v), timeout_ms=timeout_ms))
    except UnsupportedOperation as err:
        return StageRecord(name, StageStatus.SKIPPED, str(err), Stage.FORMAL), None
    except StageTimeout:
        return StageRecord(name, StageStatus.UNKNOWN, timed_out, Stage.FORMAL), None
    except BadInput:
        raise
    except Exception as err:  # SymPy or z3 inside the translation: never to the user
        detail = f"the symbolic derivation failed ({type(err).__name__} inside SymPy)"
        return StageRecord(name, StageStatus.SKIPPED, detail, Stage.FORMAL), None
    status = StageStatus(out.status)
    scope = (
        Scope.of(v) if status in (StageStatus.PROVED, StageStatus.REFUTED) else Scope()
    )
    rec = StageRecord(
        name, status, out.detail, Stage.FORMAL, scope, scope, tokens=frozenset({k})
    )
    return rec, out


def formal_counterexample(out, v: int) -> tuple[list[float], list[float], dict]:
    """Float logits, direction and the exact fields of a z3 counterexample."""
    probs = [float(x) for x in out.probabilities]
    logits = [math.log(x) for x in probs]
    u = [float(x) for x in out.direction]
    exact = {
        "probabilities_exact": [str(x) for x in out.probabilities],
        "curvature_exact": str(out.curvature),
    }
    return logits, u, exact


def search_stage(
    loss, vocabs, tokens_fn, inputs_fn, params, *, seed, num_starts, dynamic=False
):
    """The numeric search at each V and each of its sampled tokens; refuted at the
    first (V, k) with a confirmed hit (the V after it are not searched).

    Args:
        tokens_fn: ``V -> the sampled tokens to search``.
        inputs_fn: ``(V, k) -> numeric inputs``.
        dynamic: the loss takes a traced ``sampled`` (one compilation per V).
    """
    total, found, searched = 0, None, set()
    order = sorted(vocabs)
    prepared: dict = {}  # programs set compiling ahead (the next V's)

    def ahead(i):
        """The next V's search, to be compiled while this one runs (None when its
        inputs cannot be built now: then they fail where they are used, as
        before)."""
        if i + 1 >= len(order):
            return None
        v = order[i + 1]
        try:
            return v, {k: inputs_fn(v, k) for k in tokens_fn(v)}, seed + v
        except Exception:
            return None

    for i, v in enumerate(order):
        if found is not None:  # one confirmed counterexample decides not_convex
            break
        ks = tokens_fn(v)
        searched |= set(ks)
        outs = _search.search_tokens(
            loss,
            v,
            {k: inputs_fn(v, k) for k in ks},
            dynamic=dynamic,
            seed=seed + v,
            num_starts=num_starts,
            first=True,  # the first confirmed (V, k) decides; later k add nothing
            then=ahead(i),
            prepared=prepared,
        )
        for k, out in outs.items():
            total += out.num_samples
            if out.found and found is None:
                found = (v, k, out)
    if found is None:
        detail = f"no counterexample found ({total} samples)"
        return StageRecord(
            "numeric search",
            StageStatus.UNKNOWN,
            detail,
            Stage.SEARCH,
            samples=total,
            tokens=frozenset(searched),
        )
    v, k, out = found
    detail = (
        f"u^T H u = {out.curvature:.6g} (autodiff), {out.curvature_fd:.6g} (frozen "
        f"finite differences) at V = {v}, k = {k}"
    )
    ce = _counterexample(out.logits, out.direction, out.curvature, v, k, params)
    return StageRecord(
        "numeric search",
        StageStatus.REFUTED,
        detail,
        Stage.SEARCH,
        Scope.of(v),
        Scope.of(v),
        counterexample=ce,
        samples=total,
        tokens=frozenset({k}),
    )


def kink_stage(derived) -> StageRecord | None:
    """A record when a Piecewise/Min/Max depends on the logits outside ``Frozen``
    (PSD on every smooth piece does not make a function with kinks convex)."""
    import sympy as sp

    from theorycheck.symbolic import Frozen

    body = derived.expr.xreplace({f: sp.Dummy() for f in derived.expr.atoms(Frozen)})
    z = set(derived.logits)
    if not any(a.free_symbols & z for a in body.atoms(sp.Piecewise, sp.Min, sp.Max)):
        return None
    detail = (
        "Hessian PSD on every smooth piece; the loss has non-frozen Piecewise "
        "kinks, which are not analysed"
    )
    return StageRecord("kinks", StageStatus.UNKNOWN, detail, Stage.KINKS)


def switch_stage(derived) -> StageRecord | None:
    """A note when a ``Frozen`` value holds a Piecewise whose condition moves with the
    logits (a detached mask or clipped weight)."""
    import sympy as sp

    from theorycheck.symbolic import Frozen

    z = set(derived.logits)
    if not any(
        c.free_symbols & z
        for f in derived.expr.atoms(Frozen)
        for pw in f.atoms(sp.Piecewise)
        for _, c in pw.args
        if isinstance(c, sp.Basic)
    ):
        return None
    detail = (
        "a stop_gradient value (mask or clipped weight) switches with the logits: "
        "the Hessian is PSD with it held constant, as training differentiates it; "
        "where it switches the loss is not smooth (a mask makes it jump), which the "
        "verdict does not cover"
    )
    return StageRecord("frozen switches", StageStatus.NOTE, detail, Stage.NOTE)
