"""Statistics over seeds: mean, standard error, a bootstrap interval, the minimum
detectable effect."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values, *, reps: int = 2000, seed: int = 0) -> list | None:
    """95% percentile bootstrap interval of the mean over seeds (None values left
    out; None with fewer than 2 values).

    Examples:
        >>> lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
        >>> 1.0 <= lo <= 2.5 <= hi <= 4.0
        True
    """
    xs = np.array([v for v in values if v is not None], np.float64)
    if len(xs) < 2:
        return None
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, len(xs), (reps, len(xs)))].mean(axis=1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def stat(values) -> dict:
    """``{"mean", "se", "n", "ci95"}`` over seeds; ``mde``: the smallest difference
    from 0 a two-sided 5% test over these seeds detects with 80% power,
    :math:`(z_{0.975} + z_{0.8})\\,s/\\sqrt n` (normal approximation)."""
    from theorycheck.probes import mean_se

    out = mean_se(values)
    out["ci95"] = bootstrap_ci(values)
    out["mde"] = None if out["se"] is None else float(2.8016 * out["se"])
    return out
