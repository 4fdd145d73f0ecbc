"""The data behind ``theorycheck conventions``: presets side by side on one batch shape.

Everything here is computed: effective per-token weights of every preset and of every
framework's version of a shared reduction name, and the coefficients of same-named rules
under each framework's defaults at probe points. A difference is flagged only when the
numbers differ (relative gap above 1e-12).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck.losses._presets import (
    FINDINGS,
    PRESETS,
    REDUCTION_VARIANTS,
    RULE_VARIANTS,
)
from theorycheck.losses._reductions import reduction_weights
from theorycheck.losses._registry import LOSSES

_RTOL = 1e-12


#: the largest batch the report evaluates: B*G*T cells (1e6 takes ~40 s and ~0.7 GB
#: on 2 CPU cores; the report lists every response, so B*G is bounded as well).
MAX_CELLS = 1_000_000
MAX_RESPONSES = 10_000
#: counts reach jitted code as int32.
_MAX_INT = 2**31 - 1


def check_batch_shape(batch_shape) -> tuple[int, int, int]:
    """Validates ``(B, G, T)`` before any array is built.

    Raises:
        BadInput: not three integers >= 1, or a batch larger than
        :data:`MAX_CELLS` cells / :data:`MAX_RESPONSES` responses.
    """
    shape = tuple(batch_shape)
    text = ",".join(str(x) for x in shape)
    if len(shape) != 3 or not all(isinstance(x, (int, np.integer)) for x in shape):
        raise BadInput(f"batch_shape {text}: expected three integers B,G,T")
    b, g, t = (int(x) for x in shape)
    if min(b, g, t) < 1:
        raise BadInput(f"batch_shape {text}: every entry must be >= 1")
    if b * g > MAX_RESPONSES or b * g * t > MAX_CELLS:
        raise BadInput(
            f"batch_shape {text}: B*G = {b * g} responses, B*G*T = {b * g * t} "
            f"cells; at most {MAX_RESPONSES} responses and {MAX_CELLS} cells"
        )
    return b, g, t


def batch_mask(batch_shape, lengths) -> tuple[np.ndarray, np.ndarray]:
    """``[B*G, T]`` float64 mask and ``[B*G]`` prompt ids for the given lengths.

    Args:
        batch_shape: ``(B, G, T)`` prompts, responses per prompt, padded length.
        lengths: ``B*G`` valid-token counts in ``[0, T]`` (``None``: a spread 1..T).

    Returns:
        ``(mask, prompt_ids)``.
    """
    b, g, t = check_batch_shape(batch_shape)
    n = b * g
    if lengths is None:
        lengths = [max(1, round(t * (i + 1) / n)) for i in range(n)]
    if len(lengths) != n:
        raise BadInput(
            f"lengths has {len(lengths)} entries; batch shape {b},{g},{t} "
            f"needs B*G = {n}"
        )
    for length in lengths:
        if not 0 <= length <= t:
            raise BadInput(f"lengths entry {length} is outside [0, T = {t}]")
    mask = (np.arange(t)[None, :] < np.asarray(lengths)[:, None]).astype(np.float64)
    return mask, np.repeat(np.arange(b), g)


def _per_token(weights, mask):
    lengths = mask.sum(axis=1)
    return np.where(
        lengths > 0, np.asarray(weights).sum(axis=1) / np.maximum(lengths, 1), 0.0
    )


def _differ(rows) -> tuple[bool, float | None]:
    a = np.asarray(rows, dtype=np.float64)
    spread = a.max(axis=0) - a.min(axis=0)
    differ = bool(np.any(spread > _RTOL * np.maximum(np.abs(a).max(axis=0), 1e-300)))
    pos = a[:, (a > 0).all(axis=0)]
    ratio = float((pos.max(axis=0) / pos.min(axis=0)).max()) if pos.size else None
    return differ, ratio


def window(rule: str, params) -> str:
    """A short description of a rule's clip / gate window under ``params``."""
    p = dict(params)
    if rule in ("ppo", "dapo", "dual_clip", "gspo", "gspo_token"):
        text = f"r in [{1 - p['eps_low']:g}, {1 + p['eps_high']:g}]"
        if rule == "dual_clip" and math.isfinite(p["kappa"]):
            text += f", A<0 floor at r > {p['kappa']:g}"
        return text
    if rule in ("cispo", "glm5"):
        return f"r in ({p['low']:g}, {p['high']:g})"
    if "delta" in p:
        return f"delta = {p['delta']:g}"
    return "none"


def conventions_report(
    batch_shape, lengths=None, *, micro_batch_size=None, max_len=None
) -> dict:
    """Presets, same-name reductions and same-name rules side by side (JSON-ready).

    Args:
        batch_shape: ``(B, G, T)``.
        lengths: ``B*G`` response lengths (``None``: a spread 1..T).
        micro_batch_size: rows per micro-batch (``None``: G, one prompt each).
        max_len: L_max of the Dr. GRPO reductions (``None``: T).

    Returns:
        A dict (see ``theorycheck conventions --json``).
    """
    mask, prompt_ids = batch_mask(batch_shape, lengths)
    b, g, t = batch_shape
    mb = g if micro_batch_size is None else int(micro_batch_size)
    if not 1 <= mb <= _MAX_INT:
        raise BadInput(f"micro_batch_size {mb} must lie in [1, {_MAX_INT}]")
    lmax = t if max_len is None else int(max_len)
    if lmax > _MAX_INT:
        raise BadInput(f"max_len {lmax} must be <= {_MAX_INT}")
    longest = int(mask.sum(axis=1).max())
    if lmax < max(longest, 1):
        raise BadInput(
            f"max_len {lmax} is below the longest response ({longest} tokens): "
            "L_max bounds every length"
            if longest
            else f"max_len {lmax} must be >= 1"
        )

    def weights(reduction):
        return np.asarray(
            reduction_weights(
                jnp.asarray(mask),
                reduction,
                group_ids=jnp.asarray(prompt_ids),
                num_groups=b,
            )
        )

    presets = []
    for p in PRESETS.values():
        red = p.reduction_for(mb, lmax)
        w = weights(red)
        presets.append(
            {
                "name": p.name,
                "framework": p.framework,
                "rule": p.rule,
                "params": dict(p.params),
                "window": window(p.rule, p.params),
                "reduction": red.mode,
                "reduction_name": p.reduction_name,
                "per_micro_batch": p.per_micro_batch,
                "per_token_weight": _per_token(w, mask).tolist(),
                "total_weight": float(w.sum()),
                "notes": p.notes,
                "version": p.version,
                "anchor": p.anchor,
            }
        )

    same_name = []
    for name, variants in REDUCTION_VARIANTS.items():
        rows = []
        for label, red, micro in variants:
            red = dataclasses.replace(
                red,
                micro_batch_size=mb if micro else None,
                max_len=lmax if red.mode == "seq_mean_token_sum_norm" else None,
            )
            rows.append(
                {
                    "framework": label,
                    "per_token_weight": _per_token(weights(red), mask).tolist(),
                }
            )
        differ, ratio = _differ([r["per_token_weight"] for r in rows])
        same_name.append(
            {"name": name, "variants": rows, "differ": differ, "max_ratio": ratio}
        )

    rules = []
    for topic, (rule, variants, points) in RULE_VARIANTS.items():
        coef = LOSSES[rule].coefficient
        p, q, a = (np.array(x, dtype=np.float64) for x in zip(*points))
        rows = []
        for label, override in variants:
            params = {**LOSSES[rule].defaults, **override}
            c, gated = coef(jnp.asarray(p), jnp.asarray(q), jnp.asarray(a), **params)
            rows.append(
                {
                    "framework": label,
                    "params": params,
                    "coefficient": np.asarray(c).tolist(),
                    "gated": np.asarray(gated).tolist(),
                }
            )
        differ, _ = _differ([r["coefficient"] for r in rows])
        rules.append(
            {
                "topic": topic,
                "rule": rule,
                "points": [
                    {"p": float(x), "q": float(y), "adv": float(z)}
                    for x, y, z in points
                ],
                "variants": rows,
                "differ": differ,
            }
        )

    return {
        "batch_shape": [b, g, t],
        "lengths": mask.sum(axis=1).astype(int).tolist(),
        "micro_batch_size": mb,
        "max_len": lmax,
        "presets": presets,
        "same_name": same_name,
        "rules": rules,
        "findings": list(FINDINGS),
    }
