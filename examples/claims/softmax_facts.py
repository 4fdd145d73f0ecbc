"""A small claims file to copy: two facts about softmax, each checked two ways.

Run it with ``theorycheck prove examples/claims``. Each module-level ``Claim`` is
collected; its status is computed from its checks (never written by hand), and read
with its ``kind`` (an equation, a proposition, ...) it is a verdict such as "fails as
stated". Every check runs in float64 (scoped).
"""

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Correction,
    Kind,
    Method,
    compare,
    failed,
    from_proof,
    passed,
    require_float64,
    sympy_identity,
    undecided,
)


def _symbolic_gradient() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    total = sum(sp.exp(t) for t in z)
    pi = [sp.exp(t) / total for t in z]
    errors = [
        sp.diff(sp.log(pi[0]), z[j]) - ((1 if j == 0 else 0) - pi[j]) for j in range(3)
    ]
    return sympy_identity(errors, what="d log pi_0 / d z_j = 1[j = 0] - pi_j, V = 3")


def _finite_differences(quick: bool = False) -> CheckResult:
    require_float64()  # a numeric check starts with it (the harness gives float64)
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    z = jnp.asarray(rng.normal(size=(20 if quick else 200, 1, 5)))
    step = 1e-6 * jnp.eye(5)[None]  # [1, j, 5]: row j is the step along z_j
    up = jax.nn.log_softmax(z + step, axis=-1)[..., 0]
    down = jax.nn.log_softmax(z - step, axis=-1)[..., 0]
    fd = (up - down) / 2e-6  # [sample, j]
    closed = jnp.eye(5)[0][None] - jax.nn.softmax(z[:, 0], axis=-1)
    return compare(
        "central differences (h = 1e-6) of log softmax(z)_0 vs 1[j = 0] - pi_j, V = 5",
        np.asarray(fd),
        np.asarray(closed),
        rtol=0,
        atol=1e-8,
    )


LOG_SOFTMAX_GRADIENT = Claim(
    id="example.log_softmax_gradient",
    source="textbook softmax calculus",
    provenance="DERIVED",
    statement="d log softmax(z)_k / d z_j = 1[j = k] - softmax(z)_j",
    quote="d log pi_k / d z_j = 1[j = k] - pi_j",
    location="softmax calculus",
    kind=Kind.EQUATION,
    assumptions=("pi = softmax(z), finite logits",),
    checks=(
        Check("sympy identity, V = 3", Method.SYMBOLIC, _symbolic_gradient),
        Check("finite differences, V = 5", Method.NUMERIC, _finite_differences),
    ),
)


def _max_prob_bound(quick: bool = False) -> CheckResult:
    # The (wrong) statement: max softmax probability <= 1/2. Brute force finds a point.
    require_float64()
    z = np.array([3.0, 0.0, 0.0])
    p = np.exp(z) / np.exp(z).sum()
    if p.max() > 0.5:
        return failed(
            f"softmax({z.tolist()}) has max {p.max():.4f} > 1/2",
            counterexample={"z": z.tolist(), "max_prob": float(p.max())},
        )
    return undecided("no counterexample at this point")


def _z3_max_below_one() -> CheckResult:
    from theorycheck.formal import prove

    p = sp.symbols("p0:3", real=True)
    res = prove(
        p[0] < 1,
        p,
        assumptions=[*(x > 0 for x in p), sp.Eq(sum(p), 1)],
    )
    return from_proof(res, "every p_0 < 1 on the open simplex, V = 3")


def _sampled_below_one(quick: bool = False) -> CheckResult:
    require_float64()
    import jax

    rng = np.random.default_rng(1)
    z = rng.normal(scale=2, size=(100 if quick else 10_000, 3))
    p = np.asarray(jax.nn.softmax(z, axis=-1))
    gap = float(1 - p.max())
    if gap > 0:
        return passed(f"{len(z)} float64 draws, smallest 1 - max prob = {gap:.3g} > 0")
    worst = z[int(np.argmax(p.max(-1)))]
    return failed(
        f"a float64 draw has max prob {p.max():.17g}",
        counterexample={"z": worst.tolist(), "max_prob": float(p.max())},
    )


MAX_PROB_AT_MOST_HALF = Claim(
    id="example.max_prob_at_most_half",
    source="a deliberately wrong statement, to show a failing claim",
    provenance="INFERRED",
    statement="every softmax probability is at most 1/2",
    quote="every softmax probability is at most 1/2",
    location="(made up)",
    kind=Kind.PROPOSITION,
    assumptions=("finite logits, V = 3",),
    checks=(Check("brute force at z = (3, 0, 0)", Method.NUMERIC, _max_prob_bound),),
    correction=Correction(
        statement="every softmax probability is strictly below 1 (finite logits)",
        checks=(
            Check("z3 over the simplex, V = 3", Method.Z3, _z3_max_below_one),
            Check("random logits, float64", Method.NUMERIC, _sampled_below_one),
        ),
    ),
)
