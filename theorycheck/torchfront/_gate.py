r"""The gate: a translation is used only if it computes what torch computes.

At every gate point :math:`x` (logits or log-probabilities, with the other inputs),
the translated JAX function and the user's torch function (eager, torch autograd) must
agree in float64:

.. math::
    |f_{jax}(x) - f_{torch}(x)| \le 10^{-9}(1 + |f_{torch}(x)|), \qquad
    \|\nabla f_{jax}(x) - \nabla f_{torch}(x)\|_\infty \le 10^{-8}
    (1 + \|\nabla f_{torch}(x)\|_\infty).

The points are lines through the input space (the sampled token's logit or
log-probability swept over ``[-40, 40]``, with both signs of the advantage) and random
points; wherever a switch of the translation (a clamp, ``maximum``/``minimum``,
``where``, a comparison, ``abs``) changes side between two neighbouring points of a
line, the boundary is located by bisection and the points just below and above it
are added, so every boundary the lines cross is tested on both sides. torch is also
evaluated twice at the first points: a value that changes is randomness. A
disagreement is a :class:`~theorycheck._errors.BadInput` of one line naming the
constructs of the code that change gradients (``detach``, ``torch.no_grad()``,
``.item()``), never a verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

from theorycheck._errors import BadInput

VALUE_RTOL = 1e-9
GRAD_RTOL = 1e-8
#: the sweep of each line: dense near 0, out to +-40 (past the +-20 log-ratio guard).
SWEEP = np.concatenate(
    [
        -np.geomspace(40, 0.02, 13),
        np.linspace(-0.5, 0.5, 15),
        np.geomspace(0.02, 40, 13),
    ]
)


@dataclasses.dataclass(frozen=True)
class GateReport:
    """What the gate compared: ``points`` in all, ``boundaries`` located, each
    tested on both sides."""

    points: int
    boundaries: int
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        return (
            f"value and gradient equal torch autograd in float64 at {self.points} "
            f"points, both sides of {self.boundaries} switch boundaries"
        )


#: the gate reports of this process (one per translated program), read by
#: :func:`gate_summary` for the check's output; :func:`clear_reports` empties it.
_REPORTS: list[GateReport] = []


def record(report: GateReport) -> None:
    """Keeps ``report`` for :func:`gate_summary`."""
    _REPORTS.append(report)


def reports() -> tuple[GateReport, ...]:
    """The reports kept so far in this process."""
    return tuple(_REPORTS)


def clear_reports() -> None:
    """Forgets the reports kept so far (a new check)."""
    _REPORTS.clear()


def gate_summary() -> str | None:
    """One line for every program the gate passed in this process (``None``: no
    PyTorch loss was translated)."""
    if not _REPORTS:
        return None
    points = sum(r.points for r in _REPORTS)
    boundaries = sum(r.boundaries for r in _REPORTS)
    notes = sorted({n for r in _REPORTS for n in r.notes})
    return (
        f"{len(_REPORTS)} translated program(s): value and gradient equal torch "
        f"autograd in float64 at {points} points, both sides of {boundaries} switch "
        "boundaries" + "".join(f"; {n}" for n in notes)
    )


def _on_line(line, ts: np.ndarray) -> list[np.ndarray]:
    """The stacked inputs at ``base + t * direction`` for every ``t`` in ``ts``."""
    base, direction = line
    return [
        np.asarray(b)[None]
        + ts.reshape((-1,) + (1,) * np.ndim(b)) * np.asarray(d)[None]
        for b, d in zip(base, direction)
    ]


def boundary_points(translation, lines: Sequence) -> tuple[list, int]:
    """Points of each line, plus both sides of every switch boundary it crosses.

    Args:
        translation: has ``switches(*inputs)``, the side of every switch.
        lines: ``(base, direction)`` pairs, each a list of arrays (one per input).

    Returns:
        ``(points, boundaries)``: points as tuples of arrays, and how many
        boundaries were located.
    """
    sides = jax.jit(jax.vmap(translation.switches))
    n_lines, n = len(lines), len(SWEEP)

    def at(ts: np.ndarray) -> np.ndarray:  # ts: (lines, m) -> sides (lines, m, k)
        with jax.enable_x64(True):
            out = np.asarray(sides(*_stack(lines, ts)))
        return out.reshape(n_lines, ts.shape[1], -1)

    grid = at(np.tile(SWEEP, (n_lines, 1)))
    flips = np.any(grid[:, 1:] != grid[:, :-1], axis=2)
    lo, hi = np.tile(SWEEP[:-1], (n_lines, 1)), np.tile(SWEEP[1:], (n_lines, 1))
    for _ in range(40):  # every interval of every line at once: one batch a step
        mid = 0.5 * (lo + hi)
        same = np.all(at(mid) == grid[:, :-1], axis=2)
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    points = []
    for i, line in enumerate(lines):
        ts = [SWEEP]
        for j in np.flatnonzero(flips[i]):
            step = 1e-6 * max(1.0, abs(lo[i, j]))
            ts.append(np.array([lo[i, j] - step, hi[i, j] + step]))
        stacked = _on_line(line, np.concatenate(ts))
        points += [tuple(x[m] for x in stacked) for m in range(len(stacked[0]))]
    assert n == grid.shape[1]
    return points, int(flips.sum())


def _stack(lines, ts: np.ndarray) -> list[np.ndarray]:
    """The inputs at ``ts[i]`` on line ``i``, all lines in one batch."""
    parts = [_on_line(line, ts[i]) for i, line in enumerate(lines)]
    return [np.concatenate([p[j] for p in parts]) for j in range(len(parts[0]))]


def _torch_value_grad(fn: Callable, inputs, wrt: int):
    from theorycheck.torchfront._trace import float64_default

    with float64_default():
        return _value_grad(fn, inputs, wrt)


def _value_grad(fn: Callable, inputs, wrt: int):
    tensors = [torch.tensor(np.asarray(x), dtype=torch.float64) for x in inputs]
    tensors[wrt].requires_grad_(True)
    out = fn(*tensors)
    if not out.requires_grad:
        return float(out.detach()), np.zeros(np.shape(inputs[wrt]))
    (grad,) = torch.autograd.grad(out, tensors[wrt], allow_unused=True)
    grad = np.zeros(np.shape(inputs[wrt])) if grad is None else grad.numpy()
    return float(out.detach()), grad


def _close(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb):
        return False
    if not fa.any():
        return True
    scale = 1.0 + np.max(np.abs(b[fb]))
    return bool(np.max(np.abs(a[fa] - b[fb])) <= rtol * scale)


def _fmt(x) -> str:
    return np.array2string(np.asarray(x, np.float64), precision=6, separator=", ")


def _refuse(name: str, what: str, point, ours, theirs, constructs, labels) -> None:
    used = (
        f"the code uses {', '.join(constructs)}, which the translation does not "
        "reproduce here"
        if constructs
        else "a construct the translation does not reproduce (Python-side state or "
        "randomness, an operation on a value torch does not track)"
    )
    where = ", ".join(f"{k} {_fmt(v)}" for k, v in zip(labels, point))
    raise BadInput(
        f"{name}: refused by the gate: the translation's {what} differs from torch "
        f"autograd's at {where} (translation {_fmt(ours)}, torch {_fmt(theirs)}); "
        f"{used}"
    )


def gate(
    name: str,
    translation,
    reference: Callable,
    points: Sequence[Sequence[np.ndarray]],
    *,
    wrt: int,
    labels: Sequence[str],
    boundaries: int,
) -> GateReport:
    """Compares the translation with torch autograd at ``points``.

    Args:
        name: the loss, for messages.
        translation: the JAX function of the graph's inputs (a ``Translation``).
        reference: the torch function of the same inputs (tensors -> loss).
        points: tuples of input arrays.
        wrt: the input the gradient is taken with respect to.
        labels: the inputs' names, for messages.
        boundaries: how many switch boundaries the points straddle.

    Returns:
        A :class:`GateReport`.

    Raises:
        BadInput: a value or gradient that differs, torch values that change between
            two calls (randomness), or too few points where both are finite.
    """

    def jax_value(*xs):
        return translation(*xs)

    vg = jax.jit(jax.vmap(jax.value_and_grad(jax_value, argnums=wrt)))
    stacked = [
        jnp.asarray(np.stack([p[i] for p in points])) for i in range(len(labels))
    ]
    with jax.enable_x64(True):
        values, grads = vg(*stacked)
    values, grads = np.asarray(values), np.asarray(grads)
    finite = 0
    for i, point in enumerate(points):
        v_t, g_t = _torch_value_grad(reference, point, wrt)
        if i < 8:
            v_again, _ = _torch_value_grad(reference, point, wrt)
            if not _close(v_again, v_t, 0.0):
                raise BadInput(
                    f"{name}: refused by the gate: torch's own value changes between "
                    f"two calls at the same point ({v_t!r}, then {v_again!r}): "
                    "randomness or state"
                )
        if not _close(values[i], v_t, VALUE_RTOL):
            _refuse(name, "value", point, values[i], v_t, [], labels)
        if not _close(grads[i], g_t, GRAD_RTOL):
            _refuse(
                name, "gradient", point, grads[i], g_t, translation.constructs, labels
            )
        finite += bool(np.isfinite(v_t))
    if finite < len(points) // 2:
        raise BadInput(
            f"{name}: refused by the gate: the loss is finite at only {finite} of "
            f"{len(points)} test points"
        )
    return GateReport(len(points), boundaries)
