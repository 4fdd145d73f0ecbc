"""One program for every V: the jaxpr comparison behind the scope ``all V >= 2``."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.convexity._invariance import (
    INVARIANCE_VOCABS,
    _affine,
    program_text,
    same_program,
)
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.losses import LOSSES


def _differ(loss, inputs_fn=lambda v: {}):
    texts = {v: program_text(loss, v, 0, inputs_fn(v)) for v in INVARIANCE_VOCABS}
    return same_program(texts)


def ce(z, k):
    return -jax.nn.log_softmax(z)[k]


def mean_penalty(z, k):  # a literal V (the mean's divisor): affine in V
    return jnp.mean(z**2) + ce(z, k)


def linspace_targets(z, k):  # V - 1 inside linspace: affine in V
    return jnp.sum(jnp.log(jnp.cosh(z - jnp.linspace(-1.0, 1.0, z.shape[0]))))


def shape_branch(z, k):  # a different formula from V = 5 on
    return ce(z, k) if z.shape[0] < 5 else -ce(z, k)


def numpy_weights(z, k):  # a constant array whose values change with V
    return jnp.sum(np.arange(z.shape[0]) * z) + ce(z, k)


def numpy_mask_from_16(z, k):  # equal for V < 16, different at V = 16
    w = np.where(np.arange(z.shape[0]) >= 12, -1.0, 1.0)
    return jnp.sum(w * z**2)


def log_v_traced(z, k):  # log V computed in the program from the literal V: one
    # program (whether the formula depends on V is the structure fits' business)
    return ce(z, k) / jnp.log(z.shape[0])


def log_v_python(z, k):  # log V computed in Python: a constant not affine in V
    return ce(z, k) / math.log(z.shape[0])


@pytest.mark.parametrize("loss", [ce, mean_penalty, linspace_targets, log_v_traced])
def test_one_program_up_to_v(loss):
    assert _differ(loss) == []


@pytest.mark.parametrize(
    "loss,differ",
    [
        (shape_branch, [5, 16]),
        (numpy_weights, [4, 5, 16]),
        (numpy_mask_from_16, [16]),
        (log_v_python, [4, 5, 16]),
    ],
)
def test_programs_that_depend_on_v_are_caught(loss, differ):
    assert _differ(loss) == differ


def test_every_registry_rule_is_one_program():
    # array inputs (behavior_logp, old_logits) are traced as arguments, not constants
    for name in LOSSES:
        r = resolve(name)

        def inputs(v, r=r):
            return build_inputs(r, {}, v, 0, exact=False).numeric

        assert _differ(r.loss, inputs) == [], name


def test_affine_fit_is_exact():
    from fractions import Fraction as F

    assert _affine([F(3), F(4), F(5), F(16)], (3, 4, 5, 16))
    assert _affine([F(2), F(3), F(4), F(15)], (3, 4, 5, 16))  # V - 1
    assert not _affine([F(1, 2), F(1, 3), F(1, 4), F(1, 15)], (3, 4, 5, 16))
