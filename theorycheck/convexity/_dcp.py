r"""Composition proofs of convexity (disciplined convex programming, as CVXPY's DCP).

The jaxpr of the loss is walked once, equation by equation, with an abstract value per
variable: its *curvature* in the logits (``const`` ⊂ ``affine`` ⊂ ``convex`` /
``concave``, else ``unknown``), its *sign* (``+`` > 0, ``0+`` ≥ 0, ``-``, ``0-``,
``?``), whether it is *log-convex* (positive with a convex logarithm) and, for a value
that depends on no logit, its concrete value. The rules are the DCP composition rules
(Grant, Boyd & Ye 2006, "Disciplined convex programming"; Boyd & Vandenberghe 2004,
§3.2):

* sums of convex terms, non-negative multiples (a constant of known sign scales), an
  affine map of the logits, a ``select``/``concatenate``/indexing of convex pieces by a
  constant (elementwise a choice of one convex piece);
* ``max`` (and ``reduce_max``) of convex terms is convex, ``min`` of concave terms
  concave;
* ``h ∘ g`` is convex when ``h`` is convex non-decreasing and ``g`` convex (``exp``,
  ``logaddexp``/``softplus``, ``relu``, ``x²`` on ``x ≥ 0``), or ``h`` convex
  non-increasing and ``g`` concave (``1/x`` on ``x > 0``); ``|affine|``, ``affine²`` are
  convex; ``log``, ``sqrt`` are concave non-decreasing on their domain;
* log-convexity (Boyd & Vandenberghe §3.5): ``exp(convex)`` and positive constants are
  log-convex, and sums, products, maxima and positive multiples of log-convex terms are
  log-convex; ``log(log-convex)`` is convex. So log-sum-exp (``logsumexp``, the ``lse``
  of ``log_softmax``, ``logsumexp(b = w)`` with every ``w_i > 0``) is convex, and
  ``-log π_k = lse(z) - z_k`` is.

``stop_gradient(x)`` is a constant whose sign is that of ``x``: the checker's Hessian
holds detached values constant, so the proof is of the loss with those values frozen
(for every value they can take), which is the Hessian the verdict is about. A
predicate that depends on the logits (``jnp.where(z > 0, ...)``, ``lax.cond`` on the
logits), ``sort``, ``argmax``, ``floor`` of the logits and every primitive not listed
give ``unknown``, named with its line. The result is a proof at the traced V, for the
``sampled`` value traced as an abstract integer (one derivation for every k), at the
given parameters; :func:`dcp_stage` extends it to every V only when the vocabulary
rules (:mod:`theorycheck.convexity._genericity`) say the program is one formula for all
V.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from theorycheck import _jaxpr
from theorycheck.convexity._types import Scope, Stage, StageRecord, StageStatus

__all__ = ["Abstract", "analyse", "dcp_records", "dcp_stage", "undecided"]

#: The composition prover runs (a switch for same-run before/after measurements).
ENABLED = True

CONST, AFFINE, CONVEX, CONCAVE, UNKNOWN = (
    "const",
    "affine",
    "convex",
    "concave",
    "unknown",
)
_CVX_OK = (CONST, AFFINE, CONVEX)
_CCV_OK = (CONST, AFFINE, CONCAVE)
_NONNEG, _NONPOS = ("+", "0+"), ("-", "0-")


@dataclasses.dataclass(frozen=True)
class Abstract:
    """The abstract value of one jaxpr variable (every element of an array alike)."""

    curv: str
    sign: str = "?"
    logcvx: bool = False
    value: Any = None  # concrete value of a value that depends on no logit
    why: str = ""  # the first step the rules could not read

    @property
    def const(self) -> bool:
        return self.curv == CONST


def _sign_of(value) -> str:
    a = np.asarray(value)
    if a.dtype == bool:
        a = a.astype(np.int8)
    if a.size == 0 or not np.issubdtype(a.dtype, np.number):
        return "?"
    a = a.astype(np.float64)
    if np.isnan(a).any():
        return "?"
    lo, hi = a.min(), a.max()
    if lo > 0:
        return "+"
    if lo >= 0:
        return "0+"
    if hi < 0:
        return "-"
    if hi <= 0:
        return "0-"
    return "?"


def _const(value) -> Abstract:
    s = _sign_of(value)
    return Abstract(CONST, s, s == "+", np.asarray(value))


def _neg_curv(c):
    return {CONVEX: CONCAVE, CONCAVE: CONVEX}.get(c, c)


def _neg_sign(s):
    return {"+": "-", "0+": "0-", "-": "+", "0-": "0+"}.get(s, "?")


def _join_curv(a, b):
    """Curvature of a sum (and of an elementwise choice) of the two."""
    if a == CONST:
        return b
    if b == CONST:
        return a
    if a == AFFINE:
        return b
    if b == AFFINE:
        return a
    return a if a == b else UNKNOWN


def _add_sign(a, b):
    if a in _NONNEG and b in _NONNEG:
        return "+" if "+" in (a, b) else "0+"
    if a in _NONPOS and b in _NONPOS:
        return "-" if "-" in (a, b) else "0-"
    return "?"


def _join_sign(a, b):
    if a == b:
        return a
    if a in _NONNEG and b in _NONNEG:
        return "0+"
    if a in _NONPOS and b in _NONPOS:
        return "0-"
    return "?"


def _mul_sign(a, b):
    if "?" in (a, b):
        return "?"
    strict = a in ("+", "-") and b in ("+", "-")
    pos = (a in _NONNEG) == (b in _NONNEG)
    return ("+" if pos else "-") if strict else ("0+" if pos else "0-")


def _scale(x: Abstract, s: str) -> str:
    """Curvature of ``c * x`` for a constant ``c`` of sign ``s``."""
    if x.curv in (CONST, AFFINE):
        return x.curv
    if s in _NONNEG:
        return x.curv
    if s in _NONPOS:
        return _neg_curv(x.curv)
    return UNKNOWN


def _why(*xs: Abstract) -> str:
    return next((x.why for x in xs if x.why), "")


class _Walk:
    def __init__(self):
        self.sites: list[str] = []  # the call sites of the jaxprs being walked

    def where(self, eqn) -> str:
        site = _jaxpr.where(eqn)
        known = [s for s in self.sites if s != "an unknown line"]
        return site if site != "an unknown line" or not known else known[-1]

    def fail(self, eqn, reason: str, ins) -> Abstract:
        inherited = _why(*ins)
        why = inherited or f"{reason} at {self.where(eqn)}"
        return Abstract(UNKNOWN, "?", why=why)

    def run(self, jaxpr, consts, args):
        env: dict[Any, Abstract] = {}

        def read(v):
            if isinstance(v, jcore.Literal):
                return _const(v.val)
            return env[v]

        for var, c in zip(jaxpr.constvars, consts):
            env[var] = c if isinstance(c, Abstract) else _const(c)
        for var, a in zip(jaxpr.invars, args):
            env[var] = a
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, ins)
            for var, o in zip(eqn.outvars, outs):
                env[var] = o
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, ins) -> list[Abstract]:
        name = eqn.primitive.name
        n_out = len(eqn.outvars)
        if name == "custom_jvp_call" and _is_logaddexp(eqn):
            return [self._logaddexp(eqn, ins)]
        if name in _jaxpr.CALL_JAXPR:
            found = _jaxpr.sub_jaxpr(eqn)
            if found is not None:
                jaxpr, consts = found
                self.sites.append(_jaxpr.where(eqn))
                try:
                    return self.run(jaxpr, [_const(c) for c in consts], ins)
                finally:
                    self.sites.pop()
        if all(a.value is not None for a in ins):
            try:  # a value that depends on no logit: computed
                with jax.enable_x64(True):
                    out = eqn.primitive.bind(
                        *[jnp.asarray(a.value) for a in ins], **eqn.params
                    )
                outs = out if eqn.primitive.multiple_results else [out]
                return [_const(np.asarray(o)) for o in outs]
            except Exception:  # noqa: BLE001 - then read abstractly
                pass
        if all(a.const for a in ins) and name not in ("sign", "abs"):
            sign = {"stop_gradient": ins[0].sign if ins else "?", "exp": "+"}.get(
                name, "?"
            )
            return [Abstract(CONST, sign, sign == "+")] * n_out
        if name == "cond":
            return self._cond(eqn, ins)
        try:
            out = self.one(eqn, name, ins)
        except Exception as err:  # noqa: BLE001 - a rule that cannot read it
            out = self.fail(eqn, f"{name} ({type(err).__name__})", ins)
        if not isinstance(out, list):
            if out.curv == UNKNOWN and not out.why:
                out = self.fail(eqn, f"{name} of values it does not compose", ins)
            out = [out] * n_out
        return out

    def _logaddexp(self, eqn, ins) -> Abstract:
        a, b = ins
        if all(x.const for x in ins):
            return Abstract(CONST)
        if a.curv in _CVX_OK and b.curv in _CVX_OK:
            sign = "+" if "+" in (a.sign, b.sign) or "0+" in (a.sign, b.sign) else "?"
            return Abstract(CONVEX, sign)
        return self.fail(eqn, "logaddexp of a non-convex argument", ins)

    def _cond(self, eqn, ins) -> list[Abstract]:
        index, ops = ins[0], ins[1:]
        branches = eqn.params["branches"]
        if not index.const:
            return [
                self.fail(eqn, "lax.cond/switch on a value of the logits", ins)
            ] * len(eqn.outvars)
        if index.value is not None:
            i = int(np.clip(np.asarray(index.value).item(), 0, len(branches) - 1))
            chosen = [branches[i]]
        else:
            chosen = list(branches)
        outs = None
        for br in chosen:
            res = self.run(br.jaxpr, [_const(c) for c in br.consts], ops)
            outs = res if outs is None else [_join(x, y) for x, y in zip(outs, res)]
        return outs

    def one(self, eqn, name, ins):  # noqa: C901 - one dispatch table
        x = ins[0] if ins else None
        p = eqn.params
        if name in _STRUCTURAL:
            return dataclasses.replace(x, value=None)
        if name == "convert_element_type":
            if np.dtype(p["new_dtype"]).kind in "iub" and not x.const:
                return self.fail(eqn, "an integer cast of the logits", ins)
            if _narrowing(eqn) and not x.const:
                return self.fail(eqn, "a float cast that rounds", ins)
            return dataclasses.replace(x, value=None)
        if name in ("dynamic_slice", "gather"):
            if not all(a.const for a in ins[1:]):
                return self.fail(eqn, f"{name} at an index of the logits", ins)
            return dataclasses.replace(x, value=None)
        if name in ("dynamic_update_slice", "scatter", "scatter-add", "scatter_add"):
            idx, upd = (
                (ins[2:], ins[1])
                if name == "dynamic_update_slice"
                else (
                    [ins[1]],
                    ins[2],
                )
            )
            if not all(a.const for a in idx):
                return self.fail(eqn, f"{name} at an index of the logits", ins)
            if "add" in name:
                return Abstract(
                    _join_curv(x.curv, upd.curv), _add_sign(x.sign, upd.sign)
                )
            return _join(x, upd)
        if name == "concatenate":
            out = ins[0]
            for a in ins[1:]:
                out = _join(out, a)
            return out
        if name == "select_n":
            pred, cases = ins[0], ins[1:]
            if not pred.const:
                return self.fail(
                    eqn, "a select (jnp.where) on a value of the logits", ins
                )
            if pred.value is not None:
                picked = set(
                    np.unique(np.asarray(pred.value).astype(np.int64)).tolist()
                )
                cases = [cases[i] for i in sorted(picked)]
            out = cases[0]
            for a in cases[1:]:
                out = _join(out, a)
            return dataclasses.replace(out, value=None)
        if name == "add":
            a, b = ins
            return _sum(a, b)
        if name == "sub":
            return _sum(ins[0], _negate(ins[1]))
        if name == "neg":
            return _negate(x)
        if name == "mul":
            return self._mul(eqn, ins)
        if name == "div":
            a, b = ins
            if b.const and b.sign in ("+", "-"):
                return Abstract(
                    _scale(a, b.sign),
                    _mul_sign(a.sign, b.sign),
                    a.logcvx and b.sign == "+",
                )
            if b.const:
                return self.fail(eqn, "a division by a constant of unknown sign", ins)
            return self.fail(eqn, "a division by a value of the logits", ins)
        if name == "stop_gradient":
            return Abstract(CONST, x.sign, x.sign == "+")
        if name == "clamp":
            return self._clamp(eqn, ins)
        if name == "scan":
            return self._scan(eqn, ins)
        if name in _COMPARISONS:
            return self.fail(eqn, f"a comparison ({name}) of values of the logits", ins)
        if name in ("max", "reduce_max"):
            return self._max(eqn, name, ins)
        if name in ("min", "reduce_min"):
            neg = self._max(eqn, name.replace("min", "max"), [_negate(a) for a in ins])
            return _negate(neg) if neg.curv != UNKNOWN else neg
        if name == "reduce_sum":
            return dataclasses.replace(x, value=None)
        if name == "exp":
            if x.curv in _CVX_OK:
                return Abstract(CONVEX, "+", True)
            return self.fail(eqn, "exp of a non-convex value", ins)
        if name in ("log", "log1p"):
            if x.logcvx:
                return Abstract(CONVEX, "?")
            if x.curv in _CCV_OK and x.sign == "+":
                return Abstract(CONCAVE, "?")
            return self.fail(eqn, f"{name} of a value not shown log-convex", ins)
        if name == "sqrt":
            if x.curv in _CCV_OK and x.sign in _NONNEG:
                return Abstract(CONCAVE, "0+", x.logcvx)
            return self.fail(eqn, "sqrt of a value not shown concave and >= 0", ins)
        if name == "abs":
            if x.sign in _NONNEG:
                return x if x.value is None else _const(np.abs(x.value))
            if x.sign in _NONPOS:
                return _negate(x)
            if x.curv in (CONST, AFFINE):
                return Abstract(CONVEX if x.curv == AFFINE else CONST, "0+")
            return self.fail(eqn, "abs of a non-affine value of unknown sign", ins)
        if name == "sign":
            if x.sign in ("+", "-"):
                one = 1.0 if x.sign == "+" else -1.0
                return _const(np.full(eqn.outvars[0].aval.shape, one))
            if x.const:
                return Abstract(CONST)
            return self.fail(eqn, "sign of the logits", ins)
        if name in ("square", "integer_pow"):
            return self._power(eqn, 2 if name == "square" else int(p["y"]), ins)
        if name == "dot_general":
            return self._dot(eqn, ins)
        return self.fail(eqn, f"{name!r} (no composition rule)", ins)

    def _mul(self, eqn, ins):
        a, b = ins
        if b.const and not a.const:
            a, b = b, a
        if a.const:
            return Abstract(
                _scale(b, a.sign) if a.sign != "0" else CONST,
                _mul_sign(a.sign, b.sign),
                b.logcvx and a.sign == "+",
            )
        if a.logcvx and b.logcvx:
            return Abstract(CONVEX, "+", True)
        return self.fail(eqn, "a product of two values of the logits", ins)

    def _max(self, eqn, name, ins):
        if all(a.curv in _CVX_OK for a in ins):
            signs = [a.sign for a in ins]
            if "+" in signs:
                sign = "+"
            elif "0+" in signs:
                sign = "0+"
            elif all(s == "-" for s in signs):
                sign = "-"
            elif all(s in _NONPOS for s in signs):
                sign = "0-"
            else:
                sign = "?"
            logcvx = all(a.logcvx for a in ins)
            curv = CONST if all(a.const for a in ins) else CONVEX
            return Abstract(curv, sign, logcvx)
        return self.fail(eqn, f"{name} of a non-convex value", ins)

    def _clamp(self, eqn, ins):
        lo, x, hi = ins
        if lo.value is None or hi.value is None:
            return self.fail(eqn, "clamp with bounds that are not constants", ins)
        lo_v, hi_v = np.asarray(lo.value, float), np.asarray(hi.value, float)
        if np.all(np.isposinf(hi_v)):
            return self._max(eqn, "max", [x, lo])
        if np.all(np.isneginf(lo_v)):
            neg = self._max(eqn, "max", [_negate(x), _negate(hi)])
            return _negate(neg) if neg.curv != UNKNOWN else neg
        return self.fail(eqn, "clamp (jnp.clip) of a value of the logits", ins)

    def _scan(self, eqn, ins):
        p = eqn.params
        nc, ncarry, length = p["num_consts"], p["num_carry"], p["length"]
        if length > 64:
            return self.fail(eqn, f"scan of {length} steps (at most 64 read)", ins)
        body = p["jaxpr"]
        consts, carry, xs = ins[:nc], list(ins[nc : nc + ncarry]), ins[nc + ncarry :]
        ys = None
        order = range(length - 1, -1, -1) if p.get("reverse") else range(length)
        for i in order:
            xi = [
                _const(np.asarray(a.value)[i])
                if a.value is not None
                else dataclasses.replace(a, value=None)
                for a in xs
            ]
            out = self.run(
                body.jaxpr, [_const(c) for c in body.consts], list(consts) + carry + xi
            )
            carry, y = list(out[:ncarry]), out[ncarry:]
            ys = y if ys is None else [_join(a, b) for a, b in zip(ys, y)]
        return carry + [dataclasses.replace(a, value=None) for a in (ys or [])]

    def _power(self, eqn, y, ins):
        (x,) = ins
        if y == 1:
            return x
        if y == 0:
            return _const(1.0)
        if y % 2 == 0 and y > 0:
            if x.curv == AFFINE:
                return Abstract(CONVEX, "0+")
            if x.curv == CONVEX and x.sign in _NONNEG:
                return Abstract(CONVEX, "0+", x.logcvx)
            if x.curv == CONCAVE and x.sign in _NONPOS:
                return Abstract(CONVEX, "0+")
        elif y > 0:
            if x.curv in (AFFINE, CONVEX) and x.sign in _NONNEG:
                return Abstract(CONVEX, x.sign, x.logcvx)
            if x.curv in (AFFINE, CONCAVE) and x.sign in _NONPOS:
                return Abstract(CONCAVE, x.sign)
        elif x.sign == "+" and x.curv in _CCV_OK:  # x^y, y < 0: convex non-increasing
            return Abstract(CONVEX, "+")
        return self.fail(eqn, f"x^{y} of a value it does not compose with", ins)

    def _dot(self, eqn, ins):
        a, b = ins
        if b.value is not None and a.value is None:
            a, b = b, a
        if a.value is None:
            return self.fail(eqn, "a product of two values of the logits", ins)
        s = _sign_of(a.value)
        return Abstract(_scale(b, s), "?")


_COMPARISONS = {"gt", "ge", "lt", "le", "eq", "ne", "and", "or", "not", "is_finite"}
_STRUCTURAL = {
    "broadcast_in_dim",
    "reshape",
    "squeeze",
    "expand_dims",
    "transpose",
    "rev",
    "slice",
    "copy",
    "copy_p",
    "real",
    "optimization_barrier",
}


def _narrowing(eqn) -> bool:
    """A float cast to fewer bits than its operand has (a rounding step)."""
    from theorycheck._jaxpr import rounds

    new = np.dtype(eqn.params["new_dtype"])
    old = np.dtype(getattr(eqn.invars[0].aval, "dtype", np.float64))
    return rounds(new) and (old.kind == "f" and new.itemsize < old.itemsize)


#: the primitives of ``jnp.logaddexp``'s primal (JAX 0.10): max(a, b) + log1p(e^-|a-b|)
#: with a NaN guard.
_LOGADDEXP = (
    "max",
    "sub",
    "ne",
    "add",
    "abs",
    "neg",
    "exp",
    "log1p",
    "add",
    "select_n",
)


def _is_logaddexp(eqn) -> bool:
    """A custom_jvp named ``logaddexp`` whose primal is JAX's (a function of that
    name with another body is interpreted through its body)."""
    body = eqn.params["call_jaxpr"].jaxpr
    info = getattr(body, "debug_info", None)
    name = getattr(info, "func_name", "") or ""
    prims = tuple(e.primitive.name for e in body.eqns)
    return name == "logaddexp" and prims == _LOGADDEXP and len(body.invars) == 2


def _join(a: Abstract, b: Abstract) -> Abstract:
    return Abstract(
        _join_curv(a.curv, b.curv),
        _join_sign(a.sign, b.sign),
        a.logcvx and b.logcvx,
        why=_why(a, b),
    )


def _sum(a: Abstract, b: Abstract) -> Abstract:
    return Abstract(
        _join_curv(a.curv, b.curv),
        _add_sign(a.sign, b.sign),
        a.logcvx and b.logcvx,
        why=_why(a, b),
    )


def _negate(a: Abstract) -> Abstract:
    value = None if a.value is None else -np.asarray(a.value)
    return Abstract(_neg_curv(a.curv), _neg_sign(a.sign), False, value, a.why)


def analyse(loss, vocab: int, inputs: dict[str, Any]) -> Abstract:
    r"""The abstract value of ``loss(z, k, **inputs)`` at ``V = vocab``.

    The logits are ``affine``; ``sampled`` is traced as an integer argument and read
    as a constant of unknown value in ``[0, V)`` (so the derivation holds for every
    k); a scalar input keeps its value, an array input is a constant of the sign of
    its entries (``inputs`` may give, per name, the arrays of several k: the sign is
    that of all of them).
    """
    names = sorted(inputs)
    arrays = {n: inputs[n] for n in names}

    def first(v):
        return v[0] if isinstance(v, list) else v

    def fn(z, k, *vals):
        return loss(z, k, **dict(zip(names, vals)))

    with jax.enable_x64(True):
        closed = jax.make_jaxpr(fn)(
            jnp.zeros(vocab, jnp.float64),
            jax.ShapeDtypeStruct((), jnp.int32),
            *[jnp.asarray(first(arrays[n])) for n in names],
        )
    args = [Abstract(AFFINE, "?"), Abstract(CONST, "0+")]
    for n in names:
        v = arrays[n]
        if isinstance(v, list) or np.ndim(v) > 0:
            vals = v if isinstance(v, list) else [v]
            sign = _sign_of(np.concatenate([np.ravel(np.asarray(a)) for a in vals]))
            args.append(Abstract(CONST, sign, sign == "+"))
        else:
            args.append(_const(np.asarray(v)))
    walk = _Walk()
    (out,) = walk.run(
        closed.jaxpr, [_const(np.asarray(c)) for c in closed.consts], args
    )
    return out


#: The V at which the composition rules are run when the program is one formula for
#: every V (then the derivation is the same at every V).
UNIFORM_VOCABS = (2, 3)
#: The largest V at which the rules are run when it is not (array inputs are built at
#: every k there, for their signs).
MAX_VOCAB = 64


def dcp_stage(resolved, params, searched, uniform: bool, build) -> list[StageRecord]:
    r"""The composition prover's record (empty when it does not apply).

    Args:
        resolved: the resolved loss (its ``loss`` is the one traced program).
        params: the ``--set`` values (for the record).
        searched: the V the numeric search runs at.
        uniform: the vocabulary rules say the program is one formula for every V
            (the ``vocab invariance`` record is confirmed).
        build: ``(V, k) -> inputs`` (the stages' inputs).

    Returns:
        One ``composition (DCP)`` record: ``proved`` with scope ``all V >= 2`` when
        ``uniform``, else the V it ran at; tokens every k (``sampled`` abstract).
    """
    vocabs = UNIFORM_VOCABS if uniform else tuple(v for v in searched if v <= MAX_VOCAB)
    proved, why = [], ""
    for v in vocabs:
        ks = range(v) if not uniform else (0, v - 1)
        per_k = [build(v, k).numeric for k in ks]
        inputs = {
            n: [d[n] for d in per_k] if np.ndim(per_k[0][n]) > 0 else per_k[0][n]
            for n in per_k[0]
        }
        try:
            out = analyse(resolved.loss, v, inputs)
        except Exception as err:  # noqa: BLE001 - never a user-facing traceback
            why = f"the composition rules could not run ({type(err).__name__})"
            break
        if out.curv not in _CVX_OK:
            why = out.why or f"the loss is {out.curv} by the rules"
            break
        proved.append(v)
    if not proved or why:
        detail = f"not a composition the DCP rules prove convex: {why}"
        return [
            StageRecord("composition (DCP)", StageStatus.UNKNOWN, detail, Stage.DCP)
        ]
    if uniform:
        scope = Scope.every(2)
        where = (
            f"derived at V = {', '.join(map(str, vocabs))}; one formula for every V "
            "(vocab invariance), so every V >= 2"
        )
    else:
        scope = Scope.of(*proved)
        where = f"at V = {', '.join(map(str, proved))} (the V checked)"
    detail = (
        "convex by the composition rules (sums, non-negative multiples, max, "
        "convex non-decreasing of convex, log-sum-exp; stop_gradient values held "
        f"constant), {where}, with sampled traced: every sampled token"
    )
    return [
        StageRecord(
            "composition (DCP)",
            StageStatus.PROVED,
            detail,
            Stage.DCP,
            scope,
            scope,
            tokens=None,
        )
    ]


def undecided(records) -> bool:
    """True when the records so far combine to ``unknown``."""
    from theorycheck.convexity._combine import combine
    from theorycheck.convexity._types import Verdict

    return combine(records, Scope.of(3)).verdict is Verdict.UNKNOWN


def dcp_records(records, resolved, searched, build) -> list[StageRecord]:
    """The pipeline's hook: the composition prover, when the stages before it left
    the verdict ``unknown`` (an empty list otherwise)."""
    if not ENABLED or not undecided(records):
        return []
    uniform = any(
        r.stage is Stage.INVARIANCE and r.status is StageStatus.CONFIRMED
        for r in records
    )
    return dcp_stage(resolved, None, searched, uniform, build)
