"""Regions for any q: the structure stage's region at q in {0.2, 0.3, 0.5, 0.8}
against brute-force float64 Hessian eigenvalues on a grid of pi_k (two routes)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from theorycheck.convexity._regions import q_annotated
from theorycheck.convexity._resolve import build_inputs, resolve
from theorycheck.convexity._structural import regions_by_q

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


_HESSIANS = {}


def _hessians(resolved, inputs):
    """The jitted batched Hessian; the array inputs (the behavior distribution, which
    moves with q) are arguments, so one compilation serves every q."""
    arrays = sorted(k for k, v in inputs.items() if np.ndim(v) > 0)
    scalars = tuple(sorted((k, v) for k, v in inputs.items() if k not in arrays))
    key = (resolved.name, tuple(arrays), scalars)
    if key not in _HESSIANS:

        def f(z, arrs):
            return resolved.loss(z, 0, **dict(scalars), **dict(zip(arrays, arrs)))

        _HESSIANS[key] = jax.jit(jax.vmap(jax.hessian(f), in_axes=(0, None)))
    return _HESSIANS[key], [inputs[a] for a in arrays]


def _brute_force_psd(resolved, params, ps) -> list[bool]:
    """Per ``p`` in ``ps``: PSD at every tested logit vector with pi_k = p (V = 3),
    float64 eigenvalues of the autodiff Hessian (all points in one batched call)."""
    inputs = build_inputs(resolved, params, 3, 0, exact=False).numeric
    pis = [
        [p, (1 - p) * s, (1 - p) * (1 - s)] for p in ps for s in SPLITS
    ]  # fmt: skip
    with jax.enable_x64(True):
        hess, arrs = _hessians(resolved, inputs)
        arrs = [jnp.asarray(a, jnp.float64) for a in arrs]
        hs = np.asarray(hess(jnp.log(jnp.asarray(pis, jnp.float64)), arrs))
    lam = np.linalg.eigvalsh(hs)[:, 0].reshape(len(ps), len(SPLITS))
    return list(lam.min(axis=1) >= -1e-9)


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
        ps = [p for p in GRID if not _near_boundary(pieces, p)]
        for p, psd in zip(ps, _brute_force_psd(resolved, params, ps)):
            assert _inside(pieces, p) == psd, (
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
