r"""Exact smallest eigenvalue of the logit Hessian of a sampled-token loss, in O(V).

For :math:`L(z) = f(\log \pi_k)` with :math:`\pi = \mathrm{softmax}(z)` and
:math:`v = e_k - \pi`, the logit Hessian is

.. math::
    H = f''\, v v^\top - f'\,(\mathrm{diag}\,\pi - \pi\pi^\top).

Split off coordinate :math:`k` (:math:`s = \pi_k`, :math:`p` = the other probabilities,
:math:`\delta_j = -f' p_j`):

.. math::
    H = \begin{pmatrix} a & b\, p^\top \\ b\, p & \mathrm{diag}(\delta) + c\, p p^\top
        \end{pmatrix},\quad
    a = f''(1-s)^2 - f' s(1-s),\ b = f' s - f''(1-s),\ c = f' + f''.

The number of eigenvalues below :math:`\lambda` is an inertia count (Sylvester's law
with two Schur complements, Haynsworth's inertia additivity), with
:math:`g(\lambda) = \sum_j p_j^2 / (\delta_j - \lambda)`:

.. math::
    \nu(\lambda) = \#\{\delta_j < \lambda\}
        + [c<0,\ 1 + c g < 0] - [c>0,\ 1 + c g \le 0]
        + \Big[a - \lambda - \frac{b^2 g}{1 + c g} < 0\Big],

and bisection on :math:`\nu` gives :math:`\lambda_{\min}` to float64 accuracy. Note that
:math:`H\mathbf 1 = 0` (shift invariance), so :math:`\lambda_{\min} \le 0` always and a
PSD Hessian has :math:`\lambda_{\min} = 0` up to rounding.

The Hessian formula is DERIVED in this project (docs/papers.md §2.5 gives the special
case
:math:`f = -\hat A e^{x}/\mu_k`, the importance-sampling surrogate; the LCO paper's text
is NOT FOUND). The inertia count is standard linear algebra.
"""

from __future__ import annotations

import numpy as np

from theorycheck._errors import BadInput

_EPS = np.finfo(np.float64).eps


def _structure(f1: float, f2: float, policy: np.ndarray, sampled: int):
    s = policy[sampled]
    rest = np.delete(policy, sampled)
    a = f2 * (1.0 - s) ** 2 - f1 * s * (1.0 - s)
    b = f1 * s - f2 * (1.0 - s)
    c = f1 + f2
    return a, b, c, -f1 * rest, rest * rest


def _count_below(lam: float, a, b, c, delta, p2) -> int:
    """Number of eigenvalues of H strictly below ``lam`` (see the module docstring)."""
    tiny = np.finfo(np.float64).tiny
    d = delta - lam
    d = np.where(d == 0.0, -tiny, d)  # an eigenvalue exactly at lam counts as below
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        g = float(np.sum(p2 / d))
        one_cg = 1.0 + c * g
        if one_cg == 0.0:
            one_cg = -tiny if c > 0 else tiny
        if np.isfinite(g):
            term = b * b * g / one_cg if b != 0.0 else 0.0
        else:  # lam at a pole: b^2 g / (1 + c g) -> b^2 / c
            term = b * b / c if c != 0.0 else b * b * g
    n = int(np.count_nonzero(d < 0))
    n += int(c < 0 and one_cg < 0) - int(c > 0 and one_cg <= 0)
    n += int(not (a - lam - term >= 0))
    return n


def _validate(f1, f2, policy, sampled) -> tuple[float, float, np.ndarray, int]:
    f1, f2 = float(f1), float(f2)
    if not (np.isfinite(f1) and np.isfinite(f2)):
        raise BadInput(f"f1 = {f1}, f2 = {f2}: the derivatives must be finite")
    p = np.asarray(policy, dtype=np.float64)
    if p.ndim != 1 or p.size < 2:
        raise BadInput(f"policy must be a 1-D vector with V >= 2; got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise BadInput("policy must be finite and nonnegative")
    if abs(float(p.sum()) - 1.0) > 1e-6:
        raise BadInput(
            f"policy must sum to 1 (within 1e-6); sums to {float(p.sum())!r}"
        )
    if not isinstance(sampled, int | np.integer) or not 0 <= int(sampled) < p.size:
        raise BadInput(f"sampled = {sampled!r} is out of range for V = {p.size}")
    return f1, f2, p, int(sampled)


def sampled_token_min_eigenvalue(f1, f2, policy, sampled: int) -> float:
    r"""Smallest eigenvalue of the logit Hessian of :math:`L = f(\log \pi_k)`, in O(V).

    :math:`H = f''\,vv^\top - f'(\mathrm{diag}\,\pi - \pi\pi^\top)`.

    Exact to float64 (bisection on an inertia count, no :math:`V\times V` matrix):

    .. math::
        \lambda_{\min}(H) = \sup\{\lambda : \nu(\lambda) = 0\},\qquad v = e_k - \pi .

    For :math:`V \ge 3` the result is :math:`\ge 0` iff :math:`f' \le 0` and
    :math:`-f' + f''(1-\pi_k)/\pi_k \ge 0` (the structure theorem proved by the formal
    engine; tested here against it).

    Args:
        f1: :math:`f'(\log \pi_k)`.
        f2: :math:`f''(\log \pi_k)`.
        policy: :math:`\pi`, shape ``[V]``, nonnegative, summing to 1 (within 1e-6).
        sampled: the sampled index :math:`k`.

    Returns:
        :math:`\lambda_{\min}(H)` as a Python float (absolute accuracy about
        :math:`\epsilon \lVert H \rVert`).

    References:
        DERIVED (docs/papers.md §2.5: logit Hessian of the IS surrogate; LCO paper text
        NOT
        FOUND). Inertia count: E. V. Haynsworth, "Determination of the inertia of a
        partitioned Hermitian matrix", Linear Algebra Appl. 1 (1968).

    Examples:
        >>> import numpy as np
        >>> pi = np.array([0.5, 0.25, 0.25])
        >>> round(sampled_token_min_eigenvalue(-1.0, 0.0, pi, 0), 12)  # cross-entropy
        0.0
        >>> sampled_token_min_eigenvalue(-2.0, -2.0, pi, 1) < 0  # IS, pi_k < 1/2
        True
    """
    f1, f2, p, k = _validate(f1, f2, policy, sampled)
    a, b, c, delta, p2 = _structure(f1, f2, p, k)
    bound = 2.0 * (abs(f1) + abs(f2)) + 1e-300  # >= ||H||_2 (||v||^2 <= 2)
    lo, hi = -bound * (1 + 1e-12) - 1e-300, bound * (1 + 1e-12) + 1e-300
    args = (a, b, c, delta, p2)
    if _count_below(hi, *args) == 0:  # every eigenvalue is >= hi: only for H = 0
        return 0.0
    floor = 1e-4 * _EPS * bound
    while hi - lo > max(2 * _EPS * max(abs(lo), abs(hi)), floor):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _count_below(mid, *args) == 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
