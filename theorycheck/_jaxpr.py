r"""One jaxpr walker (JAX only) shared by the SymPy bridge and the frozen-curvature
re-check.

:func:`interpret` evaluates a jaxpr equation by equation with a caller's *rule*
(``rule(eqn, invals) -> outvals``): :mod:`theorycheck.bridge` binds every primitive
to SymPy, :mod:`theorycheck.numeric._curvature_frozen` binds it to JAX and replays
``stop_gradient`` values. :data:`CALL_JAXPR` names the parameter that holds the body
of each call-like primitive, which both inline.

:func:`affine_prefix` finds an invertible affine map of the logits at the top of a
loss, :math:`z' = \alpha \odot z + \beta` (temperature ``z / T``, scaling, shifts),
through which every other use of the logits passes. Then
:math:`L(z) = \tilde L(\alpha \odot z + \beta)` and
:math:`\nabla^2 L(z) = D_\alpha \nabla^2 \tilde L(z') D_\alpha`, so (every
:math:`\alpha_i \ne 0`, the map onto :math:`\mathbb R^V`) :math:`L` is convex iff
:math:`\tilde L` is, and a direction :math:`u'` of negative curvature of
:math:`\tilde L` at :math:`z'` is :math:`u = u' / \alpha` for :math:`L` at
:math:`z = (z' - \beta) / \alpha`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax.extend import core as jcore

__all__ = [
    "CALL_JAXPR",
    "rounds",
    "affine_prefix",
    "has_primitive",
    "interpret",
    "sub_jaxpr",
    "where",
]

#: Call-like primitives interpreted inline: primitive name -> parameters that may
#: hold the body (first present wins).
CALL_JAXPR: dict[str, tuple[str, ...]] = {
    "jit": ("jaxpr",),
    "pjit": ("jaxpr",),
    "closed_call": ("call_jaxpr",),
    "core_call": ("call_jaxpr",),
    "custom_jvp_call": ("call_jaxpr",),
    "custom_vjp_call": ("call_jaxpr", "fun_jaxpr"),
    "custom_vjp_call_jaxpr": ("fun_jaxpr",),
    "remat": ("jaxpr",),
    "remat2": ("jaxpr",),
    "checkpoint": ("jaxpr",),
}

#: Elementwise primitives that keep a value affine in the logits when the other
#: operand does not depend on them.
_AFFINE = {"mul", "div", "add", "sub", "neg", "convert_element_type", "copy"}


def rounds(dtype) -> bool:
    """A cast to ``dtype`` rounds a float64 value: a floating type of fewer than 64
    bits (``float32``, ``float16``, ``bfloat16``, the ``float8`` types)."""
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.floating)) and np.dtype(dtype).itemsize < 8


def sub_jaxpr(eqn) -> tuple[Any, Sequence[Any]] | None:
    """``(jaxpr, consts)`` of a call-like equation's body, or None."""
    for name in CALL_JAXPR.get(eqn.primitive.name, ()):
        if name not in eqn.params:
            continue
        sub = eqn.params[name]
        if isinstance(sub, jcore.ClosedJaxpr):
            return sub.jaxpr, sub.consts
        if isinstance(sub, jcore.Jaxpr):
            return sub, ()
    return None


def where(eqn) -> str:
    """``file.py:LINE`` of the user's code that made ``eqn`` (the innermost frame
    outside JAX and theorycheck; for a registered loss, its line in
    ``theorycheck/losses``), or ``"an unknown line"``."""
    import os

    from jax._src import source_info_util

    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        frames = list(source_info_util.user_frames(eqn.source_info.traceback))
    except Exception:  # noqa: BLE001 - a location is a courtesy, never an error
        return "an unknown line"
    package = os.path.join(own, "theorycheck") + os.sep
    registry = os.path.join(package, "losses") + os.sep  # a registered loss's own code
    for wanted in (lambda p: package not in p, lambda p: registry in p):
        for f in frames:
            if wanted(os.path.abspath(f.file_name)):
                return f"{os.path.basename(f.file_name)}:{f.start_line}"
    return "an unknown line"


def has_primitive(jaxpr, name: str) -> bool:
    """True when ``name`` occurs in ``jaxpr`` or any jaxpr nested in its parameters."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == name:
            return True
        if any(has_primitive(sub, name) for sub in jcore.jaxprs_in_params(eqn.params)):
            return True
    return False


def interpret(
    jaxpr,
    consts: Sequence[Any],
    args: Sequence[Any],
    rule: Callable[[Any, list], Any],
    *,
    literal: Callable[[Any], Any] = lambda value: value,
    bind: Callable[[Any, Any], Any] | None = None,
) -> list:
    """Evaluates ``jaxpr`` with ``rule`` for every equation.

    Args:
        jaxpr: a ``jax.extend.core.Jaxpr``.
        consts: values of its constvars.
        args: values of its invars.
        rule: ``rule(eqn, invals)`` -> the output value (a list of them for a
            primitive with multiple results).
        literal: converts a literal's value (e.g. to exact SymPy numbers).
        bind: optional ``bind(var, value) -> value`` applied to every equation
            output before it is stored (e.g. to substitute a variable).

    Returns:
        The values of the outvars.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> closed = jax.make_jaxpr(lambda x: x * 2.0 + 1.0)(1.0)
        >>> rule = lambda eqn, ins: eqn.primitive.bind(*ins, **eqn.params)
        >>> [float(v) for v in interpret(closed.jaxpr, closed.consts, [3.0], rule)]
        [7.0]
    """
    env: dict = {}

    def read(v):
        return literal(v.val) if isinstance(v, jcore.Literal) else env[v]

    for v, val in zip(jaxpr.constvars, consts):
        env[v] = val
    for v, val in zip(jaxpr.invars, args):
        env[v] = val
    for eqn in jaxpr.eqns:
        outs = rule(eqn, [read(v) for v in eqn.invars])
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, val in zip(eqn.outvars, outs):
            env[v] = val if bind is None else bind(v, val)
    return [read(v) for v in jaxpr.outvars]


def affine_prefix(jaxpr):
    """The variable holding :math:`\\alpha \\odot z + \\beta`, or None.

    ``z`` is the first invar. The map is recognised when elementwise ``mul``/``div``
    (``z`` in the numerator)/``add``/``sub``/``neg`` with operands that do not depend
    on ``z`` lead from ``z`` to one variable ``y`` of the same shape, and nothing else
    uses ``z`` or the intermediate values. Whether every :math:`\\alpha_i \\ne 0` is
    left to the caller (the values are known only with the inputs).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> f = lambda z: jnp.sum(jax.nn.softmax(z / 0.7))
        >>> j = jax.make_jaxpr(f)(jnp.zeros(3)).jaxpr
        >>> affine_prefix(j) is j.eqns[0].outvars[0]
        True
    """
    z = jaxpr.invars[0]
    shape = getattr(z.aval, "shape", None)
    affine = {z}
    depends = {z}
    last = None
    for eqn in jaxpr.eqns:
        ins = [v for v in eqn.invars if not isinstance(v, jcore.Literal)]
        hit = [v for v in ins if v in depends]
        if not hit:
            continue
        out = eqn.outvars[0]
        name = eqn.primitive.name
        ok = (
            name in _AFFINE
            and (
                name != "convert_element_type"
                or np.dtype(eqn.params["new_dtype"]).kind == "f"
            )
            and len(hit) == 1
            and hit[0] in affine
            and getattr(out.aval, "shape", None) == shape
            and not (name == "div" and eqn.invars[0] is not hit[0])
        )
        if ok and (hit[0] is last or hit[0] is z) and (last is None or hit[0] is last):
            affine.add(out)
            last = out
        depends.update(eqn.outvars)
    if last is None:
        return None
    # Only the last affine value may be used outside the chain.
    for eqn in jaxpr.eqns:
        if eqn.outvars[0] in affine:
            continue
        used = [v for v in eqn.invars if not isinstance(v, jcore.Literal)]
        if any(v in affine and v is not last for v in used):
            return None
    outs = [v for v in jaxpr.outvars if not isinstance(v, jcore.Literal)]
    if any(v in affine and v is not last for v in outs):
        return None
    return last
