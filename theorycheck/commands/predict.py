"""``theorycheck predict``: divergence, its Ḋ along v = e_k - pi, and both masks.

For one token: D(mu || pi) (full, or top-K with a tail bucket), Ḋ split into its local
and global terms, the DPPO mask with the ratio direction (``ratio_mask``, Eq. 12) and
the predictive mask with the Ḋ direction (``predictive_mask``), both with the same D and
delta, plus vᵀ∇²D v and the first-order radius (float64 throughout).
"""

from __future__ import annotations

import argparse
import math

NAME = "predict"
HELP = "divergence, its directional derivative and both masks for one token"

_DEFAULT_DELTA = {"kl": 0.05, "tv": 0.15}  # DPPO's recommended thresholds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--behavior",
        required=True,
        metavar="CSV",
        help="behavior probabilities mu (comma-separated, sum to 1)",
    )
    parser.add_argument(
        "--policy",
        required=True,
        metavar="CSV",
        help="policy probabilities pi (comma-separated, positive, sum to 1)",
    )
    parser.add_argument(
        "--sampled",
        type=int,
        required=True,
        metavar="K",
        help="sampled token index (0-based)",
    )
    parser.add_argument("--adv", type=float, required=True, help="advantage")
    parser.add_argument(
        "--divergence",
        choices=("kl", "tv"),
        default="kl",
        help="forward KL(mu || pi) or TV (default kl)",
    )
    parser.add_argument(
        "--estimator",
        default="full",
        choices=("full", "topk-aggregated", "topk-uniform", "topk-proportional"),
        help="Ddot estimator (default full); top-K ones use the top-K divergence",
    )
    parser.add_argument(
        "--topk",
        type=int,
        default=None,
        metavar="K",
        help="K for top-K estimators (default min(20, V))",
    )
    parser.add_argument(
        "--support",
        choices=("union", "k-slots"),
        default=None,
        help="top-K support (default union): TopK(mu,K) + {k} (DPPO Eq. 15-16) or "
        "k replacing the K-th slot (DPPO reference code)",
    )
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="divergence threshold (default 0.05 KL, 0.15 TV)",
    )


def parse_probabilities(flag: str, text: str, *, positive: bool) -> list[float]:
    """Parses a CSV probability vector; raises BadInput naming the bad entry."""
    from theorycheck._errors import BadInput

    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise BadInput(
            f"{flag} {text!r} is not a comma-separated list of numbers"
        ) from None
    for i, p in enumerate(values):
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            raise BadInput(f"{flag} entry {i} = {p!r} is not a probability in [0, 1]")
        if positive and p <= 0.0:
            raise BadInput(f"{flag} entry {i} = {p!r} must be positive")
    total = math.fsum(values)
    if abs(total - 1.0) > 1e-6:
        raise BadInput(f"{flag} sums to {total!r}, not 1 within 1e-6")
    return values


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def ddot_tolerance(mu: list[float], pi: list[float], k: int, kind: str) -> float:
    r"""The rounding bound below which ``predict`` reports Ḋ (and its local and global
        parts) as 0: what float64 can resolve of Ḋ for these inputs.

        The command rebuilds π = exp(log_softmax(log π)) and μ = exp(log μ), so each
        entry carries a relative error of at most
        :math:`r^\pi_i = arepsilon(|\log\pi_i| + L + 2)`,
        :math:`r^\mu_i = arepsilon(|\log\mu_i| + 2)` (:math:`L = \lceil\log_2 V
    ceil`,
        the normaliser's pairwise sum; :math:`arepsilon = 2^{-52}`, twice the unit
        roundoff, as margin). To first order the error of Ḋ is then at most

        .. math::
                    au = arepsilon (L + 2) M + \sum_i r^\pi_i\, \pi_i\, g^\pi_i
                   + \sum_i r^\mu_i\, \mu_i\, g^\mu_i

        with M the sum of the absolute values of Ḋ's products and g the bounds on
        |∂Ḋ/∂π_i|, |∂Ḋ/∂μ_i| (Ḋ's formulas in :mod:`theorycheck.numeric`):

        * KL: :math:`M = \pi_k + \mu_k + \sum_i \pi_i(\pi_i + \mu_i)`,
          :math:`g^\pi_i = [i = k] + \mu_i + 2\pi_i`, :math:`g^\mu_i = [i = k] + \pi_i`;
        * TV (signs fixed; a difference below rounding is a tie, see
          docs/numeric.md): :math:`M = \pi_k + \sum_i \pi_i^2`,
          :math:`g^\pi_i = [i = k] + \pi_k + 2\pi_i + 	frac12\sum_j \pi_j^2`,
          :math:`g^\mu = 0`.

        The top-K estimators regroup the same products (support slots and a tail
    bucket), so the same bound is used for them.

        Examples:
            >>> tol = ddot_tolerance([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], 0, "kl")
            >>> 1e-16 < tol < 1e-14
            True
    """
    import numpy as np

    eps = float(np.finfo(np.float64).eps)
    p = np.asarray(pi, np.float64)
    m = np.asarray(mu, np.float64)
    onehot = np.arange(p.size) == k
    big_l = max(1, (p.size - 1).bit_length())
    r_pi = np.abs(np.log(p)) + big_l + 2
    with np.errstate(divide="ignore"):
        r_mu = np.where(m > 0, np.abs(np.log(np.where(m > 0, m, 1.0))) + 2, 0.0)
    if kind == "kl":
        size = p[k] + m[k] + np.sum(p * (p + m))
        g_pi = onehot + m + 2 * p
        g_mu = onehot + p
    else:
        size = p[k] + np.sum(p * p)
        g_pi = onehot + p[k] + 2 * p + 0.5 * np.sum(p * p)
        g_mu = np.zeros_like(p)
    rounding = np.sum(r_pi * p * g_pi) + np.sum(r_mu * m * g_mu)
    return float(eps * ((big_l + 2) * size + rounding))


def _resolved(x: float, tol: float) -> float:
    """``x``, or 0.0 when its magnitude is within rounding (``tol``)."""
    return 0.0 if abs(x) <= tol else x


def predict(args: argparse.Namespace) -> dict:
    """Computes the JSON record of ``theorycheck predict`` (float64)."""
    import jax
    import numpy as np

    from theorycheck._errors import BadInput
    from theorycheck.numeric import (
        ddot,
        divergence,
        dppo_mask,
        first_order_radius,
        predictive_mask,
        second_order,
    )

    mu = parse_probabilities("--behavior", args.behavior, positive=False)
    pi = parse_probabilities("--policy", args.policy, positive=True)
    if len(mu) != len(pi):
        raise BadInput(f"--behavior has {len(mu)} entries but --policy has {len(pi)}")
    v = len(pi)
    if not 0 <= args.sampled < v:
        raise BadInput(f"--sampled {args.sampled} is out of range for V = {v}")
    if mu[args.sampled] <= 0.0:
        raise BadInput(
            f"--behavior gives the sampled token {args.sampled} "
            "probability 0: it cannot have been sampled"
        )
    if not math.isfinite(args.adv):
        raise BadInput(f"--adv {args.adv!r} must be finite")
    if not math.isfinite(pi[args.sampled] / mu[args.sampled]):
        raise BadInput(
            f"--behavior entry {args.sampled} = {mu[args.sampled]!r}: the ratio "
            f"pi_k / mu_k = {pi[args.sampled]!r} / {mu[args.sampled]!r} overflows "
            "float64"
        )
    if args.estimator == "full":
        for flag, value in (("--topk", args.topk), ("--support", args.support)):
            if value is not None:
                raise BadInput(
                    f"{flag} {value} is used only by a top-K --estimator, not 'full'"
                )
    topk = min(20, v) if args.topk is None else args.topk
    if not 1 <= topk <= v:
        raise BadInput(f"--topk {topk} must lie in [1, V = {v}]")
    delta = _DEFAULT_DELTA[args.divergence] if args.delta is None else args.delta
    if not (math.isfinite(delta) and delta >= 0):
        raise BadInput(f"--delta {delta!r} must be finite and >= 0")
    estimator = args.estimator.replace("-", "_")
    support = (args.support or "union").replace("-", "_")
    full = estimator == "full"
    kind = args.divergence if full else "topk_" + args.divergence

    with jax.enable_x64(True):
        with np.errstate(divide="ignore"):
            b = np.log(np.asarray(mu, np.float64))
        z = np.log(np.asarray(pi, np.float64))
        k = np.int64(args.sampled)
        kw = {} if full else {"topk": topk, "support": support}
        # every divergence here is >= 0 (Gibbs): a negative value is rounding
        d = max(float(divergence(b, z, k, kind=kind, **kw)), 0.0)
        res = ddot(
            b,
            z,
            k,
            kind=args.divergence,
            estimator=estimator,
            **({} if full else {"topk": topk, "support": support}),
        )
        tol = ddot_tolerance(mu, pi, args.sampled, args.divergence)
        dd = _resolved(float(res.ddot), tol)
        exact = (
            dd
            if full
            else _resolved(
                float(
                    ddot(
                        b,
                        z,
                        k,
                        kind=args.divergence,
                        estimator="topk_proportional",
                        topk=topk,
                        support=support,
                    ).ddot
                ),
                tol,
            )
        )
        radius = float(first_order_radius(b, z, k, kind=kind, **kw))
        if _sign(exact) != _sign(dd):
            radius = 0.0  # the estimate's sign is not the true first-order sign
        curv = float(second_order(b, z, k, kind=kind, **kw))
        ratio = pi[args.sampled] / mu[args.sampled]
        adv = np.float64(args.adv)
        rmask = float(dppo_mask(np.float64(d), np.float64(ratio), adv, delta=delta))
        pmask = float(predictive_mask(np.float64(d), np.float64(dd), adv, delta=delta))
    return {
        "divergence": d,
        "ddot": dd,
        "local": _resolved(float(res.local), tol),
        "global": _resolved(float(res.global_), tol),
        "ddot_tolerance": tol,
        "ratio": ratio,
        "ratio_direction": _sign(args.adv * (ratio - 1.0)),
        "predicted_direction": _sign(args.adv * dd),
        "ratio_mask": int(rmask),
        "predictive_mask": int(pmask),
        "second_order": curv,
        "first_order_radius": radius if math.isfinite(radius) else None,
    }


def run(args: argparse.Namespace) -> int:
    from theorycheck.commands._output import emit_json

    out = predict(args)
    if args.json:
        emit_json(out)
        return 0
    kind = args.divergence.upper() + (
        ""
        if args.estimator == "full"
        else f" top-{args.topk or 'K'} ({args.estimator})"
    )
    word = {1: "increase", 0: "none", -1: "decrease"}
    print(f"D_{kind} = {out['divergence']:.6g}   r = {out['ratio']:.6g}")
    print(
        f"Ddot = {out['ddot']:.6g}  (local {out['local']:.6g}, "
        f"global {out['global']:.6g}; |Ddot| <= {out['ddot_tolerance']:.2g} "
        "is rounding and counts as 0)"
    )
    print(
        f"ratio direction: {word[out['ratio_direction']]}; "
        f"predicted direction: {word[out['predicted_direction']]}"
    )
    print(
        f"ratio mask (DPPO Eq. 12): {'keep' if out['ratio_mask'] else 'masked'}; "
        f"predictive mask: {'keep' if out['predictive_mask'] else 'masked'}"
    )
    rad = out["first_order_radius"]
    print(
        f"v'H v = {out['second_order']:.6g}; first-order sign guaranteed for "
        f"|t| < {'inf' if rad is None else format(rad, '.6g')} (z + t v)"
    )
    return 0
