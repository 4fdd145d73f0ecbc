"""Eager input checks for the numeric core: bad input raises, never a silent NaN.

The checks run only on concrete arrays. Under ``jax.jit`` / ``vmap`` (traced inputs)
they are skipped, because a traced value cannot be inspected; callers that jit these
functions validate once outside (the CLI and ``token_stats`` do).
"""

from __future__ import annotations

import jax
import numpy as np

from theorycheck._errors import BadInput

#: |sum(mu) - 1| allowed for a behavior distribution, by dtype. float32 log-probs summed
#: over ~1.5e5 tokens carry ~1e-5 rounding from the engine's own normalization.
SUM_TOL = {np.dtype(np.float64): 1e-6, np.dtype(np.float32): 1e-4}


def is_concrete(*xs) -> bool:
    """True when no leaf of ``xs`` is a JAX tracer (the value can be inspected)."""
    leaves = jax.tree_util.tree_leaves(xs)
    return not any(isinstance(x, jax.core.Tracer) for x in leaves)


def _row_name(index: tuple[int, ...]) -> str:
    return "row " + ",".join(str(i) for i in index) if index else "the input"


#: rows per chunk of the eager checks: bounded temporaries at vocabulary scale.
_CHUNK_ROWS = 64


def _row_chunks(x):
    """Yields (row offset, [rows, V] chunk) of an array viewed as [-1, V]."""
    flat = np.reshape(x, (-1, np.shape(x)[-1])) if np.ndim(x) else np.reshape(x, (1, 1))
    for start in range(0, flat.shape[0], _CHUNK_ROWS):
        yield start, np.asarray(flat[start : start + _CHUNK_ROWS])


def _unflat(shape: tuple[int, ...], row: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(row, shape)) if shape else ()


def check_logits(logits) -> None:
    """Raises BadInput naming the first row of ``logits`` holding NaN or +-inf."""
    shape = np.shape(logits)
    if len(shape) < 1 or shape[-1] < 1:
        raise BadInput(f"logits must have a vocabulary axis, got shape {shape}")
    for start, x in _row_chunks(logits):
        bad = ~np.isfinite(x)
        if bad.any():
            r, t = np.argwhere(bad)[0]
            where = _unflat(shape[:-1], start + r)
            raise BadInput(f"logits contain {x[r, t]} at {_row_name(where)}, token {t}")


def check_behavior_logp(behavior_logp, *, sum_tol: float | None = None) -> None:
    """Raises BadInput if full behavior log-probs hold NaN/+inf or do not sum to 1."""
    shape = np.shape(behavior_logp)
    dtype = np.asarray(
        behavior_logp[(0,) * (len(shape) - 1)] if len(shape) > 1 else behavior_logp
    ).dtype
    tol = SUM_TOL.get(dtype, 1e-4) if sum_tol is None else sum_tol
    for start, b in _row_chunks(behavior_logp):
        bad = np.isnan(b) | (b > 1e-6)
        if bad.any():
            r, t = np.argwhere(bad)[0]
            where = _unflat(shape[:-1], start + r)
            raise BadInput(
                f"behavior_logp holds {b[r, t]} at {_row_name(where)}, token {t}: "
                "not a log-probability"
            )
        total = np.exp(b.astype(np.float64)).sum(-1)
        off = np.abs(total - 1.0) > tol
        if off.any():
            r = int(np.argwhere(off)[0][0])
            raise BadInput(
                f"behavior probabilities sum to {total[r]:.9g} at "
                f"{_row_name(_unflat(shape[:-1], start + r))} "
                f"(must be 1 within {tol:g})"
            )


def check_behavior_logp_partial(logp, *, sum_tol: float | None = None) -> None:
    """Raises BadInput for top-K behavior log-probs that are NaN/+inf or sum above 1."""
    b = np.asarray(logp)
    if np.isnan(b).any() or np.isposinf(b).any() or (b > 1e-6).any():
        where = np.argwhere(np.isnan(b) | (b > 1e-6))[0]
        raise BadInput(
            f"top-K behavior log-prob {b[tuple(where)]} at "
            f"{_row_name(tuple(where[:-1]))} is not a log-probability"
        )
    tol = SUM_TOL.get(b.dtype, 1e-4) if sum_tol is None else sum_tol
    total = np.exp(b.astype(np.float64)).sum(-1)
    if (total > 1 + tol).any():
        raise BadInput(
            f"top-K behavior probabilities sum to {float(np.max(total)):.9g} > 1"
        )


def check_sampled(sampled, batch_shape: tuple[int, ...], vocab: int) -> None:
    """Raises BadInput if ``sampled`` has the wrong shape or an index outside [0, V)."""
    k = np.asarray(sampled)
    if not np.issubdtype(k.dtype, np.integer):
        raise BadInput(f"sampled must be integer token ids, got dtype {k.dtype}")
    if k.shape != batch_shape:
        raise BadInput(
            f"sampled has shape {k.shape}, expected {batch_shape} (the logits' "
            "leading axes)"
        )
    bad = (k < 0) | (k >= vocab)
    if bad.any():
        where = tuple(np.argwhere(np.atleast_1d(bad))[0]) if k.ndim else ()
        value = int(k[where]) if k.ndim else int(k)
        raise BadInput(f"sampled {value} is out of range for V = {vocab}")


def check_same_shape(name_a: str, a, name_b: str, b) -> None:
    """Raises BadInput when two inputs that must align have different shapes."""
    sa, sb = np.shape(a), np.shape(b)
    if sa != sb:
        raise BadInput(f"{name_a} has shape {sa} but {name_b} has shape {sb}")


def check_topk(topk, vocab: int | None = None) -> None:
    """Raises BadInput for K < 1 (K above V is clamped by the callers, not an error)."""
    if topk is None or isinstance(topk, bool) or int(topk) != topk or topk < 1:
        raise BadInput(f"topk must be an integer >= 1, got {topk!r}")


def check_sampled_possible(logmu_k) -> None:
    """Raises BadInput if the behavior gave probability 0 to the sampled token."""
    m = np.asarray(logmu_k)
    bad = ~(m > -np.inf)
    if bad.any():
        where = tuple(np.argwhere(np.atleast_1d(bad))[0]) if m.ndim else ()
        raise BadInput(
            f"behavior gives the sampled token probability 0 at {_row_name(where)}: "
            "it cannot have been sampled"
        )


def check_nonnegative(name: str, value) -> None:
    """Raises BadInput if a threshold such as delta or eps is negative or not finite."""
    v = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise BadInput(f"{name} must be finite and >= 0, got {value!r}")
