"""The shared jaxpr walker: interpretation, nested bodies, and the affine prefix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck import _jaxpr


def _jaxpr_of(fn, vocab=3):
    return jax.make_jaxpr(fn)(jnp.zeros(vocab, jnp.float64)).jaxpr


def test_interpret_matches_jax_through_nested_calls():
    def fn(z):
        return jnp.sum(jax.nn.log_softmax(z / 0.7) ** 2) + jax.nn.logsumexp(z)

    closed = jax.make_jaxpr(fn)(jnp.zeros(4, jnp.float64))

    def rule(eqn, ins):
        sub = _jaxpr.sub_jaxpr(eqn)
        if sub is not None:
            return _jaxpr.interpret(sub[0], sub[1], ins, rule)
        return eqn.primitive.bind(*ins, **eqn.params)

    z = jnp.asarray([0.3, -1.0, 2.0, 0.5])
    (out,) = _jaxpr.interpret(closed.jaxpr, closed.consts, [z], rule)
    np.testing.assert_allclose(out, fn(z), rtol=1e-14)


def test_has_primitive_sees_nested_stop_gradient():
    assert _jaxpr.has_primitive(_jaxpr_of(jax.nn.log_softmax), "stop_gradient")
    assert not _jaxpr.has_primitive(_jaxpr_of(lambda z: z * 2.0), "stop_gradient")


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: -jax.nn.log_softmax(z / 0.7)[0],
        lambda z: -jax.nn.log_softmax(2.0 * z + jnp.arange(3.0))[0],
        lambda z: jnp.sum(jnp.exp(-(z - 1.0))),
    ],
)
def test_affine_prefix_found(fn):
    assert _jaxpr.affine_prefix(_jaxpr_of(fn)) is not None


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: -jax.nn.log_softmax(z)[0],  # no map at all
        lambda z: -jax.nn.log_softmax(z / 0.7)[0] + z[1],  # z used outside the map
        lambda z: jnp.sum(z * z),  # not affine
        lambda z: jnp.sum(1.0 / z),  # z in the denominator
        lambda z: jnp.sum(z / jax.lax.stop_gradient(jnp.max(z))),  # scale depends on z
    ],
)
def test_affine_prefix_refused(fn):
    assert _jaxpr.affine_prefix(_jaxpr_of(fn)) is None
