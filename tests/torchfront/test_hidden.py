"""Losses written in users' style (tests/torchfront/hidden.py) through the torch front
end, in-process and cheap: each translated program is traced once per module
(fixtures), then

* a ``torch.no_grad()`` weight is one frozen value, and the structure stage fits the
  same sampled-token family as the registry rule it implements (the reason CISPO's
  verdict is the registry's, not a lucky search);
* a logits-form program read at a constant index (``gather``, ``cross_entropy`` with a
  constant target, ``x[k]``) is one formula for every V by the checker's own
  V-dependence rules (theorycheck/convexity/_genericity.py);
* every loss's coefficient, by torch autograd, equals the registry rule it implements
  on the comparison grid.

The full verdicts of these losses against the registry's are in test_cli.py (a few)
and docs/convexity.md (all of them, one run each).
"""

from pathlib import Path

import jax
import numpy as np
import pytest
import sympy as sp

torch = pytest.importorskip("torch")

from theorycheck import torchfront  # noqa: E402
from theorycheck.convexity import _genericity  # noqa: E402
from theorycheck.convexity._derivation import derive  # noqa: E402
from theorycheck.convexity._invariance import (  # noqa: E402
    program_text_of,
    same_program,
)
from theorycheck.convexity._resolve import build_inputs, resolve  # noqa: E402
from theorycheck.convexity._sampled import fit_one  # noqa: E402

HIDDEN = Path(__file__).with_name("hidden.py")
CORPUS = Path(__file__).with_name("corpus.py")


@pytest.fixture(scope="module")
def resolved():
    """Each loss resolved once (its programs translated and gated on first use)."""
    cache = {}

    def get(spec):
        if spec not in cache:
            cache[spec] = resolve(spec)
        return cache[spec]

    yield get
    torchfront.clear_cache()


def _fit(res, params):
    exact = build_inputs(res, params, 3, 0).exact
    d = derive(res.loss, 3, 0, exact, affine=True)
    return d, fit_one(d, 0)


def _top_level(loss, res, params, name):
    numeric = build_inputs(res, params, 3, 0, exact=False).numeric
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(lambda z: loss(z, 0, **numeric))(np.zeros(3))
    return [e for e in closed.jaxpr.eqns if e.primitive.name == name]


@pytest.mark.parametrize(
    "spec",
    # no_grad (corpus.py's cispo_verl is test_cli.py's verdict) and detach
    [f"{HIDDEN}:cispo_nograd_verl[verl]", f"{CORPUS}:cispo_detach_verl[verl]"],
)
def test_a_frozen_weight_is_the_registry_cispo_family(resolved, spec):
    """One stop_gradient for the whole no_grad block (or detach), and the
    sampled-token fit f', f'' of the translation equal the registry cispo's."""
    res = resolved(spec)
    params = {"adv": 1.0}
    assert len(_top_level(res.loss, res, params, "stop_gradient")) == 1
    _, mine = _fit(res, params)
    _, rule = _fit(resolved("cispo"), params)
    assert mine is not None and rule is not None
    for a, b in ((mine.fprime, rule.fprime), (mine.fsecond, rule.fsecond)):
        _same_function(a, mine.policy_k, b, rule.policy_k)


def _same_function(a, pa, b, pb):
    """Equal at 127 exact points of (0, 1) (every multiple of 1/128: the clip
    boundaries 1/4 = 0.5 q and 5/2 q fall on them), so ``<`` and ``<=`` at a
    boundary where both branches agree count as the same function."""
    for i in range(1, 128):
        x = sp.Rational(i, 128)
        assert sp.simplify(a.subs(pa, x) - b.subs(pb, x)) == 0, (a, b, x)


@pytest.mark.parametrize(
    # gather and cross_entropy at torch.tensor([k]); logits[k] (select) is
    # test_cli.py's cross-entropy scope
    "spec",
    [f"{HIDDEN}:ppo_logits", f"{HIDDEN}:ce_logits"],
)
def test_constant_index_reads_are_one_formula_for_every_v(resolved, spec):
    """The per-V ATen programs, translated, are one program up to V with no value
    depending on V (the rule that gives JAX losses ``all V``); sampled stays a
    Python int in the trace, so no relabelling argument is claimed."""
    res = resolved(spec)
    params = {"adv": -1.0} if "ppo" in spec else {}
    vocabs = (3, 4, 5)
    closed = {
        v: _genericity.trace(
            res.loss,
            v,
            build_inputs(res, params, v, 0, exact=False).numeric,
            dynamic=False,
        )
        for v in vocabs
    }
    assert same_program({v: program_text_of(c) for v, c in closed.items()}) == []
    arrays = tuple(
        k
        for k, a in build_inputs(res, params, 3, 0, exact=False).numeric.items()
        if np.ndim(a) > 0
    )
    gen = _genericity.analyse(closed, arrays, dynamic=False, same=True)
    assert gen.uniform, gen.why_v
    assert not gen.equivariant
    # and the torch source exports with a dynamic V (no Python branch on it)
    by_v = {v: build_inputs(res, params, v, 0, exact=False).numeric for v in (3, 4)}
    assert _genericity.symbolic_v(res.loss, by_v, dynamic=False) == ("", ())


def test_a_python_branch_on_the_length_is_seen_by_torch_export(resolved):
    """One program at every traced V, another from V = 41 on: ``torch.export`` with
    a dynamic V specialises on the branch and names its constant."""
    res = resolved(f"{CORPUS}:shape_branch")
    by_v = {v: build_inputs(res, {}, v, 0, exact=False).numeric for v in (3, 4)}
    why, constants = _genericity.symbolic_v(res.loss, by_v, dynamic=False)
    assert "does not export with a dynamic vocabulary size" in why
    assert 40 in constants


@pytest.mark.parametrize(
    "func,rule,adv",
    [
        ("vanilla_verl[verl]", "dual_clip", -0.7),
        ("cispo_nograd_verl[verl]", "cispo", 0.9),
        ("ppo_logits", "ppo", -1.0),
        ("cispo_item_logits", "cispo", 1.0),
        ("ce_logits", "pg", 1.0),
        ("reinforce_item", "pg", -1.0),
    ],
)
def test_coefficients_equal_the_rule_each_implements(func, rule, adv):
    """c = -dL/dlog pi_k by torch autograd equals the registry rule's analytic c
    at (p, q) = (0.45, 0.3) and on the 212-point grid, both signs of the advantage
    (a loss without an advantage input, cross-entropy, at its own Â = 1 only)."""
    fixed = func == "ce_logits"  # -log pi_k: the advantage is 1, its own
    params = {}
    if func.startswith("cispo_nograd_verl"):
        # its window is 1 - 2.5 clip_ratio_low, not verl's 1 - clip_ratio_low (the
        # mapping --compare applies): at clip_ratio_low = 0 both are [1, 5]
        func = "cispo_nograd_verl[verl;clip_ratio_low=0.0]"
    out = torchfront.compare_rule(str(HIDDEN), func, rule, 0.45, 0.3, adv, params)
    if fixed:  # the grid's -|adv| half is another loss; the point is this one
        assert out["equal"], out
        same_sign = [r for r in out["regions"] if np.sign(r["adv"]) == np.sign(adv)]
        assert not same_sign, out["regions"]
        return
    assert out["equal"] and out["differ"] == 0, out
