"""Lanczos with full reorthogonalisation vs dense ``eigh`` (float64)."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.numeric._lanczos import lanczos_smallest
from theorycheck.testing import assert_close


def _random_symmetric(seed: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size))
    return (a + a.T) / 2.0


@jax.jit
def _lanczos_dense(a, start, tol):
    # One compiled function per matrix size, shared by the tests (64 steps at most).
    return lanczos_smallest(lambda x: a @ x, start, 64, tol=tol)


@settings(max_examples=30)  # each example is one eigh + one Lanczos run of 64 steps
@given(seed=st.integers(0, 2**31 - 1))
def test_lanczos_smallest_matches_eigh_when_krylov_space_is_full(seed):
    a = _random_symmetric(seed, 40)
    start = np.random.default_rng(seed + 1).standard_normal(40)
    res = _lanczos_dense(jnp.asarray(a), jnp.asarray(start), 1e-10)
    w, s = np.linalg.eigh(a)
    # Krylov space exhausted at 40 <= 64 steps: the Ritz value is the eigenvalue.
    assert_close(res.value, w[0], rtol=0, atol=1e-10 * np.abs(w).max())
    assert abs(abs(float(np.dot(res.vector, s[:, 0]))) - 1.0) < 1e-8
    assert int(res.num_iters) <= 40


def test_lanczos_smallest_converges_early_on_isolated_eigenvalue():
    rng = np.random.default_rng(0)
    size = 300
    diag = rng.uniform(1.0, 2.0, size)
    diag[17] = -5.0  # well separated: fast convergence
    start = jnp.asarray(rng.standard_normal(size))
    res = _lanczos_dense(jnp.diag(jnp.asarray(diag)), start, 1e-10)
    assert int(res.num_iters) < 40
    assert_close(res.value, -5.0, rtol=0, atol=1e-9)
    direct = np.linalg.norm(diag * np.asarray(res.vector) - res.value * res.vector)
    assert direct < 1e-8
    # the Lanczos residual estimate is a faithful estimate of the true residual
    assert float(res.residual_estimate) < 1e-8


def test_lanczos_smallest_ritz_value_is_upper_bound_when_truncated():
    a = _random_symmetric(3, 300)
    start = jnp.asarray(np.random.default_rng(4).standard_normal(300))
    res = _lanczos_dense(jnp.asarray(a), start, 0.0)
    assert int(res.num_iters) == 64
    assert float(res.value) >= np.linalg.eigvalsh(a)[0] - 1e-10


def test_lanczos_smallest_breakdown_gives_no_spurious_ritz_values():
    # 3 distinct eigenvalues: the Krylov space has dimension 3 and Lanczos breaks down.
    diag = jnp.asarray(np.repeat([0.5, 1.0, 3.0], [10, 10, 20]), dtype=jnp.float64)
    res = _lanczos_dense(jnp.diag(diag), jnp.ones(40, jnp.float64), 0.0)
    assert int(res.num_iters) == 3
    assert_close(res.value, 0.5, rtol=0, atol=1e-12)


def test_lanczos_smallest_projection_excludes_the_null_direction():
    # diag(p) - p p^T has the null vector 1; on its complement the minimum is positive.
    p = jnp.asarray(np.array([0.4, 0.3, 0.2, 0.1]), dtype=jnp.float64)
    h = jnp.diag(p) - jnp.outer(p, p)
    ones = jnp.ones(4, jnp.float64) / 2.0

    def project(u):
        return u - jnp.vdot(ones, u) * ones

    start = jr.normal(jr.key(0), (4,), jnp.float64)
    res = lanczos_smallest(lambda x: h @ x, start, 4, project=project)
    w = np.linalg.eigvalsh(np.asarray(h))
    assert_close(res.value, w[1], rtol=0, atol=1e-12)
    assert abs(float(jnp.sum(res.vector))) < 1e-12


def test_lanczos_smallest_rejects_zero_iterations():
    with pytest.raises(ValueError, match="num_iters = 0"):
        lanczos_smallest(lambda x: x, jnp.ones(3), 0)
