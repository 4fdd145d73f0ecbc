"""The loss must run: one finite real scalar, no out-of-range index (bad input
otherwise, one line naming what went wrong)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput

__all__ = ["sanity_check", "shape_check"]


def _check_output(out, name: str) -> None:
    if out.shape != ():
        raise BadInput(f"{name} returns shape {tuple(out.shape)}, not a scalar")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise BadInput(
            f"{name} returns dtype {out.dtype}, not a real floating-point scalar"
        )


def sanity_check(loss, vocab: int, sampled: int, inputs, name: str = "") -> None:
    """Evaluates the loss once: it must run and return one finite real scalar.

    Raises:
        BadInput: naming what went wrong.
    """
    name = f"the loss {name}".rstrip()
    z = np.linspace(-1.0, 1.0, vocab)

    def fn(x):
        return loss(x, sampled, **inputs)

    out, index_error = _checked(fn, z, name)
    if index_error is not None:  # JAX would clamp or fill the index silently
        raise BadInput(f"{name} indexes out of range at V = {vocab}: {index_error}")
    _check_output(out, name)
    if not bool(jnp.isfinite(out)):
        raise BadInput(f"{name} is not finite ({float(out)}) at logits {z}")


def _checked(fn, z, name: str):
    """``(fn(z), out-of-range index message or None)``: one compilation with
    ``jax.experimental.checkify``'s index checks; where checkify cannot transform the
    function (it fails on some scatters under ``vmap``) a plain evaluation, and no
    claim about indices.

    Raises:
        BadInput: the function raised.
    """
    from jax.experimental import checkify

    try:
        with jax.enable_x64(True):
            checked = checkify.checkify(fn, errors=checkify.index_checks)
            err, out = jax.jit(checked)(jnp.asarray(z, jnp.float64))
        message = err.get()
        return out, None if message is None else message.strip()
    except BadInput:
        raise
    except Exception:  # checkify's limits, or the user's error: evaluate plainly
        pass
    try:
        with jax.enable_x64(True):
            return jax.jit(fn)(jnp.asarray(z, jnp.float64)), None
    except BadInput:
        raise
    except Exception as err:  # the user's function: report whatever it raised
        raise BadInput(f"{name} raised {type(err).__name__}: {err}") from err


def shape_check(loss, vocab: int, sampled: int, inputs, name: str = "") -> None:
    """Traces the loss once (no compilation): it must run and return a real scalar."""
    name = f"the loss {name}".rstrip()
    try:
        with jax.enable_x64(True):
            out = jax.eval_shape(
                lambda x: loss(x, sampled, **inputs),
                jax.ShapeDtypeStruct((vocab,), jnp.float64),
            )
    except Exception as err:  # the user's function: report whatever it raised
        raise BadInput(f"{name} raised {type(err).__name__}: {err}") from err
    _check_output(out, name)
