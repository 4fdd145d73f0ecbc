r"""A JAX function at its declared precision, every operation rounded once.

A bfloat16 forward pass compiled by XLA is not one function of its inputs: how a
matrix product or a reduction accumulates (the order, the width of the partial sums,
whether the CPU has bfloat16 dot instructions) is the compiler's and the CPU's choice,
and the rounded results differ between CPUs by far more than a float32 ulp (a rescored
bfloat16 anchor moved a divergence by half its value between two x86 CPUs).

:func:`exactly_rounded` gives the function one meaning. Each primitive of ``fun``'s
jaxpr is evaluated on its inputs converted to float64 (exact for bfloat16, float16
and float32) and its result is rounded once to the dtype the program declares for it:

.. math:: \operatorname{op}_\text{declared}(x_1, \dots, x_n)
          = \operatorname{round}_\text{out}
            \big(\operatorname{op}_{64}(x_1, \dots, x_n)\big)

so a bfloat16 product, a float32-accumulated softmax or a float32 dot of bfloat16
operands is the float64 value rounded to its declared dtype. Two machines agree on
every bfloat16 result unless a float64 result lies within float64 rounding of a
bfloat16 rounding boundary (probability about :math:`2^{-44}` per operation), and on a
float32 result up to about :math:`2^{-29}` per operation; a flipped float32 result
moves by one float32 ulp.

Control flow is interpreted inside: ``jit``/``pjit`` and ``custom_jvp``/``custom_vjp``
calls inline their bodies (the transformed function is for evaluation, not for
differentiation), ``scan``, ``while`` and ``cond`` rebuild their loop or branches
around interpreted bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend import core

#: primitives whose body is evaluated inline (calls; their derivative rules unused)
_CALLS = (
    "jit",
    "pjit",
    "closed_call",
    "core_call",
    "remat",
    "checkpoint",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "custom_lin",
)

#: primitives bound as they are: one rounding already (conversions), no arithmetic
_AS_IS = ("convert_element_type", "reduce_precision", "bitcast_convert_type")


def _inexact(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def _up(x):
    return x.astype(jnp.float64) if _inexact(x) else x


def _round(x, dtype):
    """``x`` rounded to ``dtype`` (round to nearest even) by operations XLA keeps.

    A bare ``convert`` is not enough: with excess precision allowed (XLA's default)
    the compiler may drop a ``float64 -> bfloat16 -> float64`` pair and feed the
    next operation the unrounded value (it does on some CPUs). The value is first
    rounded in float64 (``reduce_precision`` for normal numbers; subnormal
    ones, which ``reduce_precision`` flushes, by an exact power-of-two scaling and
    ``round``), so the conversion that follows is exact whether it is kept or not.
    """
    dtype, x = jnp.dtype(dtype), jnp.asarray(x)
    if not (
        jnp.issubdtype(dtype, jnp.floating)
        and jnp.issubdtype(x.dtype, jnp.floating)
        and jnp.finfo(dtype).bits < jnp.finfo(x.dtype).bits
    ):
        return x.astype(dtype)
    fi = jnp.finfo(dtype)
    x = x.astype(jnp.float64)  # exact; the target's subnormals are normal here
    normal = jax.lax.reduce_precision(x, fi.nexp, fi.nmant)
    sub = jnp.asarray(fi.smallest_subnormal, jnp.float64)
    tiny = jnp.round(x / sub) * sub  # exact: a power-of-two scaling, then round
    return jnp.where(jnp.abs(x) < fi.smallest_normal, tiny, normal).astype(dtype)


def _body(params: dict):
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if name in params:
            sub = params[name]
            return (sub.jaxpr, sub.consts) if hasattr(sub, "consts") else (sub, ())
    raise NotImplementedError(f"no body found in params {sorted(params)}")


def _eval(jaxpr, consts, args) -> list:
    env: dict = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts, strict=True):
        env[v] = x
    for v, x in zip(jaxpr.invars, args, strict=True):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = _apply(eqn, ins)
        for v, x in zip(eqn.outvars, outs, strict=True):
            if not isinstance(v, core.DropVar):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _closed(closed):
    return lambda *xs: _eval(closed.jaxpr, closed.consts, list(xs))


def _apply(eqn, ins: list) -> list:
    name, params = eqn.primitive.name, eqn.params
    if name in _CALLS:
        jaxpr, consts = _body(params)
        return _eval(jaxpr, consts, ins)
    if name == "scan":
        nc, ncar = params["num_consts"], params["num_carry"]
        consts, init, xs = ins[:nc], ins[nc : nc + ncar], ins[nc + ncar :]
        body = _closed(params["jaxpr"])

        def step(carry, x):
            outs = body(*consts, *carry, *x)
            return outs[:ncar], outs[ncar:]

        carry, ys = jax.lax.scan(
            step,
            init,
            xs,
            length=params["length"],
            reverse=params["reverse"],
            unroll=params["unroll"],
        )
        return [*carry, *ys]
    if name == "while":
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cconsts, bconsts, init = ins[:cn], ins[cn : cn + bn], ins[cn + bn :]
        cond, body = _closed(params["cond_jaxpr"]), _closed(params["body_jaxpr"])
        return list(
            jax.lax.while_loop(
                lambda c: cond(*cconsts, *c)[0], lambda c: body(*bconsts, *c), init
            )
        )
    if name == "cond":
        index, ops = ins[0], ins[1:]
        branches = [_closed(b) for b in params["branches"]]
        return list(jax.lax.switch(index, branches, *ops))
    if list(core.jaxprs_in_params(params)):
        raise NotImplementedError(
            f"exactly_rounded: no rule for the higher-order primitive {name!r}"
        )
    if name == "convert_element_type" and _inexact(ins[0]):
        return [_round(ins[0], params["new_dtype"])]  # one rounding, kept by XLA
    if name in _AS_IS or not any(_inexact(x) for x in ins):
        out = eqn.primitive.bind(*ins, **params)
        return list(out) if eqn.primitive.multiple_results else [out]
    new = dict(params)
    if new.get("preferred_element_type") is not None and jnp.issubdtype(
        new["preferred_element_type"], jnp.inexact
    ):
        new["preferred_element_type"] = jnp.dtype(jnp.float64)
    out = eqn.primitive.bind(*[_up(x) for x in ins], **new)
    outs = list(out) if eqn.primitive.multiple_results else [out]
    return [
        _round(x, v.aval.dtype) if _inexact(x) else x
        for x, v in zip(outs, eqn.outvars, strict=True)
    ]


def exactly_rounded(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun`` with each primitive computed in float64 and rounded once to its
    declared output dtype (module docstring). Needs ``jax_enable_x64``.

    Args:
        fun: a JAX-traceable function of arrays (pytrees allowed).

    Returns:
        A function with ``fun``'s signature, output shapes and dtypes; jit it as
        usual. Not for differentiation (custom derivative rules are inlined away).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> jax.config.update("jax_enable_x64", True)
        >>> f = lambda x: (x * x).sum(dtype=jnp.float32)
        >>> x = jnp.asarray([1.5, 2.25], jnp.bfloat16)
        >>> float(exactly_rounded(f)(x))
        7.3125
    """
    if not jax.config.jax_enable_x64:
        raise RuntimeError("exactly_rounded needs jax_enable_x64 (float64)")

    def wrapped(*args):
        closed, shapes = jax.make_jaxpr(fun, return_shape=True)(*args)
        flat = jax.tree.leaves(args)
        outs = _eval(closed.jaxpr, closed.consts, flat)
        return jax.tree.unflatten(jax.tree.structure(shapes), outs)

    return wrapped


__all__ = ["exactly_rounded"]
