"""The jaxpr -> SymPy bridge: same values, gradients and Hessians as JAX (two
routes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given, settings

from theorycheck.bridge import (
    UnsupportedOperation,
    affine_sympy_from_jax,
    sympy_from_jax,
    to_sympy_number,
)
from theorycheck.symbolic import Frozen, logit_gradient, logit_hessian, unfreeze
from theorycheck.testing import TOLERANCE, logits

Z = sp.symbols("z0:3", real=True)


def _ppo(x, k, adv=-1.0, q=0.3, eps=0.2):
    r = jnp.exp(jax.nn.log_softmax(x)[k]) / q
    return -jnp.minimum(r * adv, jnp.clip(r, 1 - eps, 1 + eps) * adv)


def _cispo(x, k, adv=1.0, q=0.5):
    lp = jax.nn.log_softmax(x)[k]
    return -adv * jax.lax.stop_gradient(jnp.clip(jnp.exp(lp) / q, 0.5, 5.0)) * lp


FUNCTIONS = {
    "cross_entropy": lambda x, k: -jax.nn.log_softmax(x)[k],
    "softmax_sq": lambda x, k: jnp.sum(jax.nn.softmax(x) ** 2),
    "logsumexp": lambda x, k: jax.nn.logsumexp(x) - x[k],
    "softplus_pair": lambda x, k: jax.nn.softplus(x[1] - x[k]),
    "log_sigmoid": lambda x, k: -jax.nn.log_sigmoid(x[k] - x[2]),
    "logcosh": lambda x, k: jnp.mean(jnp.logaddexp(x, -x)),
    "one_hot": lambda x, k: jnp.sum(jax.nn.one_hot(k, 3) * x**2),
    "take_along": lambda x, k: jnp.take_along_axis(x, jnp.array([k]), axis=0)[0] ** 2,
    "where_relu": lambda x, k: jnp.where(x[1] > 0, x[1], 0.0) + jax.nn.relu(x[2]),
    "tanh_sigmoid": lambda x, k: jnp.tanh(x[0]) * jax.nn.sigmoid(x[1]),
    "dot": lambda x, k: x @ jnp.array([1.0, 2.0, 3.0]) + jnp.dot(x, x),
    "ppo_clip": _ppo,
    "cispo_frozen": _cispo,
}
_CACHE: dict = {}


def _symbolic(name):
    if name not in _CACHE:
        expr = sympy_from_jax(FUNCTIONS[name], Z, sampled=0)
        grad = logit_gradient(expr, Z)
        hess = logit_hessian(expr, Z)
        _CACHE[name] = (
            sp.lambdify(Z, unfreeze(expr), "numpy"),
            sp.lambdify(Z, grad, "numpy"),
            sp.lambdify(Z, hess, "numpy"),
        )
    return _CACHE[name]


def _jax(name):
    key = ("jax", name)
    if key not in _CACHE:
        f = lambda x: FUNCTIONS[name](x, 0)  # noqa: E731
        _CACHE[key] = (jax.jit(f), jax.jit(jax.grad(f)), jax.jit(jax.hessian(f)))
    return _CACHE[key]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=50)  # 13 functions x 3 derivatives: 50 points each suffice
@given(z=logits(3, max_abs=6.0))
def test_sympy_from_jax_matches_jax_value_gradient_hessian(name, z):
    # At a kink (z_i = 0 for relu/where) one-sided derivatives differ; stay off them.
    assume(name != "where_relu" or np.min(np.abs(z[1:])) > 1e-6)
    value, grad, hess = _symbolic(name)
    j_value, j_grad, j_hess = _jax(name)
    zj = jnp.asarray(z, dtype=jnp.float64)
    _, atol = TOLERANCE[np.dtype(np.float64)]
    # rtol 1e-9 (not 1e-10): SymPy's unshifted exp(z) forms lose a few ulps vs JAX's
    # max-shifted ones; Hessian entries are differences of such terms (1e-8).
    sym_v = np.asarray(value(*z), dtype=np.float64)
    np.testing.assert_allclose(sym_v, np.asarray(j_value(zj)), rtol=1e-9, atol=atol)
    np.testing.assert_allclose(
        np.asarray(grad(*z), dtype=np.float64),
        np.asarray(j_grad(zj)),
        rtol=1e-9,
        atol=1e-11,
    )
    np.testing.assert_allclose(
        np.asarray(hess(*z), dtype=np.float64),
        np.asarray(j_hess(zj)),
        rtol=1e-8,
        atol=1e-11,
    )


def test_sympy_from_jax_removes_max_shift_exactly():
    expr = sympy_from_jax(lambda x, k: -jax.nn.log_softmax(x)[k], Z, sampled=2)
    assert not expr.has(sp.Max) and not expr.has(Frozen)
    assert expr == -Z[2] + sp.log(sp.exp(Z[0]) + sp.exp(Z[1]) + sp.exp(Z[2]))


def test_sympy_from_jax_keeps_non_invariant_max():
    # max used as a feature (not a shift): it must stay, frozen.
    expr = sympy_from_jax(
        lambda x, k: x[k] * jax.lax.stop_gradient(jnp.max(x)), Z, sampled=0
    )
    assert expr.has(Frozen) and expr.has(sp.Max)


def test_sympy_from_jax_stop_gradient_is_frozen():
    expr = sympy_from_jax(_cispo, Z, sampled=0)
    assert expr.has(Frozen)
    assert all(not sp.diff(f, z) for f in expr.atoms(Frozen) for z in Z)


def test_sympy_from_jax_reads_constants_exactly():
    expr = sympy_from_jax(_ppo, Z, sampled=0)
    assert sp.Rational(4, 5) in expr.atoms(sp.Rational)  # 1 - eps = 0.8, read exactly
    assert to_sympy_number(0.2) == sp.Rational(1, 5)


def test_sympy_from_jax_binds_inputs_exactly():
    f = lambda x, k, behavior_logp: (
        -jnp.exp(jax.nn.log_softmax(x)[k] - behavior_logp[k])
    )  # noqa: E731
    blp = np.asarray(
        [sp.log(sp.Rational(1, 4))] * 2 + [sp.log(sp.Rational(1, 2))], dtype=object
    )
    expr = sympy_from_jax(f, Z, sampled=0, inputs={"behavior_logp": blp})
    assert sp.simplify(expr + 4 * sp.exp(Z[0]) / sum(sp.exp(z) for z in Z)) == 0


def test_sympy_from_jax_names_unsupported_primitive():
    with pytest.raises(UnsupportedOperation, match="sort"):
        sympy_from_jax(lambda x, k: jnp.sort(x)[-1], Z, sampled=0)


def test_sympy_from_jax_rejects_non_scalar():
    with pytest.raises(UnsupportedOperation, match="not a scalar"):
        sympy_from_jax(lambda x, k: x * 2, Z, sampled=0)


# --- affine maps of the logits -------------------------------------------------------


def _affine_cases():
    return [
        (lambda x, k: -jax.nn.log_softmax(x / 0.7)[k], (sp.Rational(10, 7),) * 3),
        (
            lambda x, k: -jax.nn.log_softmax(-2.0 * x + jnp.arange(3.0))[k],
            (sp.Integer(-2),) * 3,
        ),
    ]


@pytest.mark.parametrize("case", range(2))
def test_affine_sympy_from_jax_composes_back_to_the_loss(case):
    fn, alpha = _affine_cases()[case]
    z = sp.symbols("z0:3", real=True)
    inner, amap = affine_sympy_from_jax(fn, z, sampled=0)
    assert amap is not None and amap.alpha == alpha
    whole = sympy_from_jax(fn, z, sampled=0)
    composed = inner.xreplace(
        {zi: a * zi + b for zi, a, b in zip(z, amap.alpha, amap.beta)}
    )
    point = {zi: sp.Rational(v, 7) for zi, v in zip(z, (3, -5, 11))}
    assert abs(sp.N((composed - whole).xreplace(point), 30)) < 1e-25


def test_affine_sympy_from_jax_refuses_a_zero_scale():
    z = sp.symbols("z0:3", real=True)
    expr, amap = affine_sympy_from_jax(
        lambda x, k: -jax.nn.log_softmax(x * 0.0)[k], z, sampled=0
    )
    assert amap is None and not expr.free_symbols  # a constant loss, no map claimed


def test_a_count_of_booleans_is_an_exact_integer():
    # jnp.sum(iota >= 2) casts booleans to integers: 1 at V = 3 (was a TypeError:
    # bad operand type for unary -: 'BooleanFalse').
    z = sp.symbols("z0:3", real=True)
    expr = sympy_from_jax(lambda x, k: jnp.sum(jnp.arange(3) >= 2) * x[k], z, sampled=0)
    assert sp.simplify(expr - z[0]) == 0


def test_an_integer_cast_of_the_logits_names_the_primitive():
    z = sp.symbols("z0:3", real=True)
    with pytest.raises(UnsupportedOperation, match="convert_element_type"):
        sympy_from_jax(lambda x, k: x[k].astype(jnp.int32) * 1.0, z, sampled=0)


def test_a_failing_translation_names_its_primitive_not_sympy():
    z = sp.symbols("z0:3", real=True)
    with pytest.raises(UnsupportedOperation, match="primitive"):
        sympy_from_jax(lambda x, k: jnp.sort(x)[k], z, sampled=0)


def test_the_traced_sampled_program_translates_like_the_static_one():
    from theorycheck.convexity._genericity import one_program

    z = sp.symbols("z0:3", real=True)
    loss = lambda x, k: -jax.nn.log_softmax(x)[k]  # noqa: E731
    for k in range(3):
        a = sympy_from_jax(one_program(loss), z, sampled=k)
        b = sympy_from_jax(loss, z, sampled=k)
        assert sp.simplify(a - b) == 0


def test_a_select_on_a_condition_of_too_many_branches_is_unsupported_at_once():
    # |z_i - 1/2| for six logits: 2^6 = 64 branch combinations in one condition,
    # past MAX_SELECT_BRANCHES (SymPy's folding of such a condition ran for minutes)
    z6 = sp.symbols("z0:6", real=True)

    def loss(x, k):
        spread = jnp.sum(jnp.abs(x - 0.5))
        return jnp.where(spread > 1.0, x[k], -x[k])

    with pytest.raises(UnsupportedOperation, match="64 piecewise branches"):
        sympy_from_jax(loss, z6, sampled=0)
    # two such terms (4 combinations) still translate, and exactly
    expr = sympy_from_jax(loss, z6[:2], sampled=0)
    assert expr.subs({z6[0]: 3, z6[1]: 0}) == 3


def test_dynamic_slice_clamps_its_start_as_jax_defines_it():
    # start k + 2 = 2 with two values of three: JAX clamps the start to 1
    z = sp.symbols("z0:3", real=True)
    got = sympy_from_jax(
        lambda x, k: jnp.sum(jax.lax.dynamic_slice(x, (k + 2,), (2,)) ** 2),
        z,
        sampled=0,
    )
    assert sp.simplify(got - (z[1] ** 2 + z[2] ** 2)) == 0
    upd = sympy_from_jax(
        lambda x, k: jnp.sum(jax.lax.dynamic_update_slice(x, jnp.zeros(2), (k + 2,))),
        z,
        sampled=0,
    )
    assert upd == z[0]


def test_checkpoint_is_interpreted_through_its_body():
    z = sp.symbols("z0:3", real=True)
    got = sympy_from_jax(
        jax.checkpoint(lambda x, k: -jax.nn.log_softmax(x)[k]), z, sampled=1
    )
    assert sp.simplify(got - (-z[1] + sp.log(sum(sp.exp(t) for t in z)))) == 0


@pytest.mark.parametrize(
    "cast",
    [
        lambda v: jax.lax.reduce_precision(v, exponent_bits=8, mantissa_bits=7),
        lambda v: v.astype(jnp.bfloat16),
        lambda v: v.astype(jnp.float16),
        lambda v: v.astype(jnp.float32),
    ],
)
def test_rounding_has_no_translation(cast):
    z = sp.symbols("z0:3", real=True)
    with pytest.raises(UnsupportedOperation, match="rounds"):
        sympy_from_jax(lambda x, k: cast(-jax.nn.log_softmax(x)[k]), z, sampled=0)
