r"""What a verdict may be extended to: every sampled token, and every V.

The stages decide the loss at ``sampled = k`` and at a few vocabulary sizes. Two
arguments extend a decision, both read off the jaxpr traced with ``sampled`` as a
*traced* (dynamic) integer, so that one program serves every ``k`` (a Python branch on
``sampled`` cannot trace; it is detected and nothing is extended over ``k``):

* **Relabelling the tokens.** If :math:`L(Pz, \sigma(k); P\mu) = L(z, k; \mu)` for
  every permutation :math:`\sigma` (matrix ``P``), then
  :math:`\nabla^2 L(Pz, \sigma(k)) = P\,\nabla^2 L(z, k)\,P^\top`: the Hessian is PSD
  everywhere at ``k`` iff it is at ``σ(k)``, and a counterexample moves with ``P``.
  The program is *equivariant* when every value it computes is either invariant
  (scalars) or permuted with the tokens (``[V]`` arrays), which an abstract
  interpretation of the jaxpr checks equation by equation: elementwise operations,
  reductions over the token axis, a read at the traced ``k`` (``lp[k]``, ``take``,
  ``one_hot(k)`` as ``iota == k``, a scatter at ``k``) keep it; a constant index
  (``lp[0]``), ``iota`` in anything but ``iota == k``, ``sampled`` in arithmetic or
  compared with a constant other than ``0`` or ``V`` (the index normalisation of
  ``lp[k]``), a non-constant ``[V]`` constant, sorting, slicing or any primitive not
  listed break it. Then the verdict holds for ``k = 0`` only, and the other stages
  check the sampled tokens ``0, 1, V - 1`` explicitly.
* **One formula for every V.** The structure theorems hold for every V when the
  program computes one formula for every V. Beyond the program identity checked by
  :mod:`theorycheck.convexity._invariance`, a value must not depend on V except
  through the number of tokens a reduction runs over: a literal whose value changes
  with V (``V - 6``, a mean's ``1/V``) except as a positive factor of the whole loss,
  ``iota`` compared or combined with anything but ``k``, the behaviour array
  :math:`\mu` (entries :math:`(1 - q)/(V - 1)` off ``k``) anywhere but at ``k``, and a
  reduction of a ``[V]`` array that does not depend on the logits (``sum(ones) = V``)
  each make the loss *V-dependent*: its scope is the V decided.

The integer constants that meet ``k``, ``iota`` or a V-dependent value are collected,
so that the numeric search also runs at a V above all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from theorycheck import _jaxpr

__all__ = [
    "Genericity",
    "analyse",
    "one_program",
    "symbolic_v",
    "trace",
]

#: Array inputs whose entries off the sampled token depend on V (built by the checker).
V_DEPENDENT_OFF_K = ("behavior_logp",)

_ELEMENTWISE = {
    "neg", "exp", "exp2", "log", "log1p", "expm1", "tanh", "cosh", "sinh", "logistic",
    "sqrt", "rsqrt", "cbrt", "square", "abs", "sign", "stop_gradient", "is_finite",
    "not", "copy", "copy_p", "real", "reduce_precision", "optimization_barrier", "add",
    "sub", "mul", "div", "pow", "max", "min", "gt", "ge", "lt", "le", "eq", "ne", "and",
    "or", "xor", "integer_pow", "convert_element_type", "select_n", "clamp", "sin",
    "cos", "tan", "atan", "atan2", "asin", "acos", "erf", "erfc", "erf_inv", "floor",
    "ceil", "round", "rem", "nextafter", "lgamma", "digamma", "logaddexp",
    "relu",
}  # fmt: skip
_SHAPE = {"broadcast_in_dim", "reshape", "squeeze", "expand_dims"}
_REDUCE = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
           "reduce_or"}  # fmt: skip
_COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}

SYM, EQV, K, KV, NEG, IOTA, BAD = "sym", "eqv", "k", "k+V", "neg", "iota", "bad"


@dataclasses.dataclass(frozen=True)
class _Info:
    """What one value is: its kind under relabelling and its dependence on V.

    kind: ``sym`` (invariant), ``eqv`` (a ``[V]`` array permuted with the tokens),
    ``k`` (the sampled index), ``k+V``/``neg`` (pieces of the index normalisation
    ``k < 0 ? k + V : k``), ``iota``, ``bad`` (breaks relabelling).
    vdep: the value depends on V beyond the number of reduced tokens.
    offk: the V dependence sits only off the sampled token (``mu``'s entries).
    zdep: the value depends on the logits.
    scaled: a positive V-dependent factor of the whole loss (allowed at the top).
    lits: literal values at the two traced V (for pattern checks), or None.
    """

    kind: str
    vdep: bool = False
    offk: bool = False
    zdep: bool = False
    scaled: bool = False
    lits: tuple[Any, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Genericity:
    """The two extension arguments for one loss (see the module doc).

    Attributes:
        traced: ``sampled`` traced as a dynamic argument (no Python branch on it).
        equivariant: the program is equivariant under relabelling the tokens: a
            verdict at ``k = 0`` holds for every sampled token.
        uniform: no value depends on V beyond the number of tokens (program identity
            is checked separately): the structure theorems' ``all V`` applies.
        why_k: why ``equivariant`` is False ("" when True).
        why_v: why ``uniform`` is False ("" when True).
        constants: integer constants that meet ``k``, ``iota`` or a V-dependent value.
        equivariant_v: the V at which ``equivariant`` was shown, when not every V
            (the loss does not trace with a symbolic V: :func:`symbolic_v`); None:
            the relabelling argument holds for every V.
        changes: V beyond the traced ones at which the program was seen to change
            (searched as well).
        vform: the derivation in V, when it ran (:mod:`._vform`).
    """

    traced: bool
    equivariant: bool
    uniform: bool
    why_k: str = ""
    why_v: str = ""
    constants: tuple[int, ...] = ()
    equivariant_v: tuple[int, ...] | None = None
    changes: tuple[int, ...] = ()
    #: the derivation in V (:class:`theorycheck.convexity._vform.VForm`), when run
    vform: Any = None

    def every_token_at(self, v: int) -> bool:
        """The relabelling argument covers every sampled token at ``V = v``."""
        return self.equivariant and (
            self.equivariant_v is None or v in self.equivariant_v
        )


class _Walk:
    """Abstract interpretation of two jaxprs of one program, at V = v0 and V = v1."""

    def __init__(self, vocabs: tuple[int, int]):
        self.vocabs = vocabs
        self.why_k = ""
        self.why_v = ""
        self.constants: set[int] = set()

    # -- bookkeeping -------------------------------------------------------------
    def _break_k(self, why: str) -> None:
        self.why_k = self.why_k or why

    def _break_v(self, why: str) -> None:
        self.why_v = self.why_v or why

    def _is_token_shape(self, a0, a1) -> bool:
        s0, s1 = getattr(a0, "shape", ()), getattr(a1, "shape", ())
        return len(s0) == 1 and (s0[0], s1[0]) == self.vocabs

    def _has_token_dim(self, a0, a1) -> bool:
        s0, s1 = getattr(a0, "shape", ()), getattr(a1, "shape", ())
        return any((x, y) == self.vocabs for x, y in zip(s0, s1))

    def _const(self, v0, v1, aval0, aval1) -> _Info:
        a0, a1 = np.asarray(v0), np.asarray(v1)
        if a0.shape != a1.shape and not self._is_token_shape(aval0, aval1):
            self._break_v("a constant array changes shape with V")
            self._break_k("a constant array changes shape with V")
            return _Info(BAD, vdep=True)
        if self._is_token_shape(aval0, aval1):
            fill = a0.size and np.all(a0 == a0.reshape(-1)[0])
            fill = fill and a1.size and np.all(a1 == a1.reshape(-1)[0])
            if not fill:
                self._break_k("a [V] constant that is not one value in every entry")
                self._break_v("a [V] constant that is not one value in every entry")
                return _Info(BAD, vdep=True)
            vary = a0.reshape(-1)[0] != a1.reshape(-1)[0]
            if vary:
                self._break_v("a [V] constant whose value changes with V")
            return _Info(EQV, vdep=bool(vary))
        vary = not np.array_equal(a0, a1)
        lits = (a0.item(), a1.item()) if a0.size == 1 else None
        return _Info(SYM, vdep=bool(vary), lits=lits)

    def _note_constants(self, infos) -> None:
        for info in infos:
            if info.lits is None:
                continue
            for x in info.lits:
                try:
                    if float(x).is_integer() and abs(float(x)) < 10**6:
                        self.constants.add(abs(int(x)))
                except (TypeError, ValueError):
                    pass

    # -- the walk ------------------------------------------------------------------
    def read(self, env, var0, var1) -> _Info:
        if isinstance(var0, jex.Literal):
            return self._const(var0.val, var1.val, var0.aval, var1.aval)
        return env[var0]

    def walk(self, j0, j1, consts0, consts1, ins: list[_Info]) -> list[_Info]:
        env: dict = {}
        for c0, c1, v0, v1 in zip(j0.constvars, j1.constvars, consts0, consts1):
            env[c0] = self._const(v0, v1, c0.aval, c1.aval)
        for v, info in zip(j0.invars, ins):
            env[v] = info
        for e0, e1 in zip(j0.eqns, j1.eqns):
            infos = [self.read(env, a, b) for a, b in zip(e0.invars, e1.invars)]
            outs = self.eqn(e0, e1, infos)
            for v, info in zip(e0.outvars, outs):
                env[v] = info
        return [self.read(env, a, b) for a, b in zip(j0.outvars, j1.outvars)]

    def eqn(self, e0, e1, ins: list[_Info]) -> list[_Info]:
        name = e0.primitive.name
        n_out = len(e0.outvars)
        sub0, sub1 = _jaxpr.sub_jaxpr(e0), _jaxpr.sub_jaxpr(e1)
        if sub0 is not None and sub1 is not None:
            return self.walk(sub0[0], sub1[0], sub0[1], sub1[1], ins)
        out = self._one(name, e0, e1, ins)
        if out.kind == BAD or out.vdep:
            self._note_constants(ins)
        return [out] * n_out

    def _bad(self, why: str, ins, *, vdep: bool = False) -> _Info:
        self._break_k(why)
        if vdep or any(i.vdep for i in ins):
            self._break_v(why)
            vdep = True
        return _Info(BAD, vdep=vdep, zdep=any(i.zdep for i in ins))

    def _one(self, name, e0, e1, ins) -> _Info:  # noqa: C901 - one dispatch table
        kinds = [i.kind for i in ins]
        out0, out1 = e0.outvars[0].aval, e1.outvars[0].aval
        if BAD in kinds:
            return self._bad("a value that breaks relabelling flows on", ins)
        if name == "iota":
            if self._is_token_shape(out0, out1):
                return _Info(IOTA)
            if self._has_token_dim(out0, out1):
                return self._bad("iota over a multi-dimensional token shape", ins,
                                 vdep=True)  # fmt: skip
            return _Info(SYM)
        if K in kinds or KV in kinds or IOTA in kinds or NEG in kinds:
            return self._index(name, e0, e1, ins)
        if name in _ELEMENTWISE:
            return self._elementwise(name, e0, ins, out0, out1)
        if name in _SHAPE:
            if self._is_token_shape(out0, out1):
                return self._join(EQV, ins)
            if self._has_token_dim(out0, out1) or EQV in kinds:
                return self._bad(f"{name} of a [V] array to another shape", ins)
            return self._join(SYM, ins)
        if name in _REDUCE or name in ("argmax", "argmin"):
            if kinds[0] == EQV and name.startswith("arg"):
                return self._bad(f"{name} (an index) of a [V] array", ins)
            if kinds[0] == EQV:
                x = ins[0]
                vdep = x.vdep or not x.zdep
                if vdep:
                    self._break_v(f"{name} of a [V] array that does not depend on the"
                                  " logits, or depends on V")  # fmt: skip
                return _Info(SYM, vdep=vdep, zdep=x.zdep)
            return self._join(SYM, ins)
        if name == "dot_general":
            if all(k == EQV for k in kinds) and not self._has_token_dim(out0, out1):
                vdep = any(i.vdep for i in ins) or not any(i.zdep for i in ins)
                if vdep:
                    self._break_v("a dot product over the tokens that depends on V")
                return _Info(SYM, vdep=vdep, zdep=any(i.zdep for i in ins))
            if EQV in kinds:
                return self._bad("dot_general of a [V] array with a non-[V] one", ins)
            return self._join(SYM, ins)
        if name in ("dynamic_slice", "gather"):
            if kinds[0] == EQV:
                return self._bad("a read of a [V] array at a constant index", ins)
            return self._join(SYM, ins)
        if name == "slice" and kinds[0] == EQV and not self._has_token_dim(out0, out1):
            keys = ("start_indices", "limit_indices", "strides")
            fixed = all(e0.params.get(k) == e1.params.get(k) for k in keys)
            why = "a read of a [V] array at a constant index"
            return self._bad(why, ins, vdep=not fixed)
        if EQV in kinds:
            return self._bad(f"primitive {name!r} on a [V] array", ins, vdep=True)
        if name in ("scatter", "scatter-add", "scatter_add", "dynamic_update_slice"):
            return self._join(SYM, ins)
        return self._bad(f"primitive {name!r}", ins, vdep=True)

    def _join(self, kind, ins) -> _Info:
        vdep = any(i.vdep for i in ins)
        offk = vdep and all(i.offk for i in ins if i.vdep)
        return _Info(kind, vdep=vdep, offk=offk, zdep=any(i.zdep for i in ins))

    def _positive_for_every_v(self, lits) -> bool:
        """A literal affine in V, positive at every V >= 2."""
        (v0, v1), (x0, x1) = self.vocabs, lits
        try:
            slope = (float(x1) - float(x0)) / (v1 - v0)
            return slope >= 0 and float(x0) + slope * (2 - v0) > 0
        except (TypeError, ValueError):
            return False

    def _elementwise(self, name, e0, ins, out0, out1) -> _Info:
        kinds = [i.kind for i in ins]
        kind = EQV if EQV in kinds else SYM
        if kind == EQV and not self._is_token_shape(out0, out1):
            return self._bad(f"{name} broadcasts a [V] array to another shape", ins)
        if name == "select_n" and kinds[0] == NEG:
            return ins[1]
        varying = [i for i in ins if i.vdep and i.lits is not None]
        plain = [i for i in ins if i not in varying]
        # A positive V-dependent factor (a mean's 1/V): allowed only on the whole loss.
        if (
            name in ("mul", "div")
            and len(varying) == 1
            and (name == "mul" or ins[1] is varying[0])
            and self._positive_for_every_v(varying[0].lits)
            and not any(i.vdep or i.scaled for i in plain)
        ):
            return _Info(kind, scaled=True, zdep=any(i.zdep for i in ins))
        scaled = [i for i in ins if i.scaled]
        if scaled:
            others = [i for i in ins if not i.scaled]
            if name in ("neg", "copy", "convert_element_type") or (
                name in ("mul", "div")
                and len(scaled) == 1
                and (name == "mul" or ins[0].scaled)
                and not any(i.vdep for i in others)
            ):
                return _Info(kind, scaled=True, zdep=any(i.zdep for i in ins))
            self._break_v("a positive V-dependent factor (such as a mean's 1/V) is "
                          "not a factor of the whole loss")  # fmt: skip
            return _Info(kind, vdep=True, zdep=any(i.zdep for i in ins))
        out = self._join(kind, ins)
        if varying:
            self._break_v(f"a literal that changes with V enters {name}")
        if out.vdep and not (out.offk and kind == EQV):
            self._break_v(f"a V-dependent value enters {name}")
        if kind == SYM and out.offk:
            out = dataclasses.replace(out, offk=False)
        return out

    def _lit_is(self, info: _Info, which: str) -> bool:
        if info.lits is None:
            return False
        want = {"0": (0, 0), "V": self.vocabs, "V-1": tuple(v - 1 for v in self.vocabs)}
        return tuple(info.lits) == want[which]

    def _index(self, name, e0, e1, ins) -> _Info:  # noqa: C901 - the index patterns
        kinds = [i.kind for i in ins]
        out0, out1 = e0.outvars[0].aval, e1.outvars[0].aval
        if name == "select_n" and kinds[0] == NEG:
            return ins[1]
        if name in _COMPARE and sorted(kinds) == [IOTA, K] and name in ("eq", "ne"):
            return _Info(EQV)
        if name in _COMPARE and K in kinds:
            other = ins[1 - kinds.index(K)]
            if self._lit_is(other, "0") or self._lit_is(other, "V"):
                return _Info(NEG if name in ("lt", "ge") else SYM)
            self._note_constants([other])
            return self._bad("the sampled index is compared with a constant", ins,
                             vdep=other.vdep)  # fmt: skip
        if name == "add" and K in kinds and len(ins) == 2:
            other = ins[1 - kinds.index(K)]
            if self._lit_is(other, "V"):
                return _Info(KV)
        if name in ("convert_element_type", "copy") and kinds[0] in (K, IOTA):
            dtype = np.dtype(e0.params.get("new_dtype", np.int32))
            if dtype.kind in "iu":
                return ins[0]
            what = "the sampled index" if kinds[0] == K else "iota"
            return self._bad(f"{what} used as a number (a float of it)", ins,
                             vdep=kinds[0] == IOTA)  # fmt: skip
        if name in _SHAPE and kinds[0] in (K, IOTA):
            size = int(np.prod(getattr(out0, "shape", ()) or (1,)))
            if kinds[0] == K and size == 1:
                return ins[0]
            if kinds[0] == IOTA and self._is_token_shape(out0, out1):
                return ins[0]
        if name == "clamp" and kinds[1] == K:
            if self._lit_is(ins[0], "0") and self._lit_is(ins[2], "V-1"):
                return ins[1]
        if (
            name in ("dynamic_slice", "gather")
            and kinds[0] == EQV
            and all(k == K for k in kinds[1:])
        ):
            if self._has_token_dim(out0, out1):
                return self._bad(f"{name} keeps the token axis", ins)
            x = ins[0]
            vdep = x.vdep and not x.offk
            return _Info(SYM, vdep=vdep, zdep=x.zdep)
        if name in ("scatter", "scatter-add", "scatter_add") and kinds[1] == K:
            if kinds[0] == EQV and kinds[2] == SYM:
                return self._join(EQV, [ins[0], ins[2]])
        if name == "dynamic_update_slice" and kinds[0] == EQV and kinds[1] == SYM:
            if all(k == K for k in kinds[2:]):
                return self._join(EQV, ins[:2])
        iota = IOTA in kinds
        what = "iota" if iota else "the sampled index"
        return self._bad(f"{what} in {name}", ins, vdep=iota)


def trace(
    loss: Callable,
    vocab: int,
    inputs: Mapping[str, Any],
    *,
    dynamic: bool,
    sampled: int = 0,
):
    """The closed jaxpr of ``loss`` at ``V = vocab``, ``sampled`` traced (``dynamic``)
    or static; array inputs are traced as arguments.

    Raises:
        Exception: whatever tracing the user's function raised (a Python branch on a
            traced ``sampled`` raises ``jax.errors.ConcretizationTypeError`` or a
            subclass).
    """
    arrays = {k: v for k, v in inputs.items() if np.ndim(v) > 0}
    scalars = {k: v for k, v in inputs.items() if np.ndim(v) == 0}
    specs = {
        k: jax.ShapeDtypeStruct(np.shape(v), jnp.float64) for k, v in arrays.items()
    }
    z = jax.ShapeDtypeStruct((vocab,), jnp.float64)
    with jax.enable_x64(True):
        if dynamic:
            return jax.make_jaxpr(lambda z, k, arr: loss(z, k, **scalars, **arr))(
                z, jax.ShapeDtypeStruct((), jnp.int32), specs
            )
        return jax.make_jaxpr(lambda z, arr: loss(z, sampled, **scalars, **arr))(
            z, specs
        )


def v_axes(name: str, shape3, shape4) -> tuple[int, ...] | str:
    """The axes of input ``name`` that are the vocabulary (3 at V = 3, 4 at V = 4);
    every other axis must be the same at both V, else the reason it is not.

    Examples:
        >>> v_axes("mu", (3,), (4,)), v_axes("w", (2, 3), (2, 4))
        ((0,), (1,))
        >>> v_axes("x", (6,), (8,))
        'the input x has a dimension 6 at V = 3, 8 at V = 4'
    """
    if len(shape3) != len(shape4):
        return f"the input {name} has shape {shape3} at V = 3, {shape4} at V = 4"
    axes = []
    for i, (d3, d4) in enumerate(zip(shape3, shape4)):
        if (d3, d4) == (3, 4):
            axes.append(i)
        elif d3 != d4:
            return f"the input {name} has a dimension {d3} at V = 3, {d4} at V = 4"
    return tuple(axes)


def symbolic_v(
    loss: Callable,
    inputs_by_v: Mapping[int, Mapping[str, Any]],
    *,
    dynamic: bool,
) -> tuple[str, tuple[int, ...]]:
    """Traces ``loss`` once with a *symbolic* vocabulary size V (``jax.export``
    shape polymorphism, constraint ``V >= 2``): ``("", ())`` when it traces, else
    ``(why, constants)``.

    The jaxprs at a few concrete V cannot show what the loss's Python does at the
    others: ``if logits.shape[0] > 40:`` traces to one program at V = 2 .. 16 and to
    another above 40. With a symbolic V a Python comparison of V with a constant
    cannot be decided and tracing raises (``InconclusiveDimensionOperation``); so a
    loss that traces this way is one program for every V >= 2, and one that does not
    keeps the scope of the V decided. The integer constants of the comparison that
    failed are returned so that the search also runs above them. A loss translated
    from another framework answers through its own ``symbolic_v(inputs_by_v)``
    (PyTorch: ``torch.export`` with a dynamic V, ``theorycheck.torchfront``).

    Args:
        loss: ``loss(logits, sampled, **inputs)``.
        inputs_by_v: the numeric inputs at two traced V (a dimension that is 3 at
            V = 3 and 4 at V = 4 becomes the symbolic V).
        dynamic: ``sampled`` traced (else the static ``k = 0``).
    """
    import re

    own = getattr(loss, "symbolic_v", None)
    if callable(own):  # a translated loss (PyTorch) answers for its own source
        return own(inputs_by_v)
    (sym,) = jax.export.symbolic_shape("V", constraints=("V >= 2",))
    in3, in4 = inputs_by_v[3], inputs_by_v[4]
    specs, scalars = {}, {}
    for name, value in in3.items():
        if np.ndim(value) == 0:
            scalars[name] = value
            continue
        axes = v_axes(name, np.shape(value), np.shape(in4[name]))
        if isinstance(axes, str):
            return axes, ()
        dims = tuple(sym if i in axes else d for i, d in enumerate(np.shape(value)))
        specs[name] = jax.ShapeDtypeStruct(dims, jnp.float64)
    z = jax.ShapeDtypeStruct((sym,), jnp.float64)
    try:
        with jax.enable_x64(True):
            if dynamic:
                jax.make_jaxpr(lambda z, k, arr: loss(z, k, **scalars, **arr))(
                    z, jax.ShapeDtypeStruct((), jnp.int32), specs
                )
            else:
                jax.make_jaxpr(lambda z, arr: loss(z, 0, **scalars, **arr))(z, specs)
    except Exception as err:  # the user's Python depends on V (or cannot say)
        text = str(err).split("\n")[0]
        first = text.split(". ")[0]
        found = re.findall(r"'(-?\d+)'", first)
        constants = tuple(sorted({abs(int(c)) for c in found}))
        why = (
            "the loss does not trace with a symbolic vocabulary size: "
            f"{type(err).__name__}: {first[:160].rstrip('.')}"
        )
        return why, constants
    return "", ()


def _walk_out(closed0, closed1, vocabs, ins):
    walk = _Walk(vocabs)
    (out,) = walk.walk(
        closed0.jaxpr, closed1.jaxpr, closed0.consts, closed1.consts, ins
    )
    return walk, out


def analyse(closed: Mapping[int, Any], arrays: tuple[str, ...], *, dynamic: bool,
            same: bool) -> Genericity:  # fmt: skip
    """Reads the two extension arguments off the traces.

    Args:
        closed: closed jaxprs of the loss by V (at least V = 3 and 4). The formula's
            V dependence is read off the two smallest V >= 3 side by side; the
            relabelling argument must hold at every traced V (one walk each).
        arrays: the names of the array inputs, in the order the traces take them
            (sorted, as ``make_jaxpr`` flattens a dict).
        dynamic: ``sampled`` is the second argument of the traces.
        same: the programs at every traced V are one program up to V
            (:func:`theorycheck.convexity._invariance.same_program`).
    """
    v0, v1 = sorted(v for v in closed if v >= 3)[:2]
    ins = [_Info(EQV, zdep=True)]
    if dynamic:
        ins.append(_Info(K))
    for name in sorted(arrays):
        off = name in V_DEPENDENT_OFF_K
        ins.append(_Info(EQV, vdep=off, offk=off))
    try:
        walk, out = _walk_out(closed[v0], closed[v1], (v0, v1), ins)
        for v, c in sorted(closed.items()):
            if walk.why_k:
                break
            single, single_out = _walk_out(c, c, (v, v), ins)
            if single.why_k or single_out.kind != SYM:
                walk.why_k = f"at V = {v}: {single.why_k or 'not invariant'}"
    except Exception as err:  # an unforeseen jaxpr form: extend nothing
        why = f"the program could not be analysed ({type(err).__name__}: {err})"
        return Genericity(dynamic, False, False, why, why)
    why_k = walk.why_k
    if not dynamic:
        why_k = "the loss branches on sampled in Python (it does not trace with a "
        why_k += "traced sampled)"
    elif out.kind != SYM and not why_k:
        why_k = "the output is not invariant under relabelling the tokens"
    why_v = walk.why_v or ("the loss depends on V" if out.vdep else "")
    if not same:
        why_v = "the program differs between the traced V"
    return Genericity(
        dynamic,
        dynamic and not why_k,
        not why_v,
        why_k,
        why_v,
        tuple(sorted(walk.constants)),
    )


def one_program(loss: Callable) -> Callable:
    """``loss`` evaluated through its jaxpr traced with ``sampled`` dynamic.

    Every stage then evaluates one program, the one the relabelling argument read: a
    loss that inspected the type of ``sampled`` in Python cannot show the symbolic
    stages (which pass an ``int``) a different function from the analysed one. The
    jaxpr is re-bound into the caller's trace (``jax.core.eval_jaxpr``), so JIT,
    ``vmap``, ``grad`` and the SymPy bridge see the same equations.
    """

    def run(z, sampled, **inputs):
        z = jnp.asarray(z) if not isinstance(z, jax.core.Tracer) else z
        # NumPy arrays cannot be indexed by the traced k: the same values as JAX arrays
        inputs = {
            name: jnp.asarray(v) if isinstance(v, np.ndarray) else v
            for name, v in inputs.items()
        }
        spec = jax.ShapeDtypeStruct(jnp.shape(z), jnp.result_type(z))
        closed = jax.make_jaxpr(lambda x, k: loss(x, k, **inputs))(
            spec, jax.ShapeDtypeStruct((), jnp.int32)
        )
        k = jnp.asarray(sampled, jnp.int32)
        return jax.core.eval_jaxpr(closed.jaxpr, closed.consts, z, k)[0]

    run.__wrapped__ = loss
    return run
