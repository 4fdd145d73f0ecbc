r"""Markdown report with a plot of the smallest logit-Hessian eigenvalue across
:math:`\pi_k`.

The curve is :math:`\lambda_{\min}(\nabla_z^2 L)` at logits with :math:`\pi_k = x` and
the
other tokens uniform (V = 3), computed in float64 by autodiff; where the loss is in the
sampled-token family the structural margin :math:`-f' + f''(1-\pi_k)/\pi_k` (whose sign
decides PSD for V ≥ 3) is drawn beside it. When a behavior probability ``q`` is set, the
top axis shows the ratio :math:`r = \pi_k / q`.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.convexity._check import ConvexityResult
from theorycheck.convexity._resolve import build_inputs, resolve

__all__ = ["min_eigenvalue_curve", "write_report"]


def min_eigenvalue_curve(spec: str, params, *, vocab: int = 3, num: int = 199):
    """``(pi_k grid, lambda_min)`` at logits with ``pi_k = x`` and the rest uniform."""
    resolved = resolve(spec)
    numeric, _, _ = build_inputs(resolved, dict(params), vocab, 0)
    x = np.linspace(0.005, 0.995, num)
    rest = (1.0 - x) / (vocab - 1)
    logits = np.log(np.column_stack([x] + [rest] * (vocab - 1)))
    with jax.enable_x64(True):
        hess = jax.jit(jax.vmap(jax.hessian(lambda z: resolved.loss(z, 0, **numeric))))
        h = np.asarray(hess(jnp.asarray(logits, jnp.float64)))
    lam = np.linalg.eigvalsh(np.where(np.isfinite(h), h, np.nan))[:, 0]
    return x, lam


def write_report(result: ConvexityResult, spec: str, out_dir: str) -> pathlib.Path:
    """Writes ``convexity_<loss>.md`` and ``convexity_<loss>.png`` under ``out_dir``.

    Args:
        result: the verdict.
        spec: the SPEC it was computed for.
        out_dir: output folder (created).

    Returns:
        The markdown path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = "convexity_" + "".join(c if c.isalnum() else "_" for c in result.loss)
    x, lam = min_eigenvalue_curve(spec, result.params)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(x, lam, label=r"$\lambda_{\min}(\nabla_z^2 L)$, V = 3 (autodiff)")
    fit = result.fit
    if fit is not None:
        p = fit.policy_k
        margin = sp.lambdify(p, -fit.fprime + fit.fsecond * (1 - p) / p, "numpy")
        ax.plot(
            x,
            np.broadcast_to(margin(x), x.shape),
            "--",
            label=r"margin $-f' + f''(1-\pi_k)/\pi_k$",
        )
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(r"$\pi_k$ (other tokens uniform)")
    ax.set_ylabel("curvature")
    ax.set_title(f"{result.loss}: {result.verdict}")
    if "q" in result.params:
        q = float(result.params["q"])
        top = ax.secondary_xaxis("top", functions=(lambda t: t / q, lambda r: r * q))
        top.set_xlabel(r"ratio $r = \pi_k / q$")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)
    plt.close(fig)
    lines = [
        f"# Logits convexity: `{result.loss}`",
        "",
        f"- verdict: **{result.verdict}** ({result.scope})",
        f"- condition: {result.condition or 'n/a'}",
        f"- parameters: {result.params}",
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
    neg = x[lam < -1e-12]
    lines += [
        "",
        f"![minimum eigenvalue]({stem}.png)",
        "",
        f"On the plotted slice λ_min < 0 for {neg.size} of {x.size} grid points"
        + (f" (π_k from {neg.min():.3f} to {neg.max():.3f})." if neg.size else "."),
    ]
    path = out / f"{stem}.md"
    path.write_text("\n".join(lines) + "\n")
    return path
