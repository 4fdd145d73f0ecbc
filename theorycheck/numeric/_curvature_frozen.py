r"""Second differences of a loss with its ``stop_gradient`` values frozen (JAX only).

The logit Hessian of a surrogate treats every ``jax.lax.stop_gradient`` output as a
constant (a frozen weight, mask or target). A finite difference of the loss *value*
along a direction would instead see those quantities move. To re-check a Hessian-vector
product by finite differences, the loss is evaluated from its jaxpr with every
``stop_gradient`` output replaced by its value at the base point :math:`z_0`:

.. math::
    \tilde L_{z_0}(z) = L(z)\big|_{\mathrm{sg}(\cdot) = \mathrm{sg}(\cdot)(z_0)},\qquad
    \nabla^2 \tilde L_{z_0}(z_0) = \nabla^2_{\text{autodiff}} L(z_0).

The second difference along a unit direction :math:`x` with Richardson extrapolation,

.. math::
    c(h) = \frac{\tilde L(z_0 + h x) - 2\tilde L(z_0) + \tilde L(z_0 - h x)}{h^2},\qquad
    c_R = \frac{4\,c(h/2) - c(h)}{3} = x^\top \nabla^2 \tilde L(z_0)\, x + O(h^4),

is an independent route to :math:`x^\top H x` (values only, no autodiff).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from theorycheck import _jaxpr


def _eval(jaxpr, consts, args, frozen: list, record: bool) -> list:
    """Evaluate a jaxpr; ``record``: append stop_gradient outputs to ``frozen``, else
    consume them from ``frozen`` in the same order."""

    def rule(eqn, invals):
        if eqn.primitive.name == "stop_gradient":
            if record:
                frozen.append(invals[0])
                return invals[0]
            return frozen.pop(0)
        sub = _jaxpr.sub_jaxpr(eqn)
        if sub is not None:
            inner, inner_consts = sub
            n = len(inner.invars)
            return _eval(inner, inner_consts, invals[-n:], frozen, record)
        if any(
            _jaxpr.has_primitive(j, "stop_gradient")
            for j in jcore.jaxprs_in_params(eqn.params)
        ):
            raise NotImplementedError(
                f"stop_gradient inside '{eqn.primitive.name}' cannot be frozen"
            )
        return eqn.primitive.bind(*invals, **eqn.params)

    return _jaxpr.interpret(jaxpr, consts, args, rule)


def frozen_loss_fn(fn: Callable, z0) -> Callable:
    r"""``z -> fn(z)`` with every ``stop_gradient`` output frozen at its ``z0`` value.

    .. math:: z \mapsto \tilde L_{z_0}(z)

    Args:
        fn: ``fn(z) -> scalar`` in jax.numpy (inputs closed over).
        z0: the base point, shape ``[V]``.

    Returns:
        A function of ``z`` (same shape as ``z0``) that is jit-compatible. Without any
        ``stop_gradient`` it is ``fn`` itself.

    Raises:
        NotImplementedError: a ``stop_gradient`` sits inside a control-flow primitive
            (``cond``, ``while``, ``scan``) that is not interpreted inline.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> f = lambda z: jax.lax.stop_gradient(z[0]) * z[1]
        >>> g = frozen_loss_fn(f, jnp.array([2.0, 1.0]))
        >>> float(g(jnp.array([5.0, 3.0])))
        6.0
    """
    closed = jax.make_jaxpr(fn)(z0)
    if not _jaxpr.has_primitive(closed.jaxpr, "stop_gradient"):
        return fn

    def frozen(z):
        values: list = []
        _eval(closed.jaxpr, closed.consts, [z0], values, record=True)
        return _eval(closed.jaxpr, closed.consts, [z], values, record=False)[0]

    return frozen


def second_difference(fn: Callable, z0, direction, *, step: float = 2e-3):
    r"""Richardson-extrapolated central second difference of ``fn`` along a direction.

    .. math::
        c_R = \frac{4\,c(h/2) - c(h)}{3},\qquad
        c(h) = \frac{f(z_0 + h x) - 2 f(z_0) + f(z_0 - h x)}{h^2}

    Args:
        fn: ``fn(z) -> scalar`` (already frozen if it holds stop_gradient values).
        z0: base point, shape ``[V]``, float64.
        direction: unit direction ``x``, shape ``[V]``.
        step: the larger step ``h``.

    Returns:
        ``(c_R, noise)``: the estimate and its rounding-error scale
        :math:`16\,\epsilon \max|f| / (h/2)^2` (Richardson amplification included).

    Examples:
        >>> import jax.numpy as jnp
        >>> c, noise = second_difference(lambda z: jnp.sum(z**2), jnp.zeros(2),
        ...                              jnp.array([1.0, 0.0]))
        >>> abs(float(c) - 2.0) < 1e-6
        True
    """
    h = step
    pts = jnp.stack([z0 + t * direction for t in (-h, -h / 2, 0.0, h / 2, h)])
    vals = jnp.stack([fn(p) for p in pts])
    c_h = (vals[0] - 2 * vals[2] + vals[4]) / h**2
    c_h2 = (vals[1] - 2 * vals[2] + vals[3]) / (h / 2) ** 2
    eps = np.finfo(np.float64).eps
    noise = 16.0 * eps * jnp.max(jnp.abs(vals)) / (h / 2) ** 2
    return (4.0 * c_h2 - c_h) / 3.0, noise
