r"""An interpreter of a traced PyTorch ATen graph into JAX.

The graph is what ``torch.fx.experimental.proxy_tensor.make_fx(fn,
pre_dispatch=True, tracing_mode="fake")`` records: ATen operations above autograd,
with ``torch._C._set_grad_enabled`` markers where the code enters and leaves
``torch.no_grad()``. Each operation becomes the ``jax.numpy``/``lax`` operation that
computes the same value, so that the JAX function is the loss's formula (the jaxpr
the bridge reads), not a call into torch:

* ``aten.detach``, ``.item()`` and every value computed while gradients are disabled
  become ``jax.lax.stop_gradient`` (torch autograd treats them as constants; so do
  ``jax.hessian`` and the checker). A ``no_grad`` block is translated as it is
  written and its results are frozen once, where code with gradients enabled reads
  them: ``with torch.no_grad(): w = clamp(exp(lp - old), l, u)`` is
  ``stop_gradient(clip(exp(lp - old), l, u))``, the registry's CISPO weight (one
  frozen quantity, not one per operation, which the structure stage could not fold);
  a ``detach``/``.item()`` of a value already frozen adds none;
* only the operations the output depends on are translated (metrics are dropped);
* an in-place write is translated as its functional form when nothing else can
  see it (``index_put_``, ``masked_fill_``, ``fill_``, ``zero_`` on a tensor the code
  made, with no view of it: :func:`_functional_write`); any other in-place
  operation anywhere, a random one that the output depends on, a float
  cast below float64, a tensor on a device other than the CPU, and an operation
  without a translation are refused with :class:`Untranslatable` naming it.

``naive=True`` reproduces a translator that ignores ``detach`` and ``no_grad`` (the
identity, as torchax does): its gradient can be silently wrong, which the gate
(:mod:`theorycheck.torchfront._gate`) must catch; the tests use it for that.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: base names of ATen operations that draw random numbers.
RANDOM_OPS = frozenset(
    "rand rand_like randn randn_like randint randint_like randperm bernoulli normal "
    "uniform multinomial dropout native_dropout poisson exponential geometric cauchy "
    "log_normal rrelu_with_noise feature_dropout alpha_dropout".split()
)

#: operations that leave the value unchanged (identity in the translation).
_IDENTITY = frozenset(
    "alias clone contiguous lift_fresh_copy view_as resolve_conj resolve_neg "
    "positive".split()
)
#: operations whose result torch autograd treats as a constant.
_FREEZERS = frozenset("detach detach_ item _local_scalar_dense".split())
#: bookkeeping operations with no value of their own.
_NOOPS = frozenset("_assert_tensor_metadata _assert_scalar sym_constrain_range".split())


class Untranslatable(Exception):
    """A construct of the torch code that the translation does not reproduce; the
    message names it (``"randomness (aten.rand)"``)."""


def op_name(target: Any) -> str:
    """``aten.mul.Tensor`` -> ``"mul"`` (the overload packet's name)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return getattr(target, "__name__", str(target))
    return schema.name.split("::")[-1]


class DType:
    """A torch dtype without torch: its name and kind (``b``, ``f``, ``i``, ``c``)."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "f"

    def __repr__(self) -> str:
        return self.name


def _dtype(dt):
    """torch dtype -> the JAX dtype of the translation (floats are float64)."""
    if dt is None:
        return None
    if dt.kind == "b":
        return jnp.bool_
    if dt.kind == "f":
        return jnp.float64
    if dt.kind == "c":
        raise Untranslatable(f"a complex tensor ({dt})")
    return jnp.int64


class Ref:
    """The value of step ``index`` (a node of the graph)."""

    def __init__(self, index: int) -> None:
        self.index = index


def _axes(dim, ndim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(d % ndim if ndim else 0 for d in dims)


def _bc(*xs):
    """Explicit broadcasting (torch broadcasts; JAX's rank promotion may be strict)."""
    arrays = [x for x in xs if isinstance(x, jax.Array | np.ndarray)]
    if len(arrays) < 2:
        return xs
    shape = jnp.broadcast_shapes(*(jnp.shape(a) for a in arrays))
    return tuple(
        jnp.broadcast_to(x, shape) if isinstance(x, jax.Array | np.ndarray) else x
        for x in xs
    )


def _binary(fn):
    def run(a, b, *rest, alpha=1, **_):
        if alpha != 1:
            b = b * alpha
        a, b = _bc(jnp.asarray(a) if _is_array(b) else a, b)
        return fn(a, b)

    return run


def _is_array(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def _reduce(fn):
    def run(x, dim=None, keepdim=False, *, dtype=None, **_):
        x = jnp.asarray(x)
        if dtype is not None:
            x = x.astype(_dtype(dtype))
        if x.dtype == jnp.bool_:
            x = x.astype(jnp.int64)
        return fn(x, axis=_axes(dim, x.ndim), keepdims=keepdim)

    return run


def _softmax(fn):
    def run(x, dim, *rest, **_):
        x = jnp.asarray(x)
        return fn(x, axis=dim % max(x.ndim, 1)) if x.ndim else fn(x[None])[0]

    return run


def _clamp(x, lo=None, hi=None, **_):
    x = jnp.asarray(x)
    if lo is not None:
        x = jnp.maximum(*_bc(x, lo))
    if hi is not None:
        x = jnp.minimum(*_bc(x, hi))
    return x


def _where(cond, a, b, **_):
    cond, a, b = _bc(jnp.asarray(cond), a, b)
    return jnp.where(cond, a, b)


def _select(x, dim, index, **_):
    """``x.select(dim, index)``: with a Python index (the trace's), a static slice at
    the index normalised here (``-1`` is ``n - 1``), so the jaxpr holds no index
    arithmetic with the axis length (``jnp.take`` would add ``index + n`` for a
    negative index, a literal that changes with V at every V); a traced index
    (a 0-d tensor) is read with ``jnp.take``."""
    x = jnp.asarray(x)
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        axis = dim % x.ndim
        return jax.lax.index_in_dim(x, int(index) % x.shape[axis], axis, False)
    return jnp.take(x, index, axis=dim)


def _slice(x, dim=0, start=None, end=None, step=1, **_):
    x = jnp.asarray(x)
    index = [slice(None)] * x.ndim
    size = x.shape[dim]
    stop = None if end is None or end >= size else end
    index[dim] = slice(start, stop, step)
    return x[tuple(index)]


def _static_index(index, size: int):
    """A constant integer index array (not a tracer), normalised to ``[0, size)``
    in NumPy; ``None`` for a traced or non-integer one, or one out of range."""
    if isinstance(index, jax.core.Tracer) or index is None:
        return None
    idx = np.asarray(index)
    if idx.dtype.kind not in "iu" or idx.size > 64:
        return None
    if idx.size and (idx.min() < -size or idx.max() >= size):
        return None
    return idx % size if idx.size else idx


def _read_at(x, axis: int, idx: np.ndarray):
    """``x`` read at the constant indices ``idx`` along ``axis`` (the index's shape
    in place of that axis) by static slices: a constant read of the token axis is
    the same slice at every V, where ``jnp.take`` would add ``index + V`` to
    normalise it (a literal that changes with V)."""
    if idx.ndim == 0:
        return jax.lax.index_in_dim(x, int(idx), axis, False)
    parts = [jax.lax.index_in_dim(x, int(i), axis, True) for i in idx.reshape(-1)]
    out = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis)
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1 :]
    return jnp.reshape(out, shape)


def _index(x, indices, **_):
    x = jnp.asarray(x)
    given = [d for d, i in enumerate(indices) if i is not None]
    if len(given) == 1:
        d = given[0]
        idx = _static_index(indices[d], x.shape[d])
        if idx is not None:
            return _read_at(x, d, idx)
    key = tuple(slice(None) if i is None else jnp.asarray(i) for i in indices)
    return x[key]


def _gather(x, dim, index, **_):
    """``torch.gather``: ``out[i][j] = x[i][index[i][j]]`` (``dim = 1``), the output of
    the index's shape."""
    x = jnp.asarray(x)
    axis = dim % max(x.ndim, 1)
    idx = _static_index(index, x.shape[axis]) if x.ndim else None
    if idx is not None and idx.ndim == x.ndim:
        columns = np.moveaxis(idx, axis, 0).reshape(idx.shape[axis], -1)
        if all(np.all(c == c[0]) for c in columns if c.size):
            # the same index in every row: static slices, then torch's other extents
            picked = _read_at(x, axis, columns[:, 0] if columns.size else columns)
            shape = [
                n if d == axis else min(picked.shape[d], idx.shape[d])
                for d, n in enumerate(idx.shape)
            ]
            picked = jax.lax.slice(picked, [0] * picked.ndim, shape)
            return jnp.broadcast_to(picked, idx.shape)
    return jnp.take_along_axis(x, jnp.asarray(index), axis=dim)


def _reshape(x, shape, **_):
    return jnp.reshape(jnp.asarray(x), tuple(shape))


def _expand(x, shape, **_):
    x = jnp.asarray(x)
    lead = len(shape) - x.ndim
    full = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape) if True]
    return jnp.broadcast_to(x, tuple(full))


def _squeeze(x, dim=None, **_):
    x = jnp.asarray(x)
    if dim is None:
        return jnp.squeeze(x)
    dims = [d % x.ndim for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    return jnp.squeeze(x, axis=tuple(d for d in dims if x.shape[d] == 1))


def _full(size, value, *, dtype=None, **_):
    return jnp.full(tuple(size), value, dtype=_dtype(dtype) or _scalar_dtype(value))


def _scalar_dtype(value):
    if isinstance(value, bool):
        return jnp.bool_
    return jnp.int64 if isinstance(value, int) else jnp.float64


def _like(fill):
    def run(x, *args, dtype=None, **_):
        x = jnp.asarray(x)
        value = fill if fill is not None else args[0]
        return jnp.full(x.shape, value, dtype=_dtype(dtype) or x.dtype)

    return run


def _arange(*args, dtype=None, **_):
    return jnp.arange(*args, dtype=_dtype(dtype) or _scalar_dtype(args[-1]))


def _pow(a, b, **_):
    if isinstance(b, int) and not isinstance(b, bool):
        return (
            jax.lax.integer_pow(jnp.asarray(a, jnp.float64), b)
            if b >= 0
            else (1.0 / jax.lax.integer_pow(jnp.asarray(a, jnp.float64), -b))
        )
    a, b = _bc(a, b)
    return jnp.power(a, b)


def _div(a, b, *, rounding_mode=None, **_):
    a, b = _bc(jnp.asarray(a) if _is_array(b) else a, b)
    q = jnp.true_divide(a, b)
    if rounding_mode == "floor":
        return jnp.floor(q)
    if rounding_mode == "trunc":
        return jnp.trunc(q)
    return q


def _cross_entropy(x, target, weight=None, reduction=1, ignore_index=-100, ls=0.0):
    r"""``F.cross_entropy`` with class-index targets; with ``label_smoothing`` ε,
    torch's :math:`(1-\varepsilon)\,\mathrm{nll} + \varepsilon\,(-\tfrac1C
    \sum_c \log p_c)` per kept row, reduced the same way."""
    if weight is not None:
        raise Untranslatable("cross_entropy with weight")
    x = jnp.asarray(x)  # the target stays NumPy when it is a constant
    logp = jax.nn.log_softmax(x, axis=1 if x.ndim > 1 else 0)
    if ls:
        return _smoothed(logp, target, reduction, ignore_index, ls)
    if x.ndim == 1:
        return -_index(logp, [target])
    keep = target != ignore_index
    fixed = _static_index(
        None if isinstance(target, jax.core.Tracer) else np.where(keep, target, 0),
        x.shape[1],
    )
    if fixed is not None:  # a constant target: static slices (see _read_at)
        rows = [_read_at(logp[n], 0, fixed[n]).reshape(1) for n in range(x.shape[0])]
        picked = -(rows[0] if len(rows) == 1 else jnp.concatenate(rows))
    else:
        picked = -jnp.take_along_axis(logp, target[:, None], axis=1)[:, 0]
    picked = jnp.where(keep, picked, 0.0)
    if reduction == 0:
        return picked
    if reduction == 2:
        return jnp.sum(picked)
    return jnp.sum(picked) / jnp.sum(keep)


def _nll_loss(x, target, weight=None, reduction=1, ignore_index=-100, **_):
    """``F.nll_loss`` on log-probabilities: ``-x[n, target[n]]`` (``weight``
    refused), reduced as torch does (0 none, 1 mean over kept targets, 2 sum)."""
    if weight is not None:
        raise Untranslatable("nll_loss with weight")
    x = jnp.asarray(x)
    if x.ndim == 1:
        return -_index(x, [target])
    keep = target != ignore_index
    safe = np.where(keep, target, 0) if not isinstance(keep, jax.Array) else None
    fixed = _static_index(safe, x.shape[1])
    if fixed is not None:
        rows = [_read_at(x[n], 0, fixed[n]).reshape(1) for n in range(x.shape[0])]
        picked = -(rows[0] if len(rows) == 1 else jnp.concatenate(rows))
    else:
        index = jnp.where(keep, target, 0)[:, None]
        picked = -jnp.take_along_axis(x, index, axis=1)[:, 0]
    picked = jnp.where(keep, picked, 0.0)
    if reduction == 0:
        return picked
    if reduction == 2:
        return jnp.sum(picked)
    return jnp.sum(picked) / jnp.sum(keep)


def _cumsum(x, dim, *, dtype=None, **_):
    """``torch.cumsum`` (bool and int promoted to int64, as torch does)."""
    x = jnp.asarray(x)
    if dtype is not None:
        x = x.astype(_dtype(dtype))
    elif x.dtype == jnp.bool_:
        x = x.astype(jnp.int64)
    return jnp.cumsum(x, axis=dim % max(x.ndim, 1))


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0, **_):
    """``F.elu``: ``scale * (x if x > 0 else alpha * (exp(input_scale x) - 1))``."""
    x = jnp.asarray(x)
    neg = alpha * jnp.expm1(jnp.minimum(x, 0.0) * input_scale)
    return scale * jnp.where(x > 0, x, neg)


def _index_put(x, indices, values, accumulate=False, **_):
    """``x[indices] = values`` (``accumulate``: ``+=``) as a new array; a single
    boolean mask of ``x``'s shape is a ``where``."""
    x = jnp.asarray(x)
    values = jnp.asarray(values, x.dtype)
    if len(indices) == 1 and jnp.asarray(indices[0]).dtype == jnp.bool_:
        mask = jnp.asarray(indices[0])
        if mask.shape == x.shape and values.size == 1:
            fill = jnp.reshape(values, ())
            return jnp.where(mask, x + fill if accumulate else fill, x)
    key = tuple(slice(None) if i is None else jnp.asarray(i) for i in indices)
    return x.at[key].add(values) if accumulate else x.at[key].set(values)


def _smoothed(logp, target, reduction, ignore_index, eps):
    """Label-smoothed cross entropy of log-probabilities (see ``_cross_entropy``)."""
    nll = _nll_loss(logp, target, None, 0, ignore_index)
    if logp.ndim == 1:
        return (1 - eps) * nll - eps * jnp.mean(logp)
    keep = target != ignore_index
    smooth = jnp.where(keep, -jnp.mean(logp, axis=1), 0.0)
    per_row = (1 - eps) * nll + eps * smooth
    if reduction == 0:
        return per_row
    if reduction == 2:
        return jnp.sum(per_row)
    return jnp.sum(per_row) / jnp.sum(keep)


def _softplus(x, beta=1, threshold=20, **_):
    x = jnp.asarray(x)
    return jnp.where(x * beta > threshold, x, jnp.logaddexp(0.0, x * beta) / beta)


_OPS: dict[str, Callable] = {
    "add": _binary(jnp.add),
    "sub": _binary(jnp.subtract),
    "rsub": _binary(lambda a, b: jnp.subtract(b, a)),
    "mul": _binary(jnp.multiply),
    "div": _div,
    "true_divide": _div,
    "maximum": _binary(jnp.maximum),
    "minimum": _binary(jnp.minimum),
    "fmax": _binary(jnp.fmax),
    "fmin": _binary(jnp.fmin),
    "lt": _binary(jnp.less),
    "le": _binary(jnp.less_equal),
    "gt": _binary(jnp.greater),
    "ge": _binary(jnp.greater_equal),
    "eq": _binary(jnp.equal),
    "ne": _binary(jnp.not_equal),
    "logical_and": _binary(jnp.logical_and),
    "logical_or": _binary(jnp.logical_or),
    "bitwise_and": _binary(jnp.logical_and),
    "bitwise_or": _binary(jnp.logical_or),
    "__and__": _binary(jnp.logical_and),
    "__or__": _binary(jnp.logical_or),
    "__xor__": _binary(jnp.logical_xor),
    "logical_xor": _binary(jnp.logical_xor),
    "logaddexp": _binary(jnp.logaddexp),
    "xlogy": _binary(jax.scipy.special.xlogy),
    "pow": _pow,
    "neg": lambda x, **_: jnp.negative(x),
    "exp": lambda x, **_: jnp.exp(x),
    "expm1": lambda x, **_: jnp.expm1(x),
    "log": lambda x, **_: jnp.log(x),
    "log1p": lambda x, **_: jnp.log1p(x),
    "log2": lambda x, **_: jnp.log2(x),
    "sqrt": lambda x, **_: jnp.sqrt(x),
    "rsqrt": lambda x, **_: jax.lax.rsqrt(jnp.asarray(x, jnp.float64)),
    "reciprocal": lambda x, **_: 1.0 / jnp.asarray(x),
    "square": lambda x, **_: jnp.square(x),
    "abs": lambda x, **_: jnp.abs(x),
    "sign": lambda x, **_: jnp.sign(x),
    "sigmoid": lambda x, **_: jax.nn.sigmoid(x),
    "logsigmoid": lambda x, **_: jax.nn.log_sigmoid(x),
    "log_sigmoid": lambda x, **_: jax.nn.log_sigmoid(x),
    "elu": _elu,
    "cumsum": _cumsum,
    "nan_to_num": lambda x, nan=0.0, posinf=None, neginf=None, **_: jnp.nan_to_num(
        x, nan=nan, posinf=posinf, neginf=neginf
    ),
    "nll_loss": _nll_loss,
    "nll_loss_nd": _nll_loss,
    "nll_loss_forward": lambda *a, **k: (_nll_loss(*a, **k), None),
    "index_put": _index_put,
    "index_put_": _index_put,
    "masked_fill_": lambda x, mask, value, **_: _where(mask, value, x),
    "fill_": lambda x, value, **_: jnp.full(jnp.shape(x), value, jnp.asarray(x).dtype),
    "zero_": lambda x, **_: jnp.zeros_like(x),
    "log_sigmoid_forward": lambda x, **_: jax.nn.log_sigmoid(x),
    "tanh": lambda x, **_: jnp.tanh(x),
    "cosh": lambda x, **_: jnp.cosh(x),
    "relu": lambda x, **_: jnp.maximum(x, 0.0),
    "softplus": _softplus,
    "logical_not": lambda x, **_: jnp.logical_not(x),
    "bitwise_not": lambda x, **_: jnp.logical_not(x),
    "clamp": _clamp,
    "clip": _clamp,
    "clamp_min": lambda x, lo, **_: _clamp(x, lo, None),
    "clamp_max": lambda x, hi, **_: _clamp(x, None, hi),
    "where": _where,
    "masked_fill": lambda x, mask, value, **_: _where(mask, value, x),
    "sum": _reduce(jnp.sum),
    "mean": _reduce(jnp.mean),
    "prod": _reduce(jnp.prod),
    "amax": _reduce(jnp.max),
    "amin": _reduce(jnp.min),
    "logsumexp": lambda x, dim, keepdim=False, **_: jax.nn.logsumexp(
        x, axis=_axes(dim, jnp.ndim(x)), keepdims=keepdim
    ),
    "log_softmax": _softmax(jax.nn.log_softmax),
    "_log_softmax": _softmax(jax.nn.log_softmax),
    "softmax": _softmax(jax.nn.softmax),
    "_softmax": _softmax(jax.nn.softmax),
    "cross_entropy_loss": _cross_entropy,
    "select": _select,
    "slice": _slice,
    "index": _index,
    "gather": _gather,
    "take_along_dim": lambda x, i, dim=None, **_: _gather(x, dim, i),
    "view": _reshape,
    "reshape": _reshape,
    "_unsafe_view": _reshape,
    "flatten": lambda x, *a, **_: jnp.reshape(x, (-1,)),
    "expand": _expand,
    "expand_as": lambda x, other, **_: jnp.broadcast_to(x, jnp.shape(other)),
    "broadcast_to": _expand,
    "unsqueeze": lambda x, dim, **_: jnp.expand_dims(x, dim % (jnp.ndim(x) + 1)),
    "squeeze": _squeeze,
    "t": lambda x, **_: jnp.transpose(x),
    "permute": lambda x, dims, **_: jnp.transpose(x, dims),
    "transpose": lambda x, a, b, **_: jnp.swapaxes(x, a, b),
    # concatenate of expanded arrays: jnp.stack is a primitive the bridge lacks
    "stack": lambda xs, dim=0, **_: jnp.concatenate(
        [jnp.expand_dims(x, dim) for x in xs], axis=dim
    ),
    "cat": lambda xs, dim=0, **_: jnp.concatenate(xs, axis=dim),
    "full": _full,
    "scalar_tensor": lambda v, *, dtype=None, **_: jnp.asarray(
        v, dtype=_dtype(dtype) or jnp.float64
    ),
    "zeros": lambda size, *, dtype=None, **_: jnp.zeros(
        tuple(size), dtype=_dtype(dtype) or jnp.float64
    ),
    "ones": lambda size, *, dtype=None, **_: jnp.ones(
        tuple(size), dtype=_dtype(dtype) or jnp.float64
    ),
    "zeros_like": _like(0),
    "ones_like": _like(1),
    "full_like": _like(None),
    "arange": _arange,
    "dot": lambda a, b, **_: jnp.dot(a, b),
    "matmul": lambda a, b, **_: jnp.matmul(a, b),
    "mm": lambda a, b, **_: jnp.matmul(a, b),
}


def _cast(x, dtype, name: str):
    """A dtype conversion: exact ones are kept (bool/int -> float64); a float
    cast below float64 on a value the loss needs is refused."""
    target = dtype
    x = jnp.asarray(x)
    if target.is_floating_point:
        if x.dtype == jnp.float64 and target.name != "torch.float64":
            raise Untranslatable(
                f"a cast to {target} (aten.{name}): theorycheck checks losses in "
                "float64; remove the cast"
            )
        return x.astype(jnp.float64)
    return x.astype(_dtype(target))


class Translation:
    """A JAX function of the graph's inputs (in placeholder order).

    Built from the graph (torch needed), it keeps only torch-free steps: it pickles,
    and runs where torch is not imported (the structure stage's worker process).

    Attributes:
        constructs: what the traced code used that changes gradients (``detach``,
            ``no_grad``, ``.item()``), for the gate's messages.
    """

    def __init__(self, gm, *, naive: bool = False) -> None:
        import torch

        self.naive = naive
        nodes = list(gm.graph.nodes)
        output = next(n for n in nodes if n.op == "output")
        needed = _needed(output)
        self.constructs: list[str] = []
        _check(nodes, needed, self.constructs)
        index = {n: i for i, n in enumerate(nodes)}
        self.steps: list[tuple] = []
        for node in nodes:
            if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
                self.steps.append(("grad", bool(node.args[0])))
            elif node.op == "placeholder":  # every input, used or not (order)
                self.steps.append(("in", index[node]))
            elif node not in needed:
                continue
            elif node.op == "output":
                self.steps.append(("out", _template(node.args[0], index)))
            elif node.op == "get_attr":
                const = _constant(getattr(gm, node.target))
                self.steps.append(("const", index[node], const))
            else:
                name = (
                    "getitem"
                    if node.target is operator.getitem
                    else op_name(node.target)
                )
                args = _template(list(node.args), index)
                kwargs = {
                    k: _template(v, index)
                    for k, v in node.kwargs.items()
                    if k not in ("device", "layout", "pin_memory", "memory_format")
                }
                self.steps.append(("op", index[node], name, args, kwargs))

    def __call__(self, *inputs):
        return self._run(inputs, None)

    def switches(self, *inputs) -> jax.Array:
        """The side of every switch (clamp, maximum/minimum, where, comparison,
        abs/sign/relu) at one point, as one flat boolean vector (the gate's probe
        of clip boundaries)."""
        probe: list = []
        self._run(inputs, probe)
        if not probe:
            return jnp.zeros((0,), dtype=bool)
        return jnp.concatenate([jnp.ravel(p) for p in probe])

    def _run(self, inputs, probe):
        """Evaluates the steps. A value computed while gradients are disabled is kept
        as it is inside the ``no_grad`` block and frozen (``stop_gradient``) once,
        where a step with gradients enabled (or the output) reads it: the same
        function and gradient as freezing every step, with one frozen value per
        quantity that leaves the block, as a JAX loss writes
        ``stop_gradient(clip(ratio, l, u))``."""
        env: dict = {}
        cold: set = set()  # the steps computed under no_grad (not naive)
        made: set = set()  # detach/.item() steps with gradients on: frozen already
        frozen: dict = {}  # their stop_gradient, made on first read with grad
        feed = iter(inputs)
        grad = True

        def read(template):
            if grad or self.naive:
                return _resolve(template, env, cold, frozen)
            return _resolve(template, env)

        for step in self.steps:
            kind = step[0]
            if kind == "grad":
                grad = step[1]
            elif kind == "in":
                env[step[1]] = next(feed)
            elif kind == "const":
                env[step[1]] = np.asarray(step[2])  # NumPy: a known constant
            elif kind == "out":
                grad = True
                return _first(read(step[1]))
            else:
                _, i, name, args_t, kwargs_t = step
                args = read(args_t)
                kwargs = {k: read(v) for k, v in kwargs_t.items()}
                source = args_t[0] if args_t else None
                again = (
                    name in _FREEZERS
                    and isinstance(source, Ref)
                    and (source.index in cold or source.index in made)
                )
                # detach/.item() of a value already frozen: no second stop_gradient
                value = self._apply(name, args, kwargs, cold=not grad or again)
                if probe is not None:
                    probe += _sides(name, args, value)
                if not grad and not self.naive:
                    cold.add(i)
                elif name in _FREEZERS and not self.naive:
                    made.add(i)
                env[i] = value
        raise Untranslatable("a graph without an output")

    def _apply(self, name, args, kwargs, *, cold: bool = False):
        """One operation; ``cold``: gradients are disabled here, so ``detach`` and
        ``.item()`` need no freezing of their own (the block's result is frozen
        where it is read with gradients)."""
        # a constant (not a tracer: torch.tensor([k]) in the code) needs no freezing
        keep = self.naive or cold or not isinstance(args[0], jax.core.Tracer)
        if name in ("detach", "detach_"):
            return args[0] if keep else jax.lax.stop_gradient(args[0])
        if name in ("item", "_local_scalar_dense"):
            x = jnp.reshape(jnp.asarray(args[0]), ())
            return x if keep else jax.lax.stop_gradient(x)
        if name in _IDENTITY:
            return args[0]
        if name in _NOOPS:
            return None
        if name in ("to", "_to_copy", "type_as", "_to_dtype"):
            return _convert(name, args, kwargs)
        if name in ("max", "min"):
            return _max_min(name, args)
        if name == "getitem":
            return args[0][args[1]]
        handler = _OPS.get(name)
        if handler is None:
            raise Untranslatable(f"the operation aten.{name} (no translation)")
        return handler(*args, **kwargs)


def _needed(output) -> set:
    need, stack = set(), [output]
    while stack:
        node = stack.pop()
        if node in need:
            continue
        need.add(node)
        stack.extend(node.all_input_nodes)
    return need


def _check(nodes, needed, constructs: list[str]) -> None:
    """Refusals that do not need values: in-place, randomness, devices."""
    import torch

    grad = True
    for node in nodes:
        if node.op != "call_function":
            continue
        if node.target is torch._C._set_grad_enabled:
            grad = bool(node.args[0])
            continue
        name = op_name(node.target)
        schema = getattr(node.target, "_schema", None)
        mutable = schema is not None and schema.is_mutable
        fresh = name == "detach_" and op_name(
            getattr(node.args[0], "target", None)
        ) in ("lift_fresh_copy", "lift_fresh")
        if mutable and not fresh and not _functional_write(node, name):
            raise Untranslatable(f"an in-place update (aten.{name})")
        if node not in needed:
            continue
        if name in RANDOM_OPS:
            raise Untranslatable(f"randomness (aten.{name})")
        device = getattr(node.meta.get("val"), "device", None)
        if device is not None and device.type != "cpu":
            raise Untranslatable(f"a tensor on device {device} (aten.{name})")
        found = {"detach": "detach", "detach_": "detach", "item": ".item()"}
        found["_local_scalar_dense"] = ".item()"
        for construct in (found.get(name), None if grad else "torch.no_grad()"):
            if construct is not None and construct not in constructs:
                constructs.append(construct)


#: in-place writes translated as their functional form (:func:`_functional_write`).
IN_PLACE = frozenset("index_put_ masked_fill_ fill_ zero_".split())


def _aliases(node) -> bool:
    """Whether the node's value may share storage with another value: an input,
    a constant, a view or ``detach`` (its schema's result aliases an argument), or
    anything without an ATen schema."""
    if node.op != "call_function":
        return True
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return True
    return any(r.alias_info is not None for r in schema.returns)


def _functional_write(node, name: str) -> bool:
    """An in-place write that the functional form computes exactly: ``x[mask] = v``
    (``aten.index_put_``), ``masked_fill_``, ``fill_``, ``zero_`` on a tensor that
    the code made itself (not an input, a view or a detached alias) and of which
    no view was taken, with every other reader of ``x`` before the write: later
    code reads the write's result (the trace records it so), and nothing can read
    ``x``'s storage under another name. Typical: a no-grad mask edited in place,
    ``mask[(A > 0) & (r > 1 + d)] = 0``."""
    if name not in IN_PLACE or not node.args:
        return False
    target = node.args[0]
    if not hasattr(target, "users") or _aliases(target):
        return False
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    for user in target.users:
        if user is node:
            continue
        if _aliases(user) or order[user] > order[node]:
            return False
    return True


def _template(a, index):
    """An argument with its nodes as :class:`Ref` and torch dtypes as
    :class:`DType` (devices and layouts dropped)."""
    import torch

    if isinstance(a, torch.fx.Node):
        return Ref(index[a])
    if isinstance(a, (list, tuple)):  # plain types (fx's immutable lists need torch)
        kind = list if isinstance(a, list) else tuple
        return kind(_template(x, index) for x in a)
    if isinstance(a, torch.dtype):
        if a == torch.bool:
            kind = "b"
        elif a.is_floating_point:
            kind = "f"
        else:
            kind = "c" if a.is_complex else "i"
        return DType(str(a), kind)
    if isinstance(a, torch.device | torch.layout | torch.memory_format):
        return None
    return a


def _resolve(a, env, cold=(), frozen=None):
    """A template's value; a step in ``cold`` (computed under ``no_grad``) is read
    as its ``stop_gradient``, made once and kept in ``frozen``."""
    if isinstance(a, Ref):
        if a.index not in cold:
            return env[a.index]
        if a.index not in frozen:
            frozen[a.index] = jax.tree_util.tree_map(
                lambda x: (
                    jax.lax.stop_gradient(x) if isinstance(x, jax.core.Tracer) else x
                ),
                env[a.index],
            )
        return frozen[a.index]
    if isinstance(a, (list, tuple)):
        return type(a)(_resolve(x, env, cold, frozen) for x in a)
    return a


def _convert(name: str, args, kwargs):
    dtype = kwargs.get("dtype")
    for a in args[1:]:
        if isinstance(a, DType):
            dtype = a
    if name == "type_as" or dtype is None:
        return args[0]
    return _cast(args[0], dtype, name)


def _max_min(name: str, args):
    """``max(x)``, ``max(a, b)`` (elementwise) and ``max(x, dim)`` (values,
    indices)."""
    if len(args) == 1:
        return (jnp.max if name == "max" else jnp.min)(args[0])
    if len(args) == 2 and _is_array(args[1]):
        fn = jnp.maximum if name == "max" else jnp.minimum
        return fn(*_bc(args[0], args[1]))
    fn = jnp.max if name == "max" else jnp.min
    arg = jnp.argmax if name == "max" else jnp.argmin
    keep = len(args) > 2 and args[2]
    return (
        fn(args[0], axis=args[1], keepdims=keep),
        arg(args[0], axis=args[1], keepdims=keep),
    )


_COMPARISONS = frozenset("lt le gt ge eq ne".split())


def _sides(name: str, args, value) -> list:
    """Boolean arrays: which side of its switch each element is on."""
    if name in _COMPARISONS or name in ("where", "masked_fill"):
        return [
            jnp.asarray(
                value if name in _COMPARISONS else args[0 if name == "where" else 1],
                bool,
            )
        ]
    if name in ("clamp", "clip", "clamp_min", "clamp_max"):
        x = jnp.asarray(args[0])
        return [jnp.asarray(x != value)]
    if name in ("maximum", "minimum", "max", "min", "fmax", "fmin") and len(args) == 2:
        a, b = _bc(jnp.asarray(args[0]), args[1])
        return [jnp.asarray(a > b)]
    if name in ("abs", "sign", "relu"):
        return [jnp.asarray(args[0]) > 0]
    return []


def _first(out):
    while isinstance(out, (list, tuple)):
        out = out[0]
    return out


def _constant(t) -> np.ndarray:
    arr = t.detach().cpu().numpy()
    if arr.dtype.kind == "f":
        return arr.astype(np.float64)
    return arr
