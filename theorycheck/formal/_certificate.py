r"""Independent re-check of an interval :class:`~theorycheck.formal.Certificate`.

The check trusts nothing the prover computed except the cell list: it re-derives
:math:`h(u) = g(x(u))` and its derivatives with SymPy, re-evaluates every cell's
enclosure at a higher precision (``RECHECK_PREC`` bits), re-evaluates every anchor
value exactly (SymPy) and confirms its sign at 50 digits, and checks that the cells
cover the chart's whole compact domain without gaps. It shares with the prover only
mpmath's interval primitives (and the endpoint formulas for cosh/sinh/tanh/atanh).
"""

from __future__ import annotations

import sympy as sp

from theorycheck.formal._bisect import Certificate, Chart
from theorycheck.formal._interval import IntervalUndefined, enclosure_fn, interval

__all__ = ["verify_certificate"]

#: Bits of the re-check's interval evaluation (the prover uses fewer).
RECHECK_PREC = 120


def _anchor_ok(value: sp.Expr, sign: int) -> bool:
    """``sign * value >= 0`` for an exact SymPy number, decided at 50 digits."""
    if value == 0:
        return True
    if not value.is_number or value.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return False
    approx = sp.N(sign * value, 50)
    return bool(approx.is_real and approx > 0)


def verify_certificate(cert: Certificate) -> tuple[bool, str]:
    """Re-checks a certificate of ``expr >= 0`` from scratch.

    Args:
        cert: the certificate.

    Returns:
        ``(ok, reason)``; ``reason`` names the first failing cell.

    Examples:
        >>> from theorycheck.formal import prove_nonnegative
        >>> p = sp.Symbol("p", real=True)
        >>> res = prove_nonnegative(-sp.log(p) + p - 1, p)
        >>> verify_certificate(res.certificate)
        (True, 'ok: 1 cells cover [0, 1]')
    """
    chart = Chart(cert.chart)
    lo0, hi0 = chart.bounds
    cells = sorted(cert.cells, key=lambda c: c.lo)
    if not cells or cells[0].lo != lo0 or cells[-1].hi != hi0:
        return False, "the cells do not reach both ends of the domain"
    for a, b in zip(cells, cells[1:]):
        if a.hi != b.lo:
            return False, f"gap or overlap between {a.hi} and {b.lo}"
    u = sp.Dummy("u", real=True)
    derivatives = [cert.expr.xreplace({cert.variable: chart.of(u)})]
    for cell in cells:
        while len(derivatives) <= cell.order:
            derivatives.append(sp.diff(derivatives[-1], u))
        problem = _cell_problem(cell, derivatives, u)
        if problem:
            return False, f"cell [{cell.lo}, {cell.hi}]: {problem}"
    return True, f"ok: {len(cells)} cells cover [{lo0}, {hi0}]"


def _cell_problem(cell, derivatives, u) -> str | None:
    """Why one cell's claim fails the re-check, or None when it holds."""
    if not cell.lo < cell.hi:
        return "empty cell"
    flip = -1 if cell.side == "hi" else 1
    if cell.order:
        c = cell.hi if cell.side == "hi" else cell.lo
        at = sp.Rational(c.numerator, c.denominator)
        for j in range(cell.order):
            if not _anchor_ok(derivatives[j].xreplace({u: at}), flip**j):
                return f"anchor h^({j})({c}) has the wrong sign"
    try:
        enc = enclosure_fn(derivatives[cell.order], u, prec=RECHECK_PREC)(
            interval(cell.lo, cell.hi)
        )
    except (IntervalUndefined, NotImplementedError) as err:
        return str(err)
    if cell.order and (enc.switched or _switched(derivatives[0], u, cell)):
        # The anchored argument needs one smooth branch on the whole closed cell.
        return "a Piecewise switches inside"
    value = enc.value * (flip**cell.order)
    if not value.a >= 0 or cell.bound < 0:
        return f"lower end {value.a} < 0"
    return None


def _switched(h, u, cell) -> bool:
    try:
        enc = enclosure_fn(h, u, prec=RECHECK_PREC)(interval(cell.lo, cell.hi))
    except (IntervalUndefined, NotImplementedError):
        return True
    return enc.switched
