r"""Numeric stage (JAX, float64): adversarial search for negative logit curvature.

Pluggable: :func:`search` is the default step. It samples logits in several regimes
(z = 0, small and moderate logits, peaked ones, and near the simplex boundary where some
probabilities are 1e-6 and logits reach ±30), computes :math:`\lambda_{\min}` of the
logit Hessian (dense and vmapped for small V), then descends the Rayleigh quotient
:math:`u^\top H(z) u` over the logits from the most negative starts. Candidates are
ranked by curvature relative to the Hessian's scale at their point and re-checked in
that order until one is confirmed. Above ``V = 64`` (vocabulary scale, up to 151936) it
calls :func:`theorycheck.numeric.search_negative_curvature` (Lanczos on Hessian-vector
products, never a ``V x V`` matrix).

Every hit, and every counterexample of the other stages (:func:`recheck`), is re-checked
in float64 by two routes: a Hessian-vector product (autodiff) and a Richardson second
difference of the loss with its ``stop_gradient`` values frozen at the point
(:func:`theorycheck.numeric.verify_curvature`). Finite differences of the *gradient*
would be wrong for detached weights (CISPO, GLM-5, DPPO): the gradient at
:math:`z + hu` re-evaluates the frozen quantity at the moved point.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from theorycheck.numeric import search_negative_curvature, verify_curvature

__all__ = [
    "DENSE_SEARCH_MAX_VOCAB",
    "MAX_CHECKS",
    "Recheck",
    "SearchOutcome",
    "recheck",
    "search",
    "search_tokens",
]

#: Largest V for the dense vmapped search; above it the Lanczos search runs.
DENSE_SEARCH_MAX_VOCAB = 64
#: Vocabulary-scale search: starts per regime (at most) and descent steps per start.
LARGE_MAX_STARTS = 4
LARGE_STEPS = 10
#: Dense search: candidates re-checked (most negative relative curvature first).
MAX_CHECKS = 12
#: XLA options of the search's two programs (the batched Hessian and the descent).
#: Their compilation dominates a search on small V (a third derivative inside a
#: 40-step scan), while running them takes milliseconds; XLA's backend optimisation
#: level 0 compiles them about a third faster. Only where to look moves with it: a
#: candidate counts only after :func:`recheck`, which is compiled as before.
SEARCH_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Result of a search at one V.

    Attributes:
        found: a verified negative curvature.
        num_samples: number of logit vectors evaluated.
        logits, direction, curvature: the counterexample (float64) when ``found``.
        curvature_fd: the same curvature by a frozen second difference (second
            route).
    """

    found: bool
    num_samples: int
    logits: np.ndarray | None = None
    direction: np.ndarray | None = None
    curvature: float | None = None
    curvature_fd: float | None = None


def _bind(loss, sampled, inputs):
    return lambda z: loss(z, sampled, **inputs)


@dataclasses.dataclass(frozen=True)
class Recheck:
    """Float64 re-check of ``uᵀ H u`` at one point (values for ``u`` as given).

    Attributes:
        autodiff: by a Hessian-vector product.
        frozen_fd: by a second difference with ``stop_gradient`` values frozen (None
            when a ``stop_gradient`` sits inside control flow and cannot be frozen).
        confirmed: both negative beyond the finite-difference noise, agreeing to 1%.
    """

    autodiff: float
    frozen_fd: float | None
    confirmed: bool


def recheck(loss, logits, sampled, inputs, direction) -> Recheck:
    """``uᵀ H u`` by autodiff and by the frozen second difference (float64)."""
    u = np.asarray(direction, np.float64)
    norm2 = float(u @ u)
    c_hvp, c_fd, ok = verify_curvature(
        loss, np.asarray(logits, np.float64), sampled, u, inputs=inputs
    )
    return Recheck(c_hvp * norm2, None if c_fd is None else c_fd * norm2, bool(ok))


def _starts(seed, vocab, sampled, num):
    """``num`` start logits: z = 0, small and moderate logits, peaked ones, the simplex
    boundary (logits up to ±30: probabilities 1e-6 .. 1e-26), and a sweep of z_k."""
    rng = np.random.default_rng(seed)
    n = max(num // 4, 2)
    zero = np.zeros((1, vocab))
    small = 0.5 * rng.standard_normal((n // 2, vocab))
    moderate = 3.0 * rng.standard_normal((n - n // 2 - 1, vocab))
    peaked = 8.0 * rng.standard_normal((n, vocab))
    boundary = rng.uniform(-30.0, 30.0, (n, vocab))
    rest = max(num - 3 * n, 1)
    sweep = rng.standard_normal((rest, vocab))
    sweep[:, sampled] = np.linspace(-30.0, 30.0, rest)
    return np.concatenate([zero, small, moderate, peaked, boundary, sweep])


def _relative(hs: np.ndarray):
    """``(lambda_min, max(1, ||H||), eigenvector)`` per Hessian (a non-finite Hessian
    gets lambda_min = +inf)."""
    finite = np.all(np.isfinite(hs), axis=(1, 2))
    vals, vecs = np.linalg.eigh(np.where(finite[:, None, None], hs, 0.0))
    lam = np.where(finite, vals[:, 0], np.inf)
    scale = np.maximum(1.0, np.max(np.abs(vals), axis=1))
    return lam, scale, vecs[:, :, 0]


def _refine_fn(f, refine_steps):
    r"""Rayleigh-quotient descent from a batch of starts; per start the best point:
    ``(lambda_min, ||H||, logits, eigenvector)`` (no second Hessian pass needed).
    ``f(z, k, arrays)``: the sampled token and the array inputs are arguments, so one
    compilation serves every ``k``.

    Step ``t`` moves ``x`` against :math:`\nabla_x\, w^\top H(x)\, w`, the
    pull-back of :math:`w w^\top` through :math:`x \mapsto H(x)`: one ``vjp`` of
    the Hessian gives both ``H(x_t)`` (whose lowest eigenvector is the next ``w``,
    and whose eigenvalues update the best point) and the step, so the Hessian is
    traced once. Iteration 0 only steps (with the start's eigenvector ``u``); the
    best point is taken over ``x_1 .. x_{refine_steps}``."""

    def run(z, u, val, scale, k, arrs):
        hess = jax.hessian(lambda x: f(x, k, arrs))

        def step(carry, t):
            x, w, best = carry
            h, pull = jax.vjp(hess, x)
            lam, s = jnp.linalg.eigh(h)
            moved = t > 0
            ok = moved & jnp.isfinite(lam[0]) & jnp.all(jnp.isfinite(lam))
            ok = ok & (lam[0] < best[0])
            w = jnp.where(moved & jnp.all(jnp.isfinite(s[:, 0])), s[:, 0], w)
            new = (lam[0], jnp.max(jnp.abs(lam)), x, s[:, 0])
            best = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, best)
            (g,) = pull(jnp.outer(w, w))
            x = jnp.clip(x - 0.5 * g / (jnp.linalg.norm(g) + 1e-30), -40.0, 40.0)
            return (x, w, best), None

        init = (z, u, (val, scale, z, u))
        steps = jnp.arange(refine_steps + 1)
        (_, _, best), _ = jax.lax.scan(step, init, steps)
        return best

    return jax.jit(
        jax.vmap(run, in_axes=(0, 0, 0, 0, None, None)),
        compiler_options=SEARCH_COMPILER_OPTIONS,
    )


def search(
    loss,
    vocab: int,
    sampled: int,
    inputs,
    *,
    seed: int = 0,
    num_starts: int = 512,
    refine_steps: int = 40,
    tol: float = 1e-9,
    max_checks: int = MAX_CHECKS,
) -> SearchOutcome:
    r"""Searches logits at ``V = vocab`` for a direction of negative curvature.

    Candidates are ranked by the curvature relative to the Hessian's scale at their
    point, :math:`\lambda_{\min} / \max(1, \lVert H\rVert_2)` (near the simplex
    boundary ``||H||`` reaches 1e19, where float64 cannot confirm what it sees), and
    re-checked in that order until one is confirmed.

    Args:
        loss: ``loss(logits, sampled, **inputs)``.
        vocab: ``V``; dense Hessians up to :data:`DENSE_SEARCH_MAX_VOCAB`, above it
            :func:`theorycheck.numeric.search_negative_curvature` (HVPs only).
        sampled: ``k``.
        inputs: numeric inputs.
        seed: seed of the start sampler.
        num_starts: sampled logit vectors, z = 0 and small logits among them (above
            ``V = 64``: starts per regime, capped at :data:`LARGE_MAX_STARTS`).
        refine_steps: Rayleigh-quotient descent steps from the 8 best starts.
        tol: a curvature counts only below ``-tol * max(1, ||H||)``, and only if
            :func:`recheck` confirms it (frozen second difference agrees).
        max_checks: how many candidates are re-checked at most.

    Returns:
        A :class:`SearchOutcome`; ``found`` only after :func:`recheck` confirms.
    """
    out = search_tokens(
        loss,
        vocab,
        {sampled: inputs},
        dynamic=False,
        seed=seed,
        num_starts=num_starts,
        refine_steps=refine_steps,
        tol=tol,
        max_checks=max_checks,
    )
    return out[sampled]


def _programs(loss, inputs, refine_steps: int, dynamic: bool, sampled: int):
    """The jitted batched Hessian and descent, with ``k`` and the array inputs as
    arguments (``dynamic``: one compilation serves every sampled token)."""
    arrays = sorted(k for k, v in inputs.items() if np.ndim(v) > 0)
    scalars = {k: v for k, v in inputs.items() if k not in arrays}

    def f(z, k, arrs):
        kk = k if dynamic else sampled
        return loss(z, kk, **scalars, **dict(zip(arrays, arrs)))

    hess = jax.jit(
        jax.vmap(jax.hessian(f), in_axes=(0, None, None)),
        compiler_options=SEARCH_COMPILER_OPTIONS,
    )
    return arrays, f, hess, _refine_fn(f, refine_steps)


#: Threads that compile the search's programs (XLA compiles without the GIL).
_COMPILERS = concurrent.futures.ThreadPoolExecutor(
    max_workers=2, thread_name_prefix="search-compile"
)


class _Prepared:
    """The two programs of one dense search (one ``V``; one ``k`` unless
    ``dynamic``), traced and lowered in the calling thread and compiled by
    :data:`_COMPILERS`: the programs of the next ``V`` compile while this one runs.

    The executables are those ``jax.jit`` would compile for the same arguments
    (same shapes and dtypes, same compiler options); only when they are compiled
    moves. A failure while tracing is kept and raised where the program is used, so
    a ``V`` that is never searched raises nothing, as before.
    """

    def __init__(self, loss, vocab, sampled, inputs, seed, num_starts, refine_steps,
                 dynamic):  # fmt: skip
        self.arrays, _, self._hess_fn, self._refine_fn = _programs(
            loss, inputs, refine_steps, dynamic, sampled
        )
        n = len(_starts(seed, vocab, sampled, num_starts))
        self._shapes = (n, min(8, n), vocab)
        self._arr_specs = [
            jax.ShapeDtypeStruct(np.shape(inputs[a]), jnp.float64) for a in self.arrays
        ]
        self._hess = self._refine = None

    def _lower(self, which: str):
        n, m, vocab = self._shapes
        f64, k = jnp.float64, jax.ShapeDtypeStruct((), jnp.int32)
        try:
            with jax.enable_x64(True):
                if which == "hess":
                    z = jax.ShapeDtypeStruct((n, vocab), f64)
                    low = self._hess_fn.lower(z, k, self._arr_specs)
                else:
                    zm = jax.ShapeDtypeStruct((m, vocab), f64)
                    vm = jax.ShapeDtypeStruct((m,), f64)
                    low = self._refine_fn.lower(zm, zm, vm, vm, k, self._arr_specs)
        except Exception as err:  # raised where the program is used
            done = concurrent.futures.Future()
            done.set_exception(err)
            return done
        return _COMPILERS.submit(low.compile)

    def start_hess(self) -> None:
        if self._hess is None:
            self._hess = self._lower("hess")

    def start_refine(self) -> None:
        if self._refine is None:
            self._refine = self._lower("refine")

    def hess(self):
        self.start_hess()
        return self._hess.result()

    def refine(self):
        self.start_refine()
        return self._refine.result()


def search_tokens(
    loss,
    vocab: int,
    inputs_by_k,
    *,
    dynamic: bool,
    seed: int = 0,
    num_starts: int = 512,
    refine_steps: int = 40,
    tol: float = 1e-9,
    max_checks: int = MAX_CHECKS,
    first: bool = False,
    then=None,
    prepared: dict | None = None,
) -> dict[int, SearchOutcome]:
    """:func:`search` at every sampled token in ``inputs_by_k`` (``k -> inputs``).

    With ``first`` the tokens after the first one with a confirmed counterexample are
    not searched.

    With ``dynamic`` (the loss takes a traced ``sampled``,
    :func:`theorycheck.convexity._genericity.one_program`) one compilation per V
    serves every ``k``; otherwise each ``k`` is compiled on its own.

    ``then``: the search that comes next, ``(vocab, inputs_by_k, seed)``, and
    ``prepared``: a dict of programs shared by the calls of one stage. While this
    search's descent compiles, the next search's programs are traced and set
    compiling into ``prepared`` (the next call, given the same dict, uses them).
    Neither changes what is searched or found.
    """
    out = {}
    if vocab > DENSE_SEARCH_MAX_VOCAB:
        starts = max(1, min(num_starts, LARGE_MAX_STARTS))
        for k, inputs in inputs_by_k.items():
            out[k] = _search_large(loss, vocab, k, inputs, seed, starts)
            if first and out[k].found:
                break
        return out
    prepared = {} if prepared is None else prepared

    def programs(v, k, inputs, s):
        key = (v, None if dynamic else k)
        if key not in prepared:
            prepared[key] = _Prepared(
                loss, v, k, inputs, s, num_starts, refine_steps, dynamic
            )
        return prepared[key]

    def ahead():
        """Sets the next search's programs compiling (its first k; with
        ``dynamic`` they serve every k)."""
        if then is None:
            return
        v, by_k, s = then
        if v > DENSE_SEARCH_MAX_VOCAB or not by_k:
            return
        k, inputs = next(iter(by_k.items()))
        nxt = programs(v, k, inputs, s)
        nxt.start_hess()
        nxt.start_refine()

    for k, inputs in inputs_by_k.items():
        compiled = programs(vocab, k, inputs, seed)
        out[k] = _dense(
            loss, compiled, vocab, k, inputs, seed, num_starts, refine_steps, tol,
            max_checks, ahead,
        )  # fmt: skip
        if first and out[k].found:
            break
    return out


def _dense(loss, compiled, vocab, sampled, inputs, seed, num_starts, refine_steps,
           tol, max_checks, ahead=None) -> SearchOutcome:  # fmt: skip
    """The starts' own candidates are re-checked first: a confirmed one ends the
    search before the descent is compiled. Otherwise the descent runs and the
    candidates of both are re-checked as before (those already re-checked are not
    repeated: the re-check is deterministic), so the search confirms a
    counterexample exactly when it did with one pool. While the descent compiles,
    ``ahead()`` sets the next search's programs compiling."""
    arrays = compiled.arrays
    with jax.enable_x64(True):
        arrs = [jnp.asarray(inputs[a], jnp.float64) for a in arrays]
        k = jnp.asarray(sampled, jnp.int32)
        zs = np.asarray(_starts(seed, vocab, sampled, num_starts), np.float64)
        hess = compiled.hess()
        lam, scale, vecs = _relative(np.asarray(hess(jnp.asarray(zs), k, arrs)))
        rel = lam / scale
    starts = [(rel[i], ("start", i), zs[i], vecs[i]) for i in range(len(zs))]
    checked = set()
    for _, key, z, u in _ranked(starts, tol)[:max_checks]:
        checked.add(key)
        check = recheck(loss, z, sampled, inputs, u)
        if check.confirmed:
            return SearchOutcome(True, len(zs), z, u, check.autodiff, check.frozen_fd)
    compiled.start_refine()
    if ahead is not None:
        ahead()
    with jax.enable_x64(True):
        order = np.argsort(rel)[:8]
        refine = compiled.refine()
        lam_r, scale_r, zs_r, vecs_r = (
            np.asarray(t)
            for t in refine(
                jnp.asarray(zs[order]),
                jnp.asarray(vecs[order]),
                jnp.asarray(lam[order]),
                jnp.asarray(scale[order]),
                k,
                arrs,
            )
        )
        rel_r = lam_r / np.maximum(1.0, scale_r)
    count = len(zs) + len(order) * refine_steps
    pool = [(rel_r[i], ("refined", i), zs_r[i], vecs_r[i]) for i in range(len(zs_r))]
    for _, key, z, u in _ranked(pool + starts, tol)[:max_checks]:
        if key in checked:
            continue  # re-checked above, not confirmed
        check = recheck(loss, z, sampled, inputs, u)
        if check.confirmed:
            return SearchOutcome(True, count, z, u, check.autodiff, check.frozen_fd)
    return SearchOutcome(False, count)


def _ranked(pool, tol):
    """Candidates below ``-tol`` relative curvature, most negative first (a stable
    sort: refined points before starts at equal values, as in one pool)."""
    return sorted((c for c in pool if c[0] < -tol), key=lambda c: c[0])


def _search_large(loss, vocab, sampled, inputs, seed, num_starts) -> SearchOutcome:
    """Vocabulary scale: the Lanczos/HVP search of :mod:`theorycheck.numeric`."""
    res = search_negative_curvature(
        loss,
        vocab,
        sampled,
        inputs=inputs,
        key=jr.key(seed),
        num_starts=num_starts,
        steps=LARGE_STEPS,
    )
    if not res.found:
        return SearchOutcome(False, res.num_samples)
    return SearchOutcome(
        True,
        res.num_samples,
        np.asarray(res.logits),
        np.asarray(res.direction),
        float(res.curvature),
        float(res.curvature_fd),
    )
