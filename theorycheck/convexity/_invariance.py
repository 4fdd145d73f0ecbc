r"""Is the loss one program for every V? The evidence behind a scope ``all V >= 2``.

The structure stage fits a family at V = 3 and V = 4 and its theorem holds for every
V, *if* the JAX function computes the same formula at every V. Python code can branch
on ``logits.shape`` (a different formula for V ≥ 5), so this is checked, not assumed:
the jaxprs traced at V = 3, 4, 5 and a larger V must be the same program up to the
vocabulary dimension:

* the same equations, primitives and parameters (nested jaxprs included), in order;
* every number in them (shapes, indices, literals, parameters) either the same at
  every V or affine in V (``V``, ``V - 1``, ``2V``: a shape, a ``mean``'s divisor);
* every constant array either the same, or a constant fill of a V-sized shape.

Array inputs (``behavior_logp``, ``old_logits``) are traced as arguments, so their
V-dependent values do not count as program differences. A check that fails only
narrows the scope to the V actually decided (it never proves anything itself).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

__all__ = ["INVARIANCE_VOCABS", "program_text", "program_text_of", "same_program"]

#: The V at which the jaxprs are traced and compared.
INVARIANCE_VOCABS = (3, 4, 5, 16)
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _value_text(value: Any) -> str:
    arr = np.asarray(value)
    if arr.size > 1 and np.all(arr == arr.reshape(-1)[0]):
        return f"fill({arr.reshape(-1)[0]!r}, shape={arr.shape}, {arr.dtype})"
    return f"{arr.tolist()!r}:{arr.dtype}"


def _param_text(value: Any, names: dict, lines: list[str]) -> str:
    if isinstance(value, jex.ClosedJaxpr):
        _walk(value.jaxpr, value.consts, names, lines)
        return "<closed jaxpr>"
    if isinstance(value, jex.Jaxpr):
        _walk(value, (), names, lines)
        return "<jaxpr>"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_param_text(v, names, lines) for v in value) + ")"
    return _ADDRESS.sub("0x", repr(value))


def _atom(var: Any, names: dict) -> str:
    if isinstance(var, jex.Literal):
        return f"lit[{_value_text(var.val)}]"
    key = id(var)
    if key not in names:
        names[key] = f"v{len(names)}"
    return f"{names[key]}:{var.aval.str_short()}"


def _walk(jaxpr, consts, names: dict, lines: list[str]) -> None:
    for var, value in zip(jaxpr.constvars, consts):
        lines.append(f"const {_atom(var, names)} = {_value_text(value)}")
    lines.append("in " + " ".join(_atom(v, names) for v in jaxpr.invars))
    for eqn in jaxpr.eqns:
        params = [
            f"{k}={_param_text(v, names, lines)}" for k, v in sorted(eqn.params.items())
        ]
        lines.append(
            " ".join(_atom(v, names) for v in eqn.outvars)
            + f" = {eqn.primitive.name}[{', '.join(params)}] "
            + " ".join(_atom(v, names) for v in eqn.invars)
        )
    lines.append("out " + " ".join(_atom(v, names) for v in jaxpr.outvars))


def program_text(
    loss: Callable, vocab: int, sampled: int, inputs: Mapping[str, Any]
) -> str:
    """The jaxpr of ``loss`` at ``V = vocab`` as text, with every constant's value.

    Raises:
        Exception: whatever tracing the user's function raised.
    """
    arrays = {k: v for k, v in inputs.items() if np.ndim(v) > 0}
    scalars = {k: v for k, v in inputs.items() if np.ndim(v) == 0}
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(lambda z, arr: loss(z, sampled, **scalars, **arr))(
            jax.ShapeDtypeStruct((vocab,), jnp.float64),
            {
                k: jax.ShapeDtypeStruct(np.shape(v), jnp.float64)
                for k, v in arrays.items()
            },
        )
    return program_text_of(closed)


def program_text_of(closed) -> str:
    """A closed jaxpr as text, with every constant's value (see
    :func:`program_text`)."""
    lines: list[str] = []
    _walk(closed.jaxpr, closed.consts, {}, lines)
    return "\n".join(lines)


def _affine(values: list[Fraction], vocabs: tuple[int, ...]) -> bool:
    """True when ``values[i] == a + b * vocabs[i]`` for one ``(a, b)``."""
    (v0, x0), (v1, x1) = (values[0], vocabs[0]), (values[1], vocabs[1])
    slope = (v1 - v0) / (x1 - x0)
    return all(v == v0 + slope * (x - x0) for v, x in zip(values, vocabs))


def same_program(texts: Mapping[int, str]) -> list[int]:
    """The V whose program differs from the smallest V's (empty: one program).

    Args:
        texts: :func:`program_text` at several V (at least three).

    Returns:
        The V (sorted) at which the text is not the smallest V's program up to V.
    """
    vocabs = tuple(sorted(texts))
    words = {v: _NUMBER.split(texts[v]) for v in vocabs}
    numbers = {v: _NUMBER.findall(texts[v]) for v in vocabs}
    base = vocabs[0]
    differ = [
        v
        for v in vocabs[1:]
        if words[v] != words[base] or len(numbers[v]) != len(numbers[base])
    ]
    if differ:
        return differ
    for slot in zip(*(numbers[v] for v in vocabs)):
        if not _affine([Fraction(t) for t in slot], vocabs):
            return list(vocabs[1:])
    return []
