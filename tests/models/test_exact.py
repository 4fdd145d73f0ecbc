"""exactly_rounded: each operation in float64, rounded once to its declared dtype.

Two routes: a NumPy program that performs the same operations in float64 and rounds
each result with ml_dtypes (the declared dtype) against the transformed JAX function;
and, for a whole model, invariances that XLA's own bfloat16 arithmetic lacks (another
vector ISA, another batch composition).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from theorycheck.models import cast_params, exactly_rounded, forward

BF16 = ml_dtypes.bfloat16


def _r(x, dtype):
    """float64 -> the declared dtype, once (round to nearest even).

    Not ``astype`` alone: ml_dtypes (like XLA's convert) takes float64 to bfloat16
    through float32, which rounds twice (``test_one_rounding_not_two``). The float64
    significand is rounded to the target's bits on the integer bit pattern first
    (normal numbers of the target only, which is what these programs produce), so
    the conversion that follows is exact.
    """
    x = np.asarray(x, np.float64)
    info = ml_dtypes.finfo(dtype)
    nmant, tiny = info.nmant, float(info.smallest_normal)
    assert np.all((x == 0) | (np.abs(x) >= tiny)) and np.all(np.isfinite(x))
    drop = np.uint64(52 - nmant)
    bits = x.view(np.uint64)
    odd = (bits >> drop) & np.uint64(1)
    bits = (bits + (np.uint64(1) << (drop - np.uint64(1))) - np.uint64(1) + odd) >> drop
    out = (bits << drop).view(np.float64).astype(dtype)
    assert np.all(out.astype(np.float64) == (bits << drop).view(np.float64))
    return out


def test_one_rounding_not_two():
    # 1 + 2^-8 + 2^-30 is just above the bfloat16 midpoint between 1 and 1 + 2^-7:
    # rounded once it is 1 + 2^-7; through float32 (1 + 2^-8, a tie, to even) it is
    # 1, which is what ml_dtypes' and XLA's float64 -> bfloat16 conversions gave with
    # jax 0.10.2 and ml_dtypes of its day (the anchor of results computed before
    # exactly_rounded rounded by reduce_precision)
    x = np.asarray([1.0, 2.0**-8, 2.0**-30], BF16)
    w = np.ones(3, BF16)
    assert float(_r(1 + 2.0**-8 + 2.0**-30, BF16)) == 1 + 2.0**-7
    got = jax.jit(exactly_rounded(lambda a, b: jnp.dot(a, b)))(x, w)
    assert got.dtype == jnp.bfloat16 and float(got) == 1 + 2.0**-7


def test_a_bfloat16_program_equals_float64_rounded_after_each_operation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7)).astype(BF16)
    w = rng.normal(size=(7, 5)).astype(BF16)
    b = rng.normal(size=(1, 5)).astype(BF16)

    def f(x, w, b):
        h = jnp.einsum("ij,jk->ik", x, w, preferred_element_type=jnp.float32)
        h = h.astype(jnp.bfloat16) * b + b  # bf16 mul, then bf16 add
        s = jnp.exp(h.astype(jnp.float32))
        return s / s.sum(axis=-1, keepdims=True)

    got = np.asarray(jax.jit(exactly_rounded(f))(x, w, b))
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    h = _r(f64(x) @ f64(w), np.float32)
    h = _r(f64(_r(f64(h.astype(BF16)) * f64(b), BF16)) + f64(b), BF16)
    s = _r(np.exp(f64(h.astype(np.float32))), np.float32)
    want = _r(f64(s) / f64(_r(f64(s).sum(-1, keepdims=True), np.float32)), np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_loops_and_branches_are_interpreted():
    def f(x):
        def body(c):
            i, y = c
            return i + 1, y * jnp.asarray(1.1, jnp.bfloat16)

        _, y = jax.lax.while_loop(lambda c: c[0] < 3, body, (0, x))
        y = jax.lax.cond(y.sum() > 0, lambda v: v + v, lambda v: v - v, y)
        return jax.lax.scan(lambda c, v: (c + v, c * v), y[0], y)

    x = np.asarray([0.3, 1.7, -0.2], BF16)
    carry, ys = jax.jit(exactly_rounded(f))(x)
    y = x.astype(np.float64)
    k = np.float64(np.asarray(1.1, BF16))
    for _ in range(3):
        y = _r(y * k, BF16).astype(np.float64)
    y = _r(y + y, BF16).astype(np.float64) if _r(y.sum(), BF16) > 0 else y * 0
    c, out = y[0], []
    for v in y:
        out.append(_r(c * v, BF16))
        c = np.float64(_r(c + v, BF16))
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(out, BF16))
    assert np.asarray(carry) == _r(c, BF16)


@pytest.fixture(scope="module")
def tiny_bf16():
    from theorycheck.rl import tiny_model

    cfg, params, _ = tiny_model()
    return cfg, params, cast_params(params, jnp.bfloat16)


def test_a_bfloat16_forward_rounds_like_a_bfloat16_engine(tiny_bf16):
    cfg, params, p16 = tiny_bf16
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (3, 9))
    mask = np.ones_like(ids)
    mask[1, :4] = 0  # left padding
    ex = np.asarray(
        jax.jit(exactly_rounded(lambda p, i, m: forward(p, cfg, i, attention_mask=m)))(
            p16, ids, mask
        )
    )
    f64 = np.asarray(
        forward(cast_params(params, jnp.float64), cfg, ids, attention_mask=mask)
    )
    xla = np.asarray(forward(p16, cfg, ids, attention_mask=mask))
    real = mask.astype(bool)
    err_exact = np.abs(ex - f64)[real].max()
    err_xla = np.abs(xla - f64)[real].max()
    # a bfloat16 engine (not float64 in disguise), as far from float64 as XLA's
    assert 1e-3 < err_exact < 5 * err_xla
    # a row scored alone is bit-identical to the same row in the padded batch
    alone = np.asarray(
        jax.jit(exactly_rounded(lambda p, i, m: forward(p, cfg, i, attention_mask=m)))(
            p16, ids[1:2, 4:], mask[1:2, 4:]
        )
    )
    np.testing.assert_array_equal(alone[0], ex[1, 4:])


_ISA_CHILD = textwrap.dedent(
    """
    import sys, jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from theorycheck.models import cast_params, exactly_rounded, forward
    from theorycheck.rl import tiny_model
    cfg, params, _ = tiny_model()
    p16 = cast_params(params, jnp.bfloat16)
    ids = np.random.default_rng(2).integers(0, cfg.vocab_size, (4, 12))
    f = lambda p, i: forward(p, cfg, i)
    np.savez(sys.argv[1], exact=np.asarray(jax.jit(exactly_rounded(f))(p16, ids)))
    """
)


def test_the_exact_pass_is_the_same_with_another_vector_isa(tmp_path):
    # the nearest this machine comes to another CPU: XLA generating SSE4.2 code
    # only (other vector widths, other summation orders in every matmul)
    out = {}
    for name, flags in (("default", ""), ("sse42", "--xla_cpu_max_isa=SSE4_2")):
        path = tmp_path / f"{name}.npz"
        env = dict(os.environ, XLA_FLAGS=flags)
        subprocess.run(
            [sys.executable, "-c", _ISA_CHILD, str(path)], check=True, env=env
        )
        out[name] = np.load(path)["exact"]
    np.testing.assert_array_equal(out["default"], out["sse42"])
