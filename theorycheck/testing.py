"""Test helpers: tolerances and hypothesis strategies shared by the whole suite, and
:func:`assert_matches_rule`, the oracle a trainer's own CI can call on its loss
functions (docs/trainers.md).

Tolerances are keyed by dtype (cf. neural-tangents' ``_DEFAULT_TOLERANCE``). A test that
needs another tolerance says why in a comment.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

#: (rtol, atol) by dtype, for closed form vs autodiff comparisons.
TOLERANCE = {
    np.dtype(np.float64): (1e-10, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
}
#: central finite differences in float64 with step ~1e-5 carry O(h^2) error.
FD_TOLERANCE = (1e-6, 1e-8)
#: sampled vs closed form (relative Frobenius error).
STAT_RTOL = 2e-2


def assert_close(
    actual, expected, *, dtype=np.float64, rtol=None, atol=None, err_msg=""
):
    """``np.testing.assert_allclose`` with the dtype's default tolerance."""
    d_rtol, d_atol = TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=d_rtol if rtol is None else rtol,
        atol=d_atol if atol is None else atol,
        err_msg=err_msg,
    )


def logits(size: int, *, max_abs: float = 20.0):
    """Strategy for a float64 logit vector of length ``size``."""
    return st.lists(
        st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False),
        min_size=size,
        max_size=size,
    ).map(lambda xs: np.asarray(xs, dtype=np.float64))


def simplex(size: int, *, min_prob: float = 1e-6):
    """Strategy for a strictly positive probability vector of length ``size``."""
    return st.lists(
        st.floats(min_prob, 1.0, allow_nan=False), min_size=size, max_size=size
    ).map(lambda xs: np.asarray(xs, dtype=np.float64) / np.sum(xs))


def directions(size: int):
    """Strategy for a nonzero direction vector of length ``size``."""
    return (
        st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=size, max_size=size)
        .map(lambda xs: np.asarray(xs, dtype=np.float64))
        .filter(lambda v: float(np.linalg.norm(v)) > 1e-3)
    )


def assert_matches_rule(fn, rule: str, **options) -> dict:
    """Asserts that a trainer's PyTorch loss function is registry rule ``rule``:
    :func:`theorycheck.torchfront.assert_matches_rule` (per token and per
    reduction, with classified differences; docs/trainers.md). The ``torch``
    extra is needed."""
    from theorycheck import torchfront

    return torchfront.assert_matches_rule(fn, rule, **options)
