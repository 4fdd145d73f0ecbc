r"""Structure stage: recognise a family from the derived SymPy form and decide for all
V.

The stage is split by concern:

* :mod:`~theorycheck.convexity._derivation`: the loss at one V and its logit
  derivatives (``derive``, ``Derived``), with an affine map of the logits
  (temperature, scale, shift) taken out first: :math:`L(z) = \tilde L(\alpha\odot z +
  \beta)` is convex iff :math:`\tilde L` is (every :math:`\alpha_i \ne 0`);
* :mod:`~theorycheck.convexity._sampled`: the sampled-token family
  :math:`H = f''vv^\top - f'S`, PSD (V ≥ 3) iff :math:`f' \le 0` and
  :math:`-f' + f''(1-\pi_k)/\pi_k \ge 0`; conditions decided by z3 or, when
  transcendental, by the interval prover (:mod:`theorycheck.formal`);
* :mod:`~theorycheck.convexity._terms`: nonnegative sums of cross-entropy terms
  (:math:`H = c\,S`, ``c ≥ 0``) and regression terms (diagonal Hessian,
  :math:`g_i''(z_i) \ge 0` on the whole line);
* :mod:`~theorycheck.convexity._regions`: exact or validated regions in
  :math:`\pi_k`, and how they move with ``q``.

A family is accepted only when it is recognised identically at two vocabulary sizes
(V = 3 and V = 4), from the same shape-generic JAX function.

:class:`StructureResult` carries, besides ``family``/``status``/``condition``/
``detail``/``witness``/``fit``, optional fields for the later stages and the report:
``certificates`` (interval proofs, re-checkable), ``region`` (validated segments),
``affine`` (the map taken out; witnesses are mapped back by :func:`witness`) and
``q_dependence`` (regions by ``q``, :func:`regions_by_q`).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from theorycheck.convexity._derivation import Derived, derive
from theorycheck.convexity._records import StructureResult
from theorycheck.convexity._regions import q_annotated
from theorycheck.convexity._sampled import fit_one, fit_whole, sampled_token
from theorycheck.convexity._terms import decide_terms

__all__ = [
    "Derived",
    "StructureResult",
    "analyse_structure",
    "derive",
    "regions_by_q",
    "witness",
]


def _with_affine(result: StructureResult, derived: dict[int, Derived]):
    amap = derived[3].affine
    if amap is None:
        return result
    note = f"; affine map of the logits taken out ({amap.text()})"
    if result.condition not in (None, "always", "never"):
        note += ": the condition is in pi' = softmax(z')"
    return dataclasses.replace(result, affine=amap, detail=result.detail + note)


def analyse_structure(
    loss, sampled: int, exact_inputs_fn, *, timeout_ms: int
) -> tuple[StructureResult, dict[int, Derived]]:
    """Runs the structure stage at V = 3 and V = 4.

    Args:
        loss: the JAX loss.
        sampled: ``k`` (must be < 3).
        exact_inputs_fn: ``V -> exact SymPy inputs``.
        timeout_ms: z3 timeout per claim.

    Returns:
        ``(result, derived)`` with the derived forms by ``V`` (reused by later
        stages; with ``Derived.affine`` set they are forms of :math:`\\tilde L`).
    """
    # V = 3 first: a family must be recognised there before V = 4 is derived.
    derived = {3: derive(loss, 3, sampled, exact_inputs_fn(3), affine=True)}
    fit3 = fit_one(derived[3], sampled)
    if fit3 is not None:
        derived[4] = derive(loss, 4, sampled, exact_inputs_fn(4), affine=True)
        fit = fit_whole(derived[3], derived[4], sampled, fit3=fit3)
        if fit is not None:
            return _with_affine(sampled_token(fit, timeout_ms), derived), derived
    verdicts = []
    for v in (3, 4):
        if v not in derived:
            derived[v] = derive(loss, v, sampled, exact_inputs_fn(v), affine=True)
        verdict = decide_terms(derived[v].expr, derived[v].logits)
        if verdict is None:
            return StructureResult(
                None, "unknown", None, "no structural family recognised"
            ), derived
        verdicts.append(verdict)
    if verdicts[0].families != verdicts[1].families:
        return StructureResult(
            None, "unknown", None, "no structural family recognised"
        ), derived
    names = sorted(verdicts[0].families)
    certs = verdicts[0].certificates + verdicts[1].certificates
    if all(v.convex for v in verdicts):
        detail = f"sum of convex terms: {', '.join(names)}"
        if certs:
            detail += f" ({len(certs)} interval certificates)"
        result = StructureResult(
            "+".join(names), "proved", "always", detail, certificates=certs
        )
        return _with_affine(result, derived), derived
    note = next((v.detail for v in verdicts if v.detail), "")
    return StructureResult(
        "+".join(names),
        "unknown",
        None,
        f"terms {', '.join(names)}; a term is not proved convex"
        + (f" ({note})" if note else ""),
    ), derived


def witness(result: StructureResult, vocab: int, sampled: int):
    """Logits and direction of negative curvature for a ``refuted`` result, in the
    loss's own coordinates.

    The theorem's witness is :math:`\\pi_k` with the rest uniform and the direction
    of the failing condition (``fprime``: two non-sampled logits apart, ``a = 0``,
    :math:`\\sigma^2 > 0`; ``margin``: the minimum-variance direction). With an
    affine map taken out, the point and direction are mapped back
    (:meth:`theorycheck.bridge.AffineMap.to_logits`).

    Returns:
        ``(logits, direction)`` as float64 arrays of length ``vocab``.
    """
    pk, kind = result.witness
    p = float(pk)
    rest = (1.0 - p) / (vocab - 1)
    pi = np.full(vocab, rest)
    pi[sampled] = p
    logits = np.log(pi)
    if kind == "fprime":
        i, j = [t for t in range(vocab) if t != sampled][:2]
        u = np.zeros(vocab)
        u[i], u[j] = 1.0, -1.0
    else:
        u = np.full(vocab, -p / (1.0 - p))
        u[sampled] = 1.0
    if result.affine is not None:
        amap = result.affine
        if len(amap.alpha) != vocab:
            # alpha/beta were read at V = 3: a uniform map extends to any V.
            if len(set(amap.alpha)) != 1 or len(set(amap.beta)) != 1:
                raise ValueError("a non-uniform affine map is known at V = 3 only")
            amap = type(amap)((amap.alpha[0],) * vocab, (amap.beta[0],) * vocab)
        logits, u = amap.to_logits(logits, u)
    return logits, u


def regions_by_q(
    loss, sampled: int, exact_inputs_for_q, qs, *, timeout_ms: int
) -> dict[str, str | None]:
    """The structure stage's region at each behavior probability ``q``.

    Args:
        loss: the JAX loss.
        sampled: ``k``.
        exact_inputs_for_q: ``q -> (V -> exact SymPy inputs)``.
        qs: the ``q`` values (floats or Fractions in (0, 1)).
        timeout_ms: z3 timeout per claim.

    Returns:
        Region text by ``str(q)`` (``None`` where no region was found), with
        boundaries that equal :math:`c\\,q` for a ratio shared across the tested
        ``q`` marked ``[= c*q]`` (:func:`~theorycheck.convexity._regions.q_annotated`).
    """
    texts = {}
    for q in qs:
        qf = Fraction(q).limit_denominator(10**6)
        res, _ = analyse_structure(
            loss, sampled, exact_inputs_for_q(float(qf)), timeout_ms=timeout_ms
        )
        texts[qf] = res.condition
    return q_annotated(texts)
