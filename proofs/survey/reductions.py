r"""The survey (seed 000): equal reduction weights do not give equal gradient norms.

The survey's text is read in full (docs/papers.md §4, PAPER).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Kind,
    Method,
    failed,
    passed,
    undecided,
)
from theorycheck.losses import (
    LOSSES,
    Reduction,
    reduction_weights,
    sequence_gradient_norms,
)
from theorycheck.symbolic import logit_gradient

# --- reduction weights vs gradient norms ----------------------------------------------


def reduction_numeric(
    *, quick: bool = False, mode: str = "seq_mean_token_mean"
) -> object:
    """float64: equal per-response weights, unequal response-gradient norms (a shared
    linear softmax model, registry is_pg token losses)."""
    rng = np.random.default_rng(0)
    vocab, hidden = 6, 4
    w0 = rng.normal(size=(vocab, hidden))
    mask = np.array([[1, 0, 0, 0], [1, 1, 1, 1]], np.float64)
    weights = np.asarray(reduction_weights(mask, Reduction(mode)))
    totals = weights.sum(axis=1)
    feats = rng.normal(size=(2, 4, hidden))
    toks = rng.integers(0, vocab, size=(2, 4))
    mu_logp = np.log(np.full(vocab, 1.0 / vocab))
    grads = np.zeros((2, 4, vocab * hidden))
    for s in range(2):
        for t in range(4):

            def f(w, s=s, t=t):
                z = w @ jnp.asarray(feats[s, t])
                return LOSSES["is_pg"].loss(
                    z, int(toks[s, t]), adv=1.0, behavior_logp=jnp.asarray(mu_logp)
                )

            grads[s, t] = np.asarray(jax.grad(f)(jnp.asarray(w0))).ravel()
    norms = np.asarray(sequence_gradient_norms(grads, weights))
    if abs(totals[0] - totals[1]) > 1e-12:
        return undecided(f"{mode} does not give equal response weights: {totals}")
    if abs(norms[0] - norms[1]) <= 1e-9 * max(norms):
        return failed("equal weights gave equal norms", {"norms": norms.tolist()})
    return passed(
        f"{mode}: response weights {totals[0]:.3g} = {totals[1]:.3g}, gradient norms "
        f"{norms[0]:.4g} vs {norms[1]:.4g} (ratio {norms.max() / norms.min():.2f})",
        weights=totals.tolist(),
        norms=norms.tolist(),
    )


def reduction_symbolic(*, quick: bool = False) -> object:
    """Exact: two one-token responses with weight 1/2 each (registry pg spec) have
    logit-gradient norms |A| ||e_k - pi||, which differ with the token."""
    z = sp.symbols("z0:3", real=True)
    pol = [sp.Rational(1, 2), sp.Rational(1, 4), sp.Rational(1, 4)]
    at = {zi: sp.log(p) for zi, p in zip(z, pol)}
    norms = []
    for k in (0, 1):
        g = logit_gradient(LOSSES["pg"].symbolic(list(z), k, adv=1), z)
        half = [sp.simplify(sp.Rational(1, 2) * gi.subs(at)) for gi in g]
        norms.append(sp.sqrt(sum(x**2 for x in half)))
    if sp.simplify(norms[0] - norms[1]) == 0:
        return failed("equal norms", {"norms": [str(n) for n in norms]})
    return passed(
        f"pi = (1/2, 1/4, 1/4), A = 1, weights 1/2 each: norms {norms[0]} (k = 0) vs "
        f"{norms[1]} (k = 1), exact"
    )


REDUCTION_WEIGHTS_ARE_NOT_GRADIENT_NORMS = Claim(
    id="survey.reduction_weights_are_not_gradient_norms",
    source="seed 000 (survey), reductions: 'equal reduction weights do not guarantee "
    "equal gradient norms'",
    provenance="PAPER",
    quote=(
        '"A trajectory gradient naturally sums token terms. Dividing by length '
        "deliberately reweights it; equal reduction weights do not guarantee equal "
        'gradient norms."'
    ),
    location="reductions paragraph",
    kind=Kind.REMARK,
    assumptions=("the seq_mean_token_mean reduction",),
    statement=(
        "Equal reduction weights do not guarantee equal gradient norms: responses with "
        "the same total weight can contribute gradients of different norms."
    ),
    checks=(
        Check(
            "float64, registry reductions on a linear model",
            Method.NUMERIC,
            reduction_numeric,
        ),
        Check("exact, registry pg spec", Method.SYMBOLIC, reduction_symbolic),
    ),
)
