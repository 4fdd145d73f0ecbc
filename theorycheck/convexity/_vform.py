r"""The derivation in V: the loss as one SymPy formula in which V is a symbol.

The structure and composition stages decide a loss at a few V (3 and 4, small V for
z3). A claim for *every* V needs an argument that covers every V; this module gives
it for the programs it can follow and says "not covered" for the others.

**The form.** The loss is traced once with a symbolic vocabulary size (``jax.export``
shape polymorphism) and the sampled token ``k = 0``. Every length-V array is kept as
two SymPy expressions, its value at the sampled token and at a generic other token
``i`` (a function of :math:`z_i`), so a token-axis sum is

.. math::
    \sum_j a_j = a_k + \sum_{i \ne k} a_i, \qquad
    \sum_{i\ne k} \bigl(c + d\,z_i + b\,e^{z_i}\bigr) = (V-1)c + d\,T + b\,e^{w},

with :math:`T = \sum_{i\ne k} z_i` and :math:`w = \log\sum_{i\ne k} e^{z_i}`
(any other dependence on :math:`z_i` inside a sum is not covered). The loss becomes
:math:`L = F(x, w, T; V)` with :math:`x = z_k`: a sum over the tokens of a constant
carries its factor V, so ``0.01 * jnp.sum(log_softmax(z))`` reads
:math:`0.01\,(x + T - V\,\mathrm{lse})`.

**The theorem.** With :math:`F` linear in :math:`T` (:math:`F_{TT} = F_{xT} =
F_{wT} = 0`) and :math:`q` the softmax of the other logits,
:math:`\nabla^2 L = F_w(\operatorname{diag} q - qq^\top) + J^\top \nabla^2_{(x,w)}F\,J`
(rows :math:`J`: :math:`e_k` and :math:`q`). Splitting a direction ``u`` into
:math:`a = u_k`, :math:`b = q\cdot u` and the variance
:math:`\sigma^2 = \sum q_i u_i^2 - b^2 \ge 0` (free when at least two other tokens
exist, zero for V = 2):

.. math::
    u^\top \nabla^2 L\,u = F_w\,\sigma^2 + (a, b)\,\nabla^2_{(x,w)}F\,(a, b)^\top,

so for every V ≥ 3, :math:`L` is convex iff :math:`F_w \ge 0` and
:math:`\nabla^2_{(x,w)} F \succeq 0` everywhere; for V = 2 iff the second holds. When
:math:`F` does not contain V (after a positive factor :math:`c(V)` is taken out), these
conditions are the same for every V: convex at one V ≥ 3 implies convex at every
V ≥ 2, and a counterexample at one V ≥ 3 implies one at every V ≥ 3. That is the
argument behind a scope ``all V >= 2`` (or ``all V >= 3`` for a refutation).

When :math:`F` contains V, :math:`F_w` is a function of V: where its V-factor is a
polynomial in V (the rest positive), the V at which :math:`F_w < 0` are found exactly
and the loss is refuted there by the variance direction
(:math:`u = e_i - e_j`, two other tokens, at any point).

**What blocks it.** Python that reads V's value during the trace (``==``, ``in``,
``%``, ``//``, comparisons, ``hash``, ``int``, ``bool``: dictionary keys, ``try``
around ``int(V)``), recorded from the user's own frames; a primitive this module
does not follow (rounding and low-precision casts among them); a per-token input
array; a token index other than the sampled one; a frozen value that does not cancel.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import sympy as sp

from theorycheck import _jaxpr
from theorycheck.symbolic import Frozen

__all__ = ["VForm", "derive_in_v", "v_threshold"]

V = sp.Symbol("V", integer=True, positive=True)
X = sp.Symbol("x", real=True)
W = sp.Symbol("w", real=True)
T = sp.Symbol("T", real=True)
ZI = sp.Symbol("z_i", real=True)
IDX = sp.Symbol("i", integer=True, positive=True)  # another token's index (k = 0)
M = sp.Symbol("m", real=True)  # a token-axis maximum (only inside a frozen shift)

#: The largest SymPy expression followed (operations); beyond it: not covered.
MAX_OPS = 4000


class NotCovered(Exception):
    """The derivation in V cannot follow the program here."""


class Sep(sp.Function):
    r""":math:`\sum_{i \ne k} h(z_i)` for the function ``h`` (a ``Lambda`` of
    :math:`z_i`): a separable sum over the other tokens."""

    nargs = 1


@dataclasses.dataclass(frozen=True)
class Tok:
    """A length-V array: its value at the sampled token and at a generic other one."""

    k: Any
    g: Any


@dataclasses.dataclass(frozen=True)
class VForm:
    """What the derivation in V found.

    Attributes:
        covered: the whole program was followed (``form`` is the loss).
        why: why not (or what depends on V), for the record.
        form: :math:`F(x, w, T; V)` with any positive factor :math:`c(V)` taken out.
        v_free: ``form`` does not contain V: the conditions are the same at every V.
    """

    covered: bool
    why: str = ""
    form: Any = None
    v_free: bool = False


# -- Python reads of V -------------------------------------------------------------

_READS = (
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
    "__mod__", "__rmod__", "__floordiv__", "__rfloordiv__", "__divmod__",
    "__int__", "__index__", "__bool__", "__float__",
)  # fmt: skip


def _library_dirs() -> tuple[str, ...]:
    import jax
    import jaxlib

    roots = [os.path.dirname(m.__file__) for m in (jax, jaxlib, np, os)]
    roots.append(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.abspath(r) + os.sep for r in roots)


class _Watch:
    """Records the user's Python reading the symbolic V (the caller's frame is
    outside JAX, NumPy, the standard library and this package's checker)."""

    def __init__(self, cls):
        self.cls, self.saved, self.reads = cls, {}, []
        self.libs = _library_dirs()

    def _wrap(self, name, original):
        watch = self

        def method(*args, **kwargs):
            caller = sys._getframe(1)
            path = os.path.abspath(caller.f_code.co_filename)
            if not path.startswith(watch.libs) and not path.startswith("<frozen"):
                watch.reads.append(
                    f"{name.strip('_')} at {os.path.basename(path)}:{caller.f_lineno}"
                )
            return original(*args, **kwargs)

        return method

    def __enter__(self):
        for name in _READS:
            original = getattr(self.cls, name, None)
            if original is not None:
                self.saved[name] = self.cls.__dict__.get(name)
                setattr(self.cls, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            if original is None:
                delattr(self.cls, name)
            else:
                setattr(self.cls, name, original)


def _trace(loss: Callable, scalars: Mapping[str, Any], arrays: Mapping[str, Tok]):
    """The loss's jaxpr with a symbolic V and ``k = 0`` (its invars: the logits, then
    the per-token inputs in sorted order); not covered where the Python reads V."""
    import jax
    import jax.numpy as jnp

    (sym,) = jax.export.symbolic_shape("V", constraints=("V >= 2",))
    z = jax.ShapeDtypeStruct((sym,), jnp.float64)
    specs = {name: z for name in arrays}
    with _Watch(type(sym)) as watch, jax.enable_x64(True):
        try:
            closed = jax.make_jaxpr(lambda z, a: loss(z, 0, **scalars, **a))(z, specs)
        except Exception as err:  # the user's Python on V (or it cannot say)
            raise NotCovered(
                f"the loss does not trace with a symbolic V ({type(err).__name__})"
            ) from err
    if watch.reads:
        raise NotCovered(f"the loss's Python reads V ({', '.join(watch.reads[:3])})")
    return closed


# -- the interpreter ---------------------------------------------------------------


def _kind(aval) -> str:
    shape = getattr(aval, "shape", ())
    if all(isinstance(d, int) and d == 1 for d in shape):
        return "scalar"
    if len(shape) == 1 and str(shape[0]) == "V":
        return "tok"
    raise NotCovered(f"an array of shape {tuple(map(str, shape))}")


def _lift(fn, *ins):
    if not any(isinstance(a, Tok) for a in ins):
        return fn(*ins)
    ks = [a.k if isinstance(a, Tok) else a for a in ins]
    gs = [a.g if isinstance(a, Tok) else a for a in ins]
    return Tok(fn(*ks), fn(*gs))


def _sum_others(g) -> sp.Expr:
    r""":math:`\sum_{i \ne k} g(z_i)` for ``g`` a sum of constants, multiples of
    :math:`z_i` and multiples of :math:`e^{z_i}`."""
    if IDX in getattr(g, "free_symbols", ()):
        raise NotCovered("a token-axis sum of a value that depends on the token index")
    g = sp.expand(sp.sympify(g))
    if sp.count_ops(g) > MAX_OPS:
        raise NotCovered("the expression grew too large")
    out = sp.S.Zero
    for term in sp.Add.make_args(g):
        coeff, dep = term.as_independent(ZI, as_Add=False)
        if dep == 1:
            out += (V - 1) * coeff
        elif dep == ZI:
            out += coeff * T
        elif _scale(dep) is not None:
            out += coeff * sp.exp(W)
        elif dep.free_symbols <= {ZI}:
            out += coeff * Sep(sp.Lambda(ZI, dep))
        else:
            raise NotCovered(f"a token-axis sum of {dep} (not 1, z_i or exp(z_i))")
    return out


#: The scales a of the exponentials exp(a z_i) summed over the tokens, in the
#: derivation now running (one scale is allowed: w = log sum exp(a z_i) is then
#: the log-sum-exp of the scaled logits a z, an invertible map of the logits).
_SCALES: set = set()


def _scale(dep):
    """``a`` when ``dep`` is :math:`e^{a z_i}` with a nonzero constant ``a``."""
    if not isinstance(dep, sp.exp):
        return None
    a = sp.simplify(dep.args[0] / ZI)
    if a.free_symbols or a == 0:
        return None
    _SCALES.add(a)
    if len(_SCALES) > 1:
        raise NotCovered(f"token-axis sums of exp(a z_i) at several scales {_SCALES}")
    return a


def _index_of(x) -> int:
    value = sp.sympify(x)
    if value != 0:
        raise NotCovered(f"a token index {value} other than the sampled token")
    return 0


def _reduce(name, x, params):
    if not isinstance(x, Tok):
        return x
    if tuple(params.get("axes", ())) != (0,):
        raise NotCovered(f"{name} over axes {params.get('axes')}")
    if name == "reduce_sum":
        return sp.factor_terms(sp.expand_power_exp(x.k) + _sum_others(x.g))
    return M  # a maximum: followed only where it cancels (a frozen shift)


def _pick(x, start):
    _index_of(start)
    return x.k if isinstance(x, Tok) else x


def _gather(eqn, ins):
    x, idx = ins[0], ins[1]
    if eqn.params["slice_sizes"] != (1,):
        raise NotCovered("a gather of more than one token")
    values = np.asarray(idx, dtype=object).ravel() if not isinstance(idx, Tok) else None
    if values is None or len(values) != 1:
        raise NotCovered("a gather with several indices")
    return _pick(x, values[0])


def _slice(eqn, ins):
    start, limit = eqn.params["start_indices"], eqn.params["limit_indices"]
    if limit != (1,) and _kind(eqn.outvars[0].aval) != "tok":
        raise NotCovered(f"a slice {start}:{limit}")
    return _pick(ins[0], start[0]) if limit == (1,) else ins[0]


def _broadcast(eqn, ins):
    x = ins[0]
    if _kind(eqn.outvars[0].aval) == "tok" and not isinstance(x, Tok):
        return Tok(x, x)
    return x


def _same(eqn, ins):
    _kind(eqn.outvars[0].aval)
    return ins[0]


def _convert(eqn, ins):
    dtype = np.dtype(eqn.params["new_dtype"])
    if _jaxpr.rounds(dtype):
        raise NotCovered(f"a cast to {dtype.name} (a rounding step)")
    if dtype.kind == "b":
        return ins[0]
    out = _lift(_bool_num, ins[0])
    parts = (out.k, out.g) if isinstance(out, Tok) else (out,)
    if dtype.kind in "iu" and not all(sp.sympify(p).is_integer for p in parts):
        raise NotCovered("an integer cast of a value that is not an integer")
    return out


def _bool_num(x):
    if isinstance(x, sp.logic.boolalg.BooleanAtom):
        return sp.Integer(int(bool(x)))
    if isinstance(x, sp.logic.boolalg.Boolean) and not isinstance(x, sp.Expr):
        return sp.Piecewise((1, x), (0, True))
    return x


def _select(*ins):
    pred, cases = ins[0], ins[1:]
    if len(cases) != 2:
        raise NotCovered("select_n with more than two cases")
    if pred in (sp.true, sp.false, True, False):
        return cases[int(bool(pred))]
    return sp.Piecewise((cases[1], pred), (cases[0], True))


def _scatter(eqn, ins):
    """``x.at[k].set(u)`` / ``.add(u)`` with a scalar ``u`` at the sampled token."""
    x, idx, upd = ins
    values = np.asarray(idx, dtype=object).ravel() if not isinstance(idx, Tok) else ()
    if len(values) != 1 or isinstance(upd, Tok) or not isinstance(x, Tok):
        raise NotCovered("a scatter other than one value at the sampled token")
    _index_of(values[0])
    name = eqn.primitive.name.replace("-", "_")
    if name == "scatter":
        return Tok(upd, x.g)
    if name == "scatter_add":
        return Tok(x.k + upd, x.g)
    raise NotCovered(f"the JAX primitive {eqn.primitive.name!r}")


def _dot(eqn, ins):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    a, b = ins
    if lb or rb or not (isinstance(a, Tok) and isinstance(b, Tok)):
        raise NotCovered("a dot_general other than a token-axis inner product")
    return _reduce("reduce_sum", Tok(a.k * b.k, a.g * b.g), {"axes": (0,)})


def _iota(eqn, ins):
    if _kind(eqn.outvars[0].aval) != "tok":
        raise NotCovered("an iota not along the token axis")
    return Tok(sp.S.Zero, IDX)


def _dim(eqn, ins):
    if str(eqn.params["dim"]) != "V":
        raise NotCovered(f"a dimension {eqn.params['dim']}")
    return V


def _elementwise(table):
    def rule(eqn, ins):
        return _lift(table[eqn.primitive.name], *ins)

    return rule


def _rules() -> dict[str, Callable]:
    from theorycheck import bridge

    rules: dict[str, Callable] = {}
    unary = {n: f for n, f in bridge._UNARY.items() if n not in _REFUSED}
    unary["stop_gradient"] = _frozen
    unary["log"] = _log
    unary["is_finite"] = _is_finite
    for table in (unary, bridge._BINARY):
        rules.update(dict.fromkeys(table, _elementwise(table)))
    rules["integer_pow"] = lambda eqn, ins: _lift(lambda x: x ** eqn.params["y"], *ins)
    rules["select_n"] = lambda eqn, ins: _lift(_select, *ins)
    rules["convert_element_type"] = _convert
    rules.update(dict.fromkeys(("reshape", "squeeze", "expand_dims"), _same))
    rules["broadcast_in_dim"] = _broadcast
    rules.update(
        {
            n: (lambda e, i: _reduce(e.primitive.name, i[0], e.params))
            for n in ("reduce_sum", "reduce_max")
        }
    )
    rules["dynamic_slice"] = lambda eqn, ins: _pick(ins[0], ins[1])
    rules["gather"] = _gather
    rules["slice"] = _slice
    rules["dot_general"] = _dot
    rules.update(dict.fromkeys(("scatter", "scatter-add", "scatter_add"), _scatter))
    rules["iota"] = _iota
    rules["dim_as_value"] = _dim
    return rules


#: Not followed: the value is rounded (or not a real function).
_REFUSED = ("reduce_precision", "floor", "ceil", "round", "nextafter")


def _log(a):
    r""":math:`\log a`, with the exponential factors of ``a`` taken out exactly
    (:math:`\log(e^u r) = u + \log r` for real ``u``): the frozen shift of
    ``log_softmax`` then cancels by itself."""
    if isinstance(a, sp.exp):
        return a.args[0]
    if isinstance(a, sp.Mul):
        shift = sum((f.args[0] for f in a.args if isinstance(f, sp.exp)), sp.S.Zero)
        rest = sp.Mul(*(f for f in a.args if not isinstance(f, sp.exp)))
        return shift + sp.log(rest)
    return sp.log(a)


def _is_finite(x):
    """A real expression of finite logits is finite unless it holds an infinity."""
    if isinstance(x, sp.Basic) and not x.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
        return sp.true
    raise NotCovered(f"is_finite of {x}")


def _frozen(x):
    """``stop_gradient``: a value of the maximum alone stays the symbol (it must
    cancel anyway, see :func:`_without_shift`); any other value is ``Frozen``."""
    if isinstance(x, sp.Basic) and x.free_symbols <= {M}:
        return x
    return Frozen(x)


def _literal(value):
    from theorycheck.bridge import to_sympy_number

    if np.ndim(value) != 0:
        raise NotCovered("an array literal")
    return to_sympy_number(np.asarray(value).item())


class _Interpreter:
    def __init__(self):
        self.rules = _rules()

    def run(self, jaxpr, consts, args):
        return _jaxpr.interpret(jaxpr, consts, args, self.one, literal=_literal)

    def one(self, eqn, ins):
        name = eqn.primitive.name
        if name in _jaxpr.CALL_JAXPR:
            found = _jaxpr.sub_jaxpr(eqn)
            if found is None:
                raise NotCovered(f"a {name} without a body")
            jaxpr, consts = found
            outs = self.run(jaxpr, [_literal(c) for c in consts], ins)
            return outs if eqn.primitive.multiple_results else outs[0]
        rule = self.rules.get(name)
        if rule is None:
            raise NotCovered(f"the JAX primitive {name!r}")
        for out in eqn.outvars:
            _kind(out.aval)
        return rule(eqn, ins)


# -- the form ----------------------------------------------------------------------


def _without_shift(expr: sp.Expr) -> sp.Expr:
    """``expr``, which must not keep a token-axis maximum (the frozen shift of
    ``log_softmax`` cancels in :func:`_log`); not covered where one is left."""
    if M in expr.free_symbols:
        raise NotCovered("a token-axis maximum that does not cancel")
    return expr


def _positive_factor(form: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """``(c(V), F)`` with ``form = c(V) F`` and ``c(V) > 0`` for every V >= 2."""
    n = sp.Symbol("n", integer=True, nonnegative=True)
    deps = (X, W, T, *form.atoms(Sep))
    c, rest = sp.factor_terms(form).as_independent(*deps, as_Add=False)
    if (
        c.free_symbols <= {V}
        and not c.atoms(sp.Piecewise)
        and c.subs(V, n + 2).is_positive
    ):
        return c, rest
    return sp.S.One, form


def inputs_in_v(numeric: Mapping[str, Any], record: Mapping[str, Any]):
    r"""The scalar inputs, and the per-token inputs as :class:`Tok` with their
    V-dependence explicit: ``behavior_logp`` is :math:`\log q` at the sampled token
    and :math:`\log((1-q)/(V-1))` elsewhere, ``old_logits`` zeros
    (:func:`theorycheck.convexity._resolve.build_inputs`)."""
    from theorycheck.convexity._resolve import _exact

    scalars, arrays = {}, {}
    for name, value in numeric.items():
        if np.ndim(value) == 0:
            scalars[name] = value
        elif name == "behavior_logp":
            q = _exact(float(record["q"]))
            arrays[name] = Tok(sp.log(q), sp.log((1 - q) / (V - 1)))
        elif name == "old_logits":
            arrays[name] = Tok(sp.S.Zero, sp.S.Zero)
        else:
            raise NotCovered(f"the per-token input {name!r}")
    return scalars, arrays


def derive_in_v(
    loss: Callable, numeric: Mapping[str, Any], record: Mapping[str, Any]
) -> VForm:
    """The derivation in V of ``loss(logits, 0, **inputs)`` (module doc).

    Args:
        loss: a JAX loss ``loss(logits, sampled, **inputs)``.
        numeric: its numeric inputs at some V (``build_inputs(...).numeric``).
        record: the values used (``build_inputs(...).params``: ``q``).
    """
    try:
        form = _form(loss, numeric, record)
    except NotCovered as err:
        return VForm(False, str(err))
    except Exception as err:  # noqa: BLE001 - SymPy on the user's program
        return VForm(False, f"the derivation failed ({type(err).__name__})")
    v_free = V not in form.free_symbols
    why = "" if v_free else f"the loss's form depends on V: {form}"
    return VForm(True, why, form, v_free)


def _form(loss, numeric, record) -> sp.Expr:
    _SCALES.clear()
    scalars, arrays = inputs_in_v(numeric, record)
    closed = _trace(loss, scalars, arrays)
    args = [Tok(X, ZI)] + [arrays[n] for n in sorted(arrays)]
    (out,) = _Interpreter().run(
        closed.jaxpr, [_literal(c) for c in closed.consts], args
    )
    if isinstance(out, Tok):
        raise NotCovered("the loss is not a scalar")
    form = _without_shift(sp.sympify(out))
    if form.free_symbols & {ZI, IDX}:
        raise NotCovered("the loss keeps a generic token")
    _, form = _positive_factor(form)
    # an additive constant (its V included) does not change the Hessian
    _, form = form.as_independent(X, W, T, *form.atoms(Sep), as_Add=True)
    if not sp.diff(form, T).free_symbols <= {V}:
        raise NotCovered("the loss is not linear in the sum of the other logits")
    for sep in form.atoms(Sep):  # the separable case: a diagonal Hessian
        s = sp.Dummy("s")
        coupled = not sp.diff(form.xreplace({sep: s}), s).free_symbols <= {V}
        if W in form.free_symbols or coupled:
            raise NotCovered(f"a separable sum {sep} beside other couplings")
    return form


def v_threshold(vform: VForm) -> int | None:
    r"""The smallest V0 ≥ 3 with :math:`F_w < 0` at every point for every V ≥ V0,
    when :math:`F_w` is a polynomial in V times a V-free factor that is positive
    everywhere; None otherwise (nothing is claimed).
    """
    if not vform.covered or vform.v_free:
        return None
    fw = sp.factor(sp.together(sp.diff(vform.form, W)))
    vpart, rest = fw.as_independent(X, W, T, as_Add=False)
    if V in rest.free_symbols or not vpart.is_polynomial(V):
        return None
    if not _positive(rest):
        return None
    poly = sp.Poly(vpart, V)
    if poly.degree() < 1 or poly.LC() >= 0:
        return None  # F_w < 0 for large V needs a negative leading coefficient
    roots = [r for r in poly.real_roots()]
    start = max([3] + [int(sp.floor(r)) + 1 for r in roots])
    return start if poly.eval(start) < 0 else None


def _positive(expr: sp.Expr) -> bool:
    """``expr`` is positive for every real x, w, T (products and quotients of sums
    of exponentials with positive coefficients)."""
    for f in sp.Mul.make_args(sp.factor(expr)):
        base, exp = f.as_base_exp()
        if base.is_positive or (isinstance(base, sp.exp)):
            continue
        if isinstance(base, sp.Add) and all(
            _positive(t) for t in sp.Add.make_args(base)
        ):
            continue
        if f.is_positive:
            continue
        return False
    return True
