"""Regions for any q: the structure stage's region at q in {0.2, 0.3, 0.5, 0.8}
against brute-force float64 Hessian eigenvalues on a grid of pi_k (two routes)."""

import re

import numpy as np
import pytest
import sympy as sp

from theorycheck.convexity._regions import q_annotated
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._structural import regions_by_q
from theorycheck.numeric._hessian import min_eigenvalue

QS = (0.2, 0.3, 0.5, 0.8)
GRID = np.linspace(0.02, 0.98, 25)
#: Splits of the non-sampled mass at V = 3 (uneven ones make sigma^2 > 0).
SPLITS = (0.5, 0.15, 0.9)


def _pieces(text: str):
    """Parses ``pi_k >= a and pi_k < b or ...`` (the V >= 3 part) into bounds."""
    text = text.split(";")[0].replace("(V >= 3)", "")
    text = re.sub(
        r"\((boundary in|undecided inside) \[[^\]]*\]\)|\[= [^\]]*\]", "", text
    )
    out = []
    for piece in text.split(" or "):
        bounds = []
        for part in piece.split(" and "):
            m = re.fullmatch(r"\s*pi_k\s*(>=|>|<=|<)\s*(.+?)\s*", part)
            assert m, f"cannot parse {part!r} in {text!r}"
            bounds.append((m.group(1), float(sp.sympify(m.group(2)))))
        out.append(bounds)
    return out


def _inside(pieces, p: float) -> bool:
    def ok(op, b):
        return {">=": p >= b, ">": p > b, "<=": p <= b, "<": p < b}[op]

    return any(all(ok(op, b) for op, b in piece) for piece in pieces)


def _near_boundary(pieces, p: float) -> bool:
    return any(abs(p - b) < 0.02 for piece in pieces for _, b in piece)


def _brute_force_psd(resolved, params, p: float) -> bool:
    """PSD at every tested logit vector with pi_k = p (V = 3), float64 eigenvalues."""
    inputs = build_inputs(resolved, params, 3, 0, exact=False).numeric
    lams = []
    for s in SPLITS:
        pi = np.asarray([p, (1 - p) * s, (1 - p) * (1 - s)])
        lam = min_eigenvalue(resolved.loss, np.log(pi), 0, inputs=inputs).value
        lams.append(lam)
    return min(lams) >= -1e-9


def _check_rule(name, adv):
    resolved = resolve(name)
    regions = regions_by_q(
        resolved.loss,
        0,
        lambda q: lambda v: build_inputs(resolved, {"adv": adv, "q": q}, v, 0).exact,
        QS,
        timeout_ms=10_000,
    )
    assert len(regions) == len(QS)
    for q, (key, text) in zip(QS, regions.items()):
        assert text is not None, f"{name}: no region at q = {key}"
        pieces = _pieces(text)
        params = {"adv": adv, "q": q}
        for p in GRID:
            if _near_boundary(pieces, p):
                continue
            assert _inside(pieces, p) == _brute_force_psd(resolved, params, p), (
                f"{name} adv={adv} q={q} pi_k={p}: region {text!r}"
            )
    return regions


def test_ppo_positive_advantage_region_moves_with_q():
    regions = _check_rule("ppo", 1.0)
    # (1 + eps) q < 1/2 at q = 0.2, 0.3: the region gains pi_k > (1 + eps) q.
    assert "[= 6/5*q]" in regions["1/5"] and "[= 6/5*q]" in regions["3/10"]
    assert "pi_k >= 1/2" in regions["1/2"] and "pi_k >= 1/2" in regions["4/5"]


@pytest.mark.slow
@pytest.mark.parametrize("name,adv", [("ppo", -1.0), ("is_pg", 1.0), ("sapo", 1.0)])
def test_region_matches_brute_force_at_every_q(name, adv):
    _check_rule(name, adv)


def test_q_annotated_marks_only_shared_ratios():
    F = __import__("fractions").Fraction
    out = q_annotated({F(1, 5): "pi_k >= 1/2", F(1, 2): "pi_k >= 1/2"})
    # 1/2 is q at q = 1/2 but 5/2 q at q = 1/5: no shared ratio, no mark.
    assert out == {"1/5": "pi_k >= 1/2", "1/2": "pi_k >= 1/2"}
