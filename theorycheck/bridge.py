r"""Where SymPy meets JAX: a jaxpr interpreter that turns a JAX loss into SymPy.

A user writes a loss once, as a JAX function of the logits. For a fixed small vocabulary
``V`` this module traces it (``jax.make_jaxpr``) and re-evaluates every primitive of the
jaxpr on SymPy values, so that the symbolic and formal engines see *the same function*:

* ``stop_gradient(x)`` becomes :class:`~theorycheck.symbolic.Frozen` ``(x)`` (value
kept,
  derivative zero), exactly as JAX differentiates it;
* ``max``/``min``/``abs``/``select_n``/``clamp`` (``jnp.clip``, ``jnp.where``,
  ``jnp.minimum``) become ``Piecewise``;
* the max-shift of ``log_softmax``/``softmax``/``logsumexp``,
  :math:`z - \operatorname{sg}(\max z)`, is removed exactly: the frozen maximum is
  replaced
  by a symbol ``m``, :math:`e^{z_i - m} = e^{z_i} e^{-m}` and
  :math:`\log(e^{-m} X) = -m + \log X` are applied, and the shift is dropped only when
  ``m`` then cancels (otherwise ``Frozen(Max(...))`` is kept, which is still exact);
* ``custom_jvp`` functions with a known closed form (``logaddexp``, ``relu``) are
replaced
  by it; other ones are interpreted through their primal jaxpr.

An operation outside the table raises :class:`UnsupportedOperation` naming the
primitive.

Examples:
    >>> import jax, jax.numpy as jnp, sympy as sp
    >>> z = sp.symbols("z0:3", real=True)
    >>> sympy_from_jax(lambda x, k: -jax.nn.log_softmax(x)[k], z, sampled=1)
    -z1 + log(exp(z0) + exp(z1) + exp(z2))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck import _jaxpr
from theorycheck.symbolic import Frozen, split_exp_log

__all__ = [
    "AffineMap",
    "UnsupportedOperation",
    "affine_sympy_from_jax",
    "sympy_from_jax",
    "to_sympy_number",
]


class UnsupportedOperation(NotImplementedError):
    """A JAX primitive (or value) the symbolic translation does not support."""


def to_sympy_number(value: Any) -> sp.Expr:
    """Converts a float/int/bool constant to an exact SymPy number (``0.2`` -> ``1/5``).

    Floats are read through their shortest decimal ``repr``, so a hyperparameter written
    ``0.2`` becomes ``Rational(1, 5)``; ``±inf`` becomes ``±oo``; NaN raises.
    """
    if isinstance(value, sp.Basic):
        return value
    value = np.asarray(value).item()
    if isinstance(value, bool):
        return sp.true if value else sp.false
    if isinstance(value, int):
        return sp.Integer(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise UnsupportedOperation("NaN constant in the loss")
        if math.isinf(value):
            return sp.oo if value > 0 else -sp.oo
        return sp.Rational(repr(value))
    raise UnsupportedOperation(f"constant of type {type(value).__name__}")


def _arr(x) -> np.ndarray:
    a = np.empty(np.shape(x), dtype=object)
    flat = np.asarray(x, dtype=object).reshape(-1)
    a.reshape(-1)[:] = [to_sympy_number(v) for v in flat]
    return a


def _is_num(x) -> bool:
    return isinstance(x, sp.Basic) and x.is_number and not isinstance(x, sp.Piecewise)


def _cond(c):
    return c if isinstance(c, sp.logic.boolalg.Boolean) else sp.Ne(c, 0)


#: Most branch combinations a ``select_n`` condition may fold into (the product of the
#: branch counts of the Piecewise inside it). SymPy folds such a condition into an
#: ``ITE`` and, at every later ``piecewise_fold``, minimises it with ``simplify`` on
#: each relation: at 64 combinations (the TV predictive mask at V = 3, whose signs
#: carry a float64 tie tolerance) that ran past the 100 s symbolic budget; the
#: largest conditions of ``dppo_binary_tv`` and ``dppo_capped`` (translated in seconds)
#: have 6.
MAX_SELECT_BRANCHES = 32


def _branches(pred) -> int:
    return math.prod(len(p.args) for p in pred.atoms(sp.Piecewise))


def _select(pred, *cases):
    pred = _cond(pred)
    if isinstance(pred, sp.Basic) and _branches(pred) > MAX_SELECT_BRANCHES:
        raise UnsupportedOperation(
            f"select_n on a condition that folds into {_branches(pred)} piecewise "
            f"branches (more than {MAX_SELECT_BRANCHES}: SymPy's folding of it does "
            "not end in the symbolic budget)"
        )
    if pred in (sp.true, sp.false) or len(cases) > 2:
        if isinstance(pred, sp.logic.boolalg.BooleanAtom):
            return cases[int(bool(pred))]
        raise UnsupportedOperation("select_n with a symbolic integer predicate")
    if cases[0] == cases[1]:
        return cases[0]
    return sp.Piecewise((cases[1], pred), (cases[0], True))


def _max(a, b):
    # Distribute over Piecewise arguments so conditions stay plain relations (no ITE).
    a, b = sp.piecewise_fold(a), sp.piecewise_fold(b)
    for x, other, swap in ((a, b, False), (b, a, True)):
        if isinstance(x, sp.Piecewise):
            return sp.piecewise_fold(
                sp.Piecewise(
                    *[
                        (_max(other, e) if swap else _max(e, other), c)
                        for e, c in x.args
                    ]
                )
            )
    if a == -sp.oo or b == sp.oo:
        return b
    if b == -sp.oo or a == sp.oo:
        return a
    d = sp.simplify(a - b) if (_is_num(a) and _is_num(b)) else a - b
    if d.is_nonnegative:
        return a
    if d.is_nonpositive:
        return b
    return sp.Piecewise((a, a >= b), (b, True))


def _min(a, b):
    return -_max(-a, -b)


def _abs(x):
    if x.is_nonnegative:
        return x
    if x.is_nonpositive:
        return -x
    return sp.Piecewise((x, x >= 0), (-x, True))


def _frozen(x):
    return x if not x.free_symbols else Frozen(x)


def _is_finite(x):
    if x.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return (
            sp.false if _is_num(x) else _unsupported("is_finite of a non-finite value")
        )
    return sp.true


def _unsupported(msg):
    raise UnsupportedOperation(msg)


def _to_bool_num(x):
    if isinstance(x, sp.logic.boolalg.BooleanAtom):
        return sp.Integer(int(bool(x)))
    if isinstance(x, sp.logic.boolalg.Boolean):
        return sp.Piecewise((1, x), (0, True))
    return x


_UNARY: dict[str, Callable] = {
    "neg": lambda x: -x,
    "exp": sp.exp,
    "exp2": lambda x: 2**x,
    "log": sp.log,
    "log1p": lambda x: sp.log(1 + x),
    "expm1": lambda x: sp.exp(x) - 1,
    "tanh": sp.tanh,
    "cosh": sp.cosh,
    "sinh": sp.sinh,
    "logistic": lambda x: 1 / (1 + sp.exp(-x)),
    "sqrt": sp.sqrt,
    "rsqrt": lambda x: 1 / sp.sqrt(x),
    "square": lambda x: x**2,
    "abs": _abs,
    "sign": sp.sign,
    "stop_gradient": _frozen,
    "is_finite": _is_finite,
    "not": lambda x: sp.Not(x) if isinstance(x, sp.logic.boolalg.Boolean) else ~x,
    "copy": lambda x: x,
    "copy_p": lambda x: x,
    "real": lambda x: x,
    "reduce_precision": lambda x: _unsupported(
        "JAX primitive 'reduce_precision' rounds its value (a step function, never "
        "the identity)"
    ),
    "optimization_barrier": lambda x: x,
    "atan": sp.atan,
    "asin": sp.asin,
    "acos": sp.acos,
    "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan,
    "asinh": sp.asinh,
    "acosh": sp.acosh,
    "atanh": sp.atanh,
    "floor": lambda x: _numbers_only("floor", sp.floor, x),
    "ceil": lambda x: _numbers_only("ceil", sp.ceiling, x),
}
_BINARY: dict[str, Callable] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "max": _max,
    "min": _min,
    "gt": sp.Gt,
    "ge": sp.Ge,
    "lt": sp.Lt,
    "le": sp.Le,
    "eq": lambda a, b: sp.Eq(a, b),
    "ne": lambda a, b: sp.Ne(a, b),
    "and": lambda a, b: sp.And(a, b),
    "or": lambda a, b: sp.Or(a, b),
    "atan2": sp.atan2,
    "rem": lambda a, b: _numbers_only("rem", _rem, a, b),
    "nextafter": lambda a, b: _unsupported(
        "JAX primitive 'nextafter' has no symbolic translation"
    ),
}
#: custom_jvp functions replaced by their closed form (value and derivative exact).
_CLOSED_FORMS: dict[str, Callable] = {
    "logaddexp": lambda a, b: sp.log(sp.exp(a) + sp.exp(b)),
    "relu": lambda x: sp.Piecewise((x, x > 0), (0, True)),  # relu'(0) = 0, as in JAX
}


def _to_float(x, dtype: np.dtype):
    """A cast to ``dtype``: exact for booleans and integers; a float cast to fewer
    than 64 bits rounds (a step function) and has no translation."""
    if not jnp.issubdtype(dtype, jnp.floating):
        return x
    out = _ew(_to_bool_num, x)
    if _jaxpr.rounds(dtype) and not all(
        isinstance(v, sp.Integer) for v in np.asarray(out, dtype=object).ravel()
    ):
        raise UnsupportedOperation(
            f"JAX primitive 'convert_element_type' to {dtype.name} rounds a float64 "
            "value (a step function, never the identity)"
        )
    return out


def _box(r) -> np.ndarray:
    if isinstance(r, np.ndarray):
        return r
    a = np.empty((), dtype=object)
    a[()] = r
    return a


def _ew(fn, *xs):
    return _box(np.frompyfunc(fn, len(xs), 1)(*xs))


def _reduce(fn, x, axes):
    x = np.asarray(x, dtype=object)
    out = np.empty(
        tuple(s for i, s in enumerate(x.shape) if i not in axes), dtype=object
    )
    moved = np.moveaxis(x, list(axes), list(range(len(axes))))
    moved = moved.reshape((-1,) + out.shape)
    for idx in np.ndindex(out.shape):
        out[idx] = fn([moved[(j,) + idx] for j in range(moved.shape[0])])
    return out


def _reduce_max(vals):
    vals = [v for v in vals if v != -sp.oo]
    return sp.Max(*vals) if vals else -sp.oo


def _gather(operand, indices, dn, slice_sizes):
    if operand.ndim != 1 or tuple(dn.offset_dims) != ():
        raise UnsupportedOperation("gather other than 1-D element indexing")
    idx = np.asarray(indices, dtype=object)
    out = np.empty(idx.shape[:-1], dtype=object)
    for pos in np.ndindex(out.shape):
        i = idx[pos + (0,)]
        if not isinstance(i, sp.Integer):
            raise UnsupportedOperation("gather with a symbolic index")
        out[pos] = operand[int(i)]
    return out


def _scatter(name, operand, indices, updates, dn):
    if operand.ndim != 1 or tuple(dn.update_window_dims) != ():
        raise UnsupportedOperation(f"{name} other than 1-D element updates")
    out = operand.copy()
    idx = np.asarray(indices, dtype=object).reshape(-1)
    upd = np.broadcast_to(np.asarray(updates, dtype=object), idx.shape)
    for i, u in zip(idx, upd):
        if not isinstance(i, sp.Integer):
            raise UnsupportedOperation(f"{name} with a symbolic index")
        j = int(i)
        if not 0 <= j < out.shape[0]:
            continue  # FILL_OR_DROP: out-of-range updates are dropped
        if name == "scatter":
            out[j] = u
        elif name == "scatter-add" or name == "scatter_add":
            out[j] = out[j] + u
        elif name == "scatter-mul" or name == "scatter_mul":
            out[j] = out[j] * u
        else:
            raise UnsupportedOperation(
                f"JAX primitive {name!r} has no symbolic translation"
            )
    return out


def _to_int(v):
    """An integer cast (JAX truncates toward zero) of a constant; a value that
    depends on the logits has no translation."""
    if isinstance(v, sp.logic.boolalg.Boolean) and not isinstance(v, sp.Expr):
        return _to_bool_num(v)  # a comparison (a Symbol is a Boolean too)
    if isinstance(v, sp.Integer):
        return v
    if isinstance(v, sp.Basic) and v.is_number and v.is_real:
        return sp.Integer(int(v))
    raise UnsupportedOperation(
        "JAX primitive 'convert_element_type' (an integer cast of a value that "
        "depends on the logits) has no symbolic translation"
    )


def _rule(eqn, ins):
    name = eqn.primitive.name
    if name == "custom_jvp_call" and _custom_name(eqn.params) in _CLOSED_FORMS:
        return [_box(_ew(_CLOSED_FORMS[_custom_name(eqn.params)], *ins))]
    if name in _jaxpr.CALL_JAXPR:
        try:
            return _inline(eqn, ins)
        except UnsupportedOperation as err:
            raise _located(err, eqn) from err
    if name in _CONTROL:
        try:
            return _CONTROL[name](eqn, ins)
        except UnsupportedOperation as err:
            raise _located(err, eqn) from err
    try:
        out = _apply(name, ins, eqn.params)
    except UnsupportedOperation as err:
        raise _located(err, eqn) from err
    except IndexError:
        raise
    except Exception as err:  # SymPy refused a value: name the primitive
        raise _located(
            UnsupportedOperation(
                f"JAX primitive {name!r}: its symbolic translation failed on these "
                f"values ({type(err).__name__})"
            ),
            eqn,
        ) from err
    return [_box(v) for v in out] if eqn.primitive.multiple_results else _box(out)


def _literal(x):
    """A literal of the program; NaN (the value ``logsumexp(b=...)`` selects for a
    negative sum, and ``logaddexp`` for NaN inputs) is kept as ``nan``, to be selected
    away or to fail where it is used."""
    if np.ndim(x) == 0 and isinstance(np.asarray(x).item(), float):
        if math.isnan(np.asarray(x).item()):
            return _box(sp.nan)
    return _arr(x)


def _located(err: UnsupportedOperation, eqn) -> UnsupportedOperation:
    """``err`` with the user's ``file.py:LINE`` of the equation appended (once)."""
    if getattr(err, "located", False):
        return err
    where = _jaxpr.where(eqn)
    out = UnsupportedOperation(
        str(err) if where == "an unknown line" else f"{err} (at {where})"
    )
    out.located = where != "an unknown line"
    return out


def _eval_jaxpr(jaxpr, consts, args, bind=None):
    return _jaxpr.interpret(jaxpr, consts, args, _rule, literal=_literal, bind=bind)


def _inline(eqn, ins):
    found = _jaxpr.sub_jaxpr(eqn)
    if found is None:
        raise UnsupportedOperation(f"call without a jaxpr ({sorted(eqn.params)})")
    jaxpr, consts = found
    return _eval_jaxpr(jaxpr, [_arr(c) for c in consts], ins)


def _numbers_only(name, fn, *xs):
    """``fn`` of numbers (exact); of a value of the logits it is a jump, which the
    symbolic stages (derivatives) must not see as smooth: refused, naming it."""
    if any(isinstance(x, sp.Basic) and x.free_symbols for x in xs):
        raise UnsupportedOperation(
            f"JAX primitive {name!r} of a value of the logits (a jump or kink) has "
            "no symbolic translation"
        )
    return fn(*xs)


def _trunc(x):
    return sp.sign(x) * sp.floor(sp.Abs(x))


def _rem(a, b):
    """C ``fmod``: a - b trunc(a / b) (the sign of ``a``), as ``lax.rem``."""
    return a - b * _trunc(a / b)


def _round(x, method):
    """``lax.round``: method 0 rounds halves away from zero, 1 to even."""
    f = sp.floor(x)
    frac = x - f
    if frac > sp.Rational(1, 2):
        return f + 1
    if frac < sp.Rational(1, 2):
        return f
    if int(method) == 0:
        return f + 1 if x > 0 else f
    return f if f % 2 == 0 else f + 1


def _key(x):
    return sp.N(x, 40)


def _sort(eqn, ins):
    if any(isinstance(v, sp.Basic) and v.free_symbols for a in ins for v in a.flat):
        raise UnsupportedOperation(
            "JAX primitive 'sort' of values of the logits has no symbolic translation"
        )
    keys = np.asarray(ins[0], dtype=object)
    if keys.ndim != 1:
        raise UnsupportedOperation("JAX primitive 'sort' other than of a 1-D array")
    order = sorted(range(keys.shape[0]), key=lambda i: _key(keys[i]))
    return [_box(np.asarray(a, dtype=object)[order]) for a in ins]


def _argmax(eqn, ins, sign):
    (x,) = ins
    x = np.asarray(x, dtype=object)
    if any(isinstance(v, sp.Basic) and v.free_symbols for v in x.flat):
        raise UnsupportedOperation(
            f"JAX primitive {eqn.primitive.name!r} of values of the logits has no "
            "symbolic translation"
        )
    if x.ndim != 1:
        raise UnsupportedOperation(
            f"JAX primitive {eqn.primitive.name!r} of a 2-D array"
        )
    vals = [sign * _key(v) for v in x]
    return _box(sp.Integer(vals.index(max(vals))))


def _index_of(value, n):
    if not isinstance(value, sp.Integer):
        raise UnsupportedOperation(
            "lax.cond/lax.switch on a value of the logits has no symbolic translation"
        )
    return min(max(int(value), 0), n - 1)


def _lax_cond(eqn, ins):
    branches = eqn.params["branches"]
    i = _index_of(np.asarray(ins[0], dtype=object).item(), len(branches))
    br = branches[i]
    return _eval_jaxpr(br.jaxpr, [_arr(c) for c in br.consts], ins[1:])


#: the most iterations a scan or while loop is unrolled for.
MAX_LOOP = 10_000


def _scan(eqn, ins):
    p = eqn.params
    nc, ncarry, length = p["num_consts"], p["num_carry"], p["length"]
    if length > MAX_LOOP:
        raise UnsupportedOperation(f"scan of {length} steps (at most {MAX_LOOP})")
    body = p["jaxpr"]
    consts, carry, xs = ins[:nc], list(ins[nc : nc + ncarry]), ins[nc + ncarry :]
    ys = []
    order = range(length - 1, -1, -1) if p.get("reverse") else range(length)
    for i in order:
        out = _eval_jaxpr(
            body.jaxpr,
            [_arr(c) for c in body.consts],
            list(consts) + carry + [_box(np.asarray(x, dtype=object)[i]) for x in xs],
        )
        carry, y = list(out[:ncarry]), out[ncarry:]
        ys.append(y)
    if p.get("reverse"):
        ys = ys[::-1]
    stacked = [
        _box(np.stack([np.asarray(y[j], dtype=object) for y in ys]))
        for j in range(len(eqn.outvars) - ncarry)
    ]
    return carry + stacked


def _while(eqn, ins):
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, carry = ins[:cn], ins[cn : cn + bn], list(ins[cn + bn :])
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
    for _ in range(MAX_LOOP):
        (go,) = _eval_jaxpr(cj.jaxpr, [_arr(c) for c in cj.consts], cconsts + carry)
        go = np.asarray(go, dtype=object).item()
        if go not in (sp.true, sp.false, True, False):
            raise UnsupportedOperation(
                "a while loop whose condition depends on the logits has no symbolic "
                "translation"
            )
        if not bool(go):
            return carry
        carry = list(
            _eval_jaxpr(bj.jaxpr, [_arr(c) for c in bj.consts], bconsts + carry)
        )
    raise UnsupportedOperation(f"a while loop of more than {MAX_LOOP} steps")


_CONTROL = {
    "cond": _lax_cond,
    "scan": _scan,
    "while": _while,
    "sort": _sort,
    "argmax": lambda eqn, ins: _argmax(eqn, ins, 1),
    "argmin": lambda eqn, ins: _argmax(eqn, ins, -1),
    "round": lambda eqn, ins: _box(
        _ew(
            lambda x: _numbers_only(
                "round", lambda y: _round(y, eqn.params["rounding_method"]), x
            ),
            ins[0],
        )
    ),
}


def _clamped(shape, starts, sizes) -> tuple[slice, ...]:
    """The slices of ``lax.dynamic_slice``: each start clamped into
    ``[0, dim - size]``, as JAX defines it (never out of range)."""
    out = []
    for dim, s, n in zip(shape, starts, sizes):
        start = min(max(int(np.asarray(s).item()), 0), dim - n)
        out.append(slice(start, start + n))
    return tuple(out)


def _custom_name(params) -> str:
    info = getattr(params["call_jaxpr"].jaxpr, "debug_info", None)
    return getattr(info, "func_name", "") or ""


def _apply(name, ins, params):  # noqa: C901 - one dispatch table
    if name in _UNARY:
        return _ew(_UNARY[name], ins[0])
    if name in _BINARY:
        return _ew(_BINARY[name], *ins)
    if name == "integer_pow":
        return _ew(lambda x: x ** params["y"], ins[0])
    if name == "convert_element_type":
        x = ins[0]
        if np.dtype(params["new_dtype"]).kind in "iu":
            return _ew(_to_int, x)
        return _to_float(x, np.dtype(params["new_dtype"]))
    if name == "select_n":
        return _ew(_select, *ins)
    if name == "clamp":
        return _ew(lambda lo, x, hi: _min(_max(x, lo), hi), *ins)
    x = ins[0] if ins else None
    if name == "broadcast_in_dim":
        shape, dims = params["shape"], params["broadcast_dimensions"]
        expanded = x.reshape(
            [x.shape[dims.index(i)] if i in dims else 1 for i in range(len(shape))]
        )
        return np.broadcast_to(expanded, shape).copy()
    if name == "reshape":
        return x.reshape(params["new_sizes"])
    if name == "squeeze":
        return np.squeeze(x, axis=tuple(params["dimensions"]))
    if name == "expand_dims":
        return np.expand_dims(x, params["dimensions"])
    if name == "transpose":
        return np.transpose(x, params["permutation"])
    if name == "rev":
        return np.flip(x, axis=tuple(params["dimensions"]))
    if name == "slice":
        strides = params["strides"] or (1,) * x.ndim
        return x[
            tuple(
                slice(a, b, s)
                for a, b, s in zip(
                    params["start_indices"], params["limit_indices"], strides
                )
            )
        ]
    if name == "dynamic_slice":
        return x[_clamped(x.shape, ins[1:], params["slice_sizes"])]
    if name == "dynamic_update_slice":
        out = x.copy()
        out[_clamped(x.shape, ins[2:], ins[1].shape)] = ins[1]
        return out
    if name == "gather":
        return _gather(x, ins[1], params["dimension_numbers"], params["slice_sizes"])
    if name.startswith("scatter"):
        return _scatter(name, x, ins[1], ins[2], params["dimension_numbers"])
    if name == "concatenate":
        return np.concatenate(ins, axis=params["dimension"])
    if name == "iota":
        return _arr(
            np.arange(params["shape"][params["dimension"]]).reshape(
                [
                    -1 if i == params["dimension"] else 1
                    for i in range(len(params["shape"]))
                ]
            )
            * np.ones(params["shape"], dtype=int)
        )
    if name == "reduce_sum":
        return _reduce(lambda v: sp.Add(*v), x, params["axes"])
    if name == "reduce_prod":
        return _reduce(lambda v: sp.Mul(*v), x, params["axes"])
    if name == "reduce_max":
        return _reduce(_reduce_max, x, params["axes"])
    if name == "reduce_min":
        return _reduce(lambda v: -_reduce_max([-t for t in v]), x, params["axes"])
    if name == "dot_general":
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        if lb or rb:
            raise UnsupportedOperation("batched dot_general")
        return _box(np.tensordot(ins[0], ins[1], axes=(list(lc), list(rc))))
    raise UnsupportedOperation(f"JAX primitive {name!r} has no symbolic translation")


def _drop_max_shifts(expr: sp.Expr) -> sp.Expr:
    """Removes frozen max-shifts when the expression is exactly invariant to them."""
    for atom in sorted(expr.atoms(Frozen), key=sp.default_sort_key):
        if not isinstance(atom.args[0], sp.Max):
            continue
        m = sp.Dummy("m", real=True)
        trial = split_exp_log(expr.xreplace({atom: m}))
        if m not in trial.free_symbols:
            expr = trial
    return expr


def _piecewise_max(expr: sp.Expr) -> sp.Expr:
    """Rewrites ``Max``/``Min`` that are differentiated (outside ``Frozen``) as
    Piecewise."""
    frozen = {a: sp.Dummy("f") for a in expr.atoms(Frozen)}
    body = expr.xreplace(frozen)
    if body.has(sp.Max, sp.Min):
        body = body.rewrite(sp.Piecewise)
    return body.xreplace({v: k for k, v in frozen.items()})


def sympy_from_jax(
    loss: Callable,
    logits: Sequence[sp.Symbol],
    *,
    sampled: int,
    inputs: Mapping[str, Any] | None = None,
) -> sp.Expr:
    r"""Translates ``loss(logits, sampled, **inputs)`` into a SymPy expression in
    ``logits``.

    .. math::
        \texttt{loss}(z_0, \dots, z_{V-1}) \;\mapsto\; E(z_0, \dots, z_{V-1}) \in
        \text{SymPy}, \quad E \equiv \texttt{loss} \text{ (value and derivatives)}

    Args:
        loss: the JAX loss for one position (see ``theorycheck.losses._spec``).
        logits: ``V`` real SymPy symbols standing for the logits.
        sampled: the sampled token index ``k`` (static).
        inputs: per-position inputs and parameters. Python ``int``/``bool``/``str`` stay
            static; every other value is traced and then bound to its exact SymPy value
            (a float ``0.2`` becomes ``1/5``; pass SymPy values, e.g. ``sp.log(q)``,
            to keep constants symbolic-exact).

    Returns:
        A scalar SymPy expression (``Frozen`` marks detached subexpressions).

    Raises:
        UnsupportedOperation: naming the first primitive the table does not cover, or
            when the loss does not return a scalar.
    """
    closed, args = _trace(loss, logits, sampled, inputs)
    (out,) = _eval_jaxpr(closed.jaxpr, [_arr(c) for c in closed.consts], args)
    return _finish(out)


def _finish(out) -> sp.Expr:
    expr = sp.sympify(out[()])
    return _piecewise_max(_drop_max_shifts(expr))


def _trace(loss, logits, sampled, inputs):
    """The closed jaxpr of the loss at ``V = len(logits)`` and its SymPy arguments."""
    inputs = dict(inputs or {})
    static = {k: v for k, v in inputs.items() if isinstance(v, (int, bool, str))}
    traced = {k: v for k, v in inputs.items() if k not in static}
    names = sorted(traced)
    vocab = len(logits)

    def _numeric(v):
        if isinstance(v, sp.Basic):
            return float(v)
        if isinstance(v, np.ndarray) and v.dtype == object:
            return np.asarray([float(t) for t in v.reshape(-1)]).reshape(v.shape)
        return np.asarray(v, dtype=np.float64)

    def fn(z, *vals):
        return loss(z, sampled, **static, **dict(zip(names, vals)))

    with jax.enable_x64(True):
        closed = jax.make_jaxpr(fn)(
            jnp.zeros(vocab, jnp.float64),
            *[jnp.asarray(_numeric(traced[n]), jnp.float64) for n in names],
        )
    if closed.out_avals[0].shape != ():
        raise UnsupportedOperation(
            f"the loss returns shape {closed.out_avals[0].shape}, not a scalar"
        )
    args = [np.asarray(list(logits), dtype=object)]
    args += [
        _arr(traced[n])
        if not isinstance(traced[n], np.ndarray) or traced[n].dtype != object
        else traced[n]
        for n in names
    ]
    return closed, args


@dataclasses.dataclass(frozen=True)
class AffineMap:
    r"""An invertible affine map of the logits, :math:`z' = lpha \odot z + eta`
        (every :math:`lpha_i
    e 0`), exact SymPy numbers."""

    alpha: tuple[sp.Expr, ...]
    beta: tuple[sp.Expr, ...]

    def to_logits(self, inner_logits, inner_direction):
        r"""Maps a point and direction of :math:`\tilde L` back to ``L``:
        :math:`z = (z' - \beta)/\alpha`, :math:`u = u'/\alpha` (same sign of
        curvature: :math:`u^\top \nabla^2 L\, u = u'^\top \nabla^2 \tilde L\, u'`).
        """
        a = np.asarray([float(x) for x in self.alpha])
        b = np.asarray([float(x) for x in self.beta])
        return (np.asarray(inner_logits) - b) / a, np.asarray(inner_direction) / a

    def text(self) -> str:
        """``z' = 10/7*z``, ``z' = z + beta``, ``z' = alpha*z + beta``."""
        a, b = set(self.alpha), set(self.beta)
        scale = (sp.sstr(next(iter(a))) + "*") if len(a) == 1 else "alpha*"
        scale = "" if a == {1} else scale
        shift = (
            ""
            if b == {0}
            else (" + " + sp.sstr(next(iter(b))) if len(b) == 1 else " + beta")
        )
        return f"z' = {scale}z{shift}"


def affine_sympy_from_jax(
    loss: Callable,
    logits: Sequence[sp.Symbol],
    *,
    sampled: int,
    inputs: Mapping[str, Any] | None = None,
) -> tuple[sp.Expr, AffineMap | None]:
    r"""Like :func:`sympy_from_jax`, with an affine map of the logits taken out.

        When every use of the logits goes through :math:`z' = lpha \odot z + eta`
        (:func:`theorycheck._jaxpr.affine_prefix`; e.g. a temperature ``z / T``) with
        exact constants :math:`lpha_i
    e 0`, the result is :math:`	ilde L` written in
        ``logits`` standing for :math:`z'`, with the map; otherwise ``(L, None)``. Since
        :math:`
    abla^2 L = D_lpha
    abla^2	ilde L\, D_lpha` and the map is onto,
        :math:`L` is convex iff :math:`	ilde L` is.

        Examples:
            >>> import jax
            >>> z = sp.symbols("z0:2", real=True)
            >>> f = lambda x, k: -jax.nn.log_softmax(x / 0.7)[k]
            >>> expr, amap = affine_sympy_from_jax(f, z, sampled=0)
            >>> expr, amap.alpha
            (-z0 + log(exp(z0) + exp(z1)), (10/7, 10/7))
    """
    closed, args = _trace(loss, logits, sampled, inputs)
    consts = [_arr(c) for c in closed.consts]
    y = _jaxpr.affine_prefix(closed.jaxpr)
    if y is None:
        return _finish(_eval_jaxpr(closed.jaxpr, consts, args)[0]), None
    marks = [sp.Dummy(f"d{i}", real=True) for i in range(len(logits))]
    captured = {}

    def bind(var, value):
        if var is y:
            captured["y"] = value
            return np.asarray(list(logits), dtype=object)
        return value

    args = [np.asarray(marks, dtype=object), *args[1:]]
    (out,) = _eval_jaxpr(closed.jaxpr, consts, args, bind=bind)
    alpha, beta = [], []
    for mark, yi in zip(marks, captured["y"].reshape(-1)):
        yi = sp.expand(yi)
        a = sp.diff(yi, mark)
        b = sp.expand(yi - a * mark)
        if a.free_symbols or b.free_symbols or not a.is_number or a == 0:
            return sympy_from_jax(loss, logits, sampled=sampled, inputs=inputs), None
        alpha.append(a)
        beta.append(b)
    expr = _finish(out)
    if expr.free_symbols & set(marks):
        return sympy_from_jax(loss, logits, sampled=sampled, inputs=inputs), None
    if all(a == 1 for a in alpha) and all(b == 0 for b in beta):
        return expr, None
    return expr, AffineMap(tuple(alpha), tuple(beta))
