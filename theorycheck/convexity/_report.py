r"""Markdown report with a plot of the conditions that decide convexity across
:math:`\pi_k`.

The plot (V = 3, other tokens uniform) shows :math:`\lambda_{\min}(\nabla_z^2 L)` in
float64 by autodiff; for the sampled-token family also the two conditions whose signs
decide PSD for V ≥ 3 (Theorem: :math:`f' \le 0` and
:math:`-f' + f''(1-\pi_k)/\pi_k \ge 0`), the region where both hold shaded (else the
region where :math:`\lambda_{\min} \ge 0` on the slice), and the counterexample's
:math:`\pi_k` marked. A symmetric-log axis keeps curves of very different sizes
readable. When a behavior probability ``q`` is used, the top axis shows
:math:`r = \pi_k / q`.

The report takes its inputs separately from the verdict: the verdict record
(:class:`ConvexityResult`: verdict, scope, methods, counterexample, condition, the
values used), the resolved loss it evaluates, the ``--set`` values it builds the
inputs from, and the structure stage's fit of the sampled-token family (if any).
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._atomic import save_figure_atomic, write_text_atomic
from theorycheck.convexity._check import ConvexityResult
from theorycheck.convexity._resolve import ResolvedLoss, build_inputs

__all__ = ["condition_curves", "min_eigenvalue_curve", "write_report"]


def min_eigenvalue_curve(
    resolved: ResolvedLoss,
    settings: Mapping[str, float],
    *,
    vocab: int = 3,
    num: int = 199,
):
    r"""``(pi_k grid, lambda_min)`` at logits with ``pi_k = x`` and the rest uniform.

    .. math::
        \lambda_{\min}\big(\nabla_z^2 L(z)\big),\quad
        z = \log(x, \tfrac{1-x}{V-1}, \dots),\ k = 0

    Args:
        resolved: the loss (as the check resolved it).
        settings: the ``--set`` values the inputs are built from.
        vocab: V of the slice.
        num: grid points of :math:`\pi_k` in [0.005, 0.995].
    """
    numeric = build_inputs(resolved, settings, vocab, 0, exact=False)
    x = np.linspace(0.005, 0.995, num)
    rest = (1.0 - x) / (vocab - 1)
    logits = np.log(np.column_stack([x] + [rest] * (vocab - 1)))
    loss = resolved.loss
    with jax.enable_x64(True):
        hess = jax.jit(jax.vmap(jax.hessian(lambda z: loss(z, 0, **numeric.numeric))))
        h = np.asarray(hess(jnp.asarray(logits, jnp.float64)))
    lam = np.linalg.eigvalsh(np.where(np.isfinite(h), h, 0.0))[:, 0]
    lam[~np.all(np.isfinite(h), axis=(1, 2))] = np.nan
    return x, lam


def condition_curves(fit, x: np.ndarray) -> dict[str, np.ndarray]:
    r"""The sampled-token conditions on the grid: ``-f'`` and the margin
    :math:`-f' + f''(1-\pi_k)/\pi_k` (both must be ≥ 0 for PSD at V ≥ 3)."""
    import sympy as sp

    p = fit.policy_k
    exprs = {
        "-f'": -fit.fprime,
        "margin": -fit.fprime + fit.fsecond * (1 - p) / p,
    }
    out = {}
    for name, expr in exprs.items():
        fn = sp.lambdify(p, expr, "numpy")
        with np.errstate(all="ignore"):
            out[name] = np.broadcast_to(np.asarray(fn(x), np.float64), x.shape)
    return out


def _shade(ax, x, ok, label):
    """Shades the grid cells where ``ok`` holds."""
    first = True
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(int), [0]])))
    for a, b in zip(edges[::2], edges[1::2]):
        ax.axvspan(
            x[a],
            x[b - 1],
            color="tab:green",
            alpha=0.12,
            label=label if first else None,
        )
        first = False


def _plot(
    result: ConvexityResult,
    resolved: ResolvedLoss,
    settings: Mapping[str, float],
    fit: Any,
    path: pathlib.Path,
) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, lam = min_eigenvalue_curve(resolved, settings)
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    ax.plot(x, lam, color="tab:blue", label=r"$\lambda_{\min}(\nabla_z^2 L)$, V = 3")
    curves = condition_curves(fit, x) if fit is not None else {}
    styles = {"-f'": ("tab:red", r"$-f'$ (must be $\geq 0$)")}
    styles["margin"] = ("tab:orange", r"margin $-f' + f''(1-\pi_k)/\pi_k$ ($\geq 0$)")
    for name, y in curves.items():
        color, label = styles[name]
        ax.plot(x, y, "--", color=color, label=label)
    if curves:
        ok = np.all([np.nan_to_num(y, nan=-1.0) >= 0 for y in curves.values()], axis=0)
        failing = [n for n, y in curves.items() if np.any(np.nan_to_num(y) < 0)]
        note = "fails: " + ", ".join(failing) if failing else "both hold"
        _shade(ax, x, ok, "convex (both conditions hold)")
    else:
        scale = np.nanmax(np.abs(lam)) if np.any(np.isfinite(lam)) else 1.0
        ok = np.nan_to_num(lam, nan=-1.0) >= -1e-9 * max(1.0, scale)
        note = "decided by lambda_min on this slice"
        _shade(ax, x, ok, r"$\lambda_{\min} \geq 0$ on this slice")
    ce = result.counterexample
    if ce:
        z = np.asarray(ce["logits"])
        pk = float(np.exp(z[ce["sampled"]] - np.logaddexp.reduce(z)))
        ax.axvline(pk, color="black", linestyle=":", linewidth=1.2)
        y = float(np.interp(pk, x, np.nan_to_num(lam)))  # lambda_min on the slice
        ax.plot(
            [pk],
            [y],
            "kx",
            markersize=9,
            label=f"counterexample at pi_k = {pk:.3g}, V = {ce['vocab']}",
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    values = np.concatenate([lam] + list(curves.values()))
    values = np.abs(values[np.isfinite(values) & (values != 0)])
    if values.size and values.max() / max(np.median(values), 1e-300) > 1e3:
        ax.set_yscale("symlog", linthresh=float(np.percentile(values, 10)))
    ax.set_xlabel(r"$\pi_k$ (other tokens uniform)")
    ax.set_ylabel("curvature / condition value")
    ax.set_title(f"{result.loss}: {result.verdict} ({result.scope}); {note}")
    if "q" in result.params:
        q = float(result.params["q"])
        top = ax.secondary_xaxis("top", functions=(lambda t: t / q, lambda r: r * q))
        top.set_xlabel(r"ratio $r = \pi_k / q$")
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=120)
    plt.close(fig)
    neg = x[np.nan_to_num(lam) < -1e-12]
    return f"On the plotted slice λ_min < 0 for {neg.size} of {x.size} grid points" + (
        f" (π_k from {neg.min():.3f} to {neg.max():.3f})." if neg.size else "."
    )


def write_report(
    result: ConvexityResult,
    out_dir,
    *,
    resolved: ResolvedLoss,
    settings: Mapping[str, float],
    fit: Any = None,
) -> pathlib.Path:
    """Writes ``convexity_<loss>.md`` and ``convexity_<loss>.png`` under ``out_dir``.

    Args:
        result: the verdict record (verdict, scope, methods, counterexample,
            condition, the values used).
        out_dir: output folder (created).
        resolved: the loss the plot evaluates (the one the check resolved).
        settings: the ``--set`` values the plot's inputs are built from.
        fit: the structure stage's fit of the sampled-token family (its two PSD
            conditions are plotted), or None (the plot shades λ_min ≥ 0 instead).

    Returns:
        The markdown path.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = "convexity_" + "".join(c if c.isalnum() else "_" for c in result.loss)
    slice_note = _plot(result, resolved, settings, fit, out / f"{stem}.png")
    lines = [
        f"# Logits convexity: `{result.loss}`",
        "",
        f"- verdict: **{result.verdict}** ({result.scope})",
    ]
    if result.reason:
        lines.append(f"- why unknown: {result.reason}")
    lines += [
        f"- condition: {result.condition or 'n/a'}",
        f"- parameters: {', '.join(f'{k} = {v}' for k, v in result.params.items())}",
        "",
        "| method | status | detail |",
        "|---|---|---|",
    ]
    lines += [
        f"| {m['method']} | {m['status']} | {m['detail']} |" for m in result.methods
    ]
    if result.counterexample:
        ce = result.counterexample
        lines += [
            "",
            "Counterexample (re-checked):",
            "",
            f"- logits: {ce['logits']}",
            f"- direction: {ce['direction']}",
            f"- curvature uᵀHu: {ce['curvature']}",
        ]
    lines += ["", f"![conditions and minimum eigenvalue]({stem}.png)", "", slice_note]
    path = out / f"{stem}.md"
    return write_text_atomic(path, "\n".join(lines) + "\n")  # whole or absent
