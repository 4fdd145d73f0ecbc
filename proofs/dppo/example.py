r"""DPPO's worked example: the ratio is blind to how much probability mass moves.

.. math::
    \mu = 10^{-4} \to \pi = 10^{-2}:\ r = 100,\ |\pi - \mu| = 0.0099; \qquad
    \mu = 0.99 \to \pi = 0.80:\ r = 0.808,\ |\pi - \mu| = 0.19

PPO (epsilon 0.2) clips the first (for A > 0) and not the second (for A < 0, r >=
0.8); DPPO's binary-TV mask (delta 0.15, Eq. (12)) keeps the first and blocks the
second. The survey's own example (``survey.dppo_vs_ppo_example``: q = 0.90 -> p =
0.74, A = -1) is the second case's kind.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    failed,
    passed,
    require_float64,
)

from ._common import SOURCE

#: The example's (mu, pi) pairs and the advantage sign each is read with.
CASES = (
    (sp.Rational(1, 10_000), sp.Rational(1, 100), 1),  # rare token up: A > 0
    (sp.Rational(99, 100), sp.Rational(80, 100), -1),  # common token down: A < 0
)
#: PPO's epsilon and DPPO's binary-TV threshold (the notes' recommended 0.15).
PPO_EPS, DPPO_TV_DELTA = sp.Rational(1, 5), sp.Rational(3, 20)
#: The example's stated numbers: (r, moved mass) per case, as printed.
STATED = ((100, None), (0.808, 0.19))


def _exact() -> CheckResult:
    rows = []
    for (mu, pi, sign), (r_text, mass_text) in zip(CASES, STATED):
        r, mass = pi / mu, abs(pi - mu)
        ppo_clips = r > 1 + PPO_EPS if sign > 0 else r < 1 - PPO_EPS
        dppo_blocks = mass > DPPO_TV_DELTA and (r > 1 if sign > 0 else r < 1)
        rows.append((r, mass, ppo_clips, dppo_blocks))
        near = abs(r - sp.nsimplify(r_text)) <= sp.Rational(1, 2000)
        if mass_text is not None:
            near = near and mass == sp.nsimplify(mass_text)
        if not near:
            return failed(
                f"mu = {mu} -> pi = {pi}: r = {r}, mass {mass}, not the stated "
                f"{r_text}, {mass_text}",
                {"mu": str(mu), "pi": str(pi), "r": str(r), "mass": str(mass)},
            )
    (r1, m1, clip1, block1), (r2, m2, clip2, block2) = rows
    if not (clip1 and not block1 and not clip2 and block2):
        return failed(
            "the gates do not split as stated",
            {"ppo_clips": [clip1, clip2], "dppo_blocks": [block1, block2]},
        )
    return passed(
        f"exact rationals: r = {r1} with mass {m1} (PPO clips for A > 0, DPPO keeps: "
        f"{m1} <= {DPPO_TV_DELTA}); r = {r2} ~ {float(r2):.4f} with mass {m2} (PPO "
        f"keeps for A < 0: r >= {1 - PPO_EPS}; DPPO blocks: {m2} > {DPPO_TV_DELTA})"
    )


def _registry(quick: bool = False) -> CheckResult:
    from theorycheck.losses import LOSSES
    from theorycheck.numeric import binary_tv, dppo_mask

    require_float64()
    mu = np.array([float(c[0]) for c in CASES])
    pi = np.array([float(c[1]) for c in CASES])
    adv = np.array([float(c[2]) for c in CASES])
    _, ppo_gated = LOSSES["ppo"].coefficient(pi, mu, adv)
    delta = float(DPPO_TV_DELTA)
    _, dppo_gated = LOSSES["dppo_binary_tv"].coefficient(pi, mu, adv, delta=delta)
    mask = np.asarray(dppo_mask(binary_tv(pi, mu), pi / mu, adv, delta=delta))
    got = {
        "ppo_gated": np.asarray(ppo_gated).tolist(),
        "dppo_gated": np.asarray(dppo_gated).tolist(),
        "eq12_mask": mask.tolist(),
    }
    want = {
        "ppo_gated": [True, False],
        "dppo_gated": [False, True],
        "eq12_mask": [1.0, 0.0],
    }
    if got != want:
        return failed("the registry's gates differ from the example", got)
    return passed(
        "registry (float64): ppo gates the rare token's r = 100 and keeps the common "
        "token's r = 0.808; dppo_binary_tv (delta 0.15) and numeric.dppo_mask on "
        "numeric.binary_tv keep the first and block the second",
        data=got,
    )


WORKED_EXAMPLE_RATIO_BLIND_TO_MASS = Claim(
    id="dppo.worked_example_ratio_blind_to_mass",
    source=f"{SOURCE}, worked example (the research notes place it in §4.2: "
    "unconfirmed); beside the survey's 'DPPO' example",
    provenance="PAPER",
    quote=(
        "mu = 1e-4 -> pi = 1e-2 gives r = 100 (clipped, tiny TV); mu = 0.99 -> pi = "
        "0.80 gives r = 0.808 (often not clipped, moves 0.19 of probability mass)"
    ),
    location="worked example (section unconfirmed)",
    kind=Kind.REMARK,
    assumptions=(
        "PPO epsilon 0.2; DPPO binary TV with delta 0.15 (the recommended TV "
        "threshold)",
        "the first pair read with A > 0, the second with A < 0 (the sides on which "
        "each gate acts)",
    ),
    statement=(
        "mu = 1e-4 -> pi = 1e-2: r = 100, clipped by PPO (A > 0), yet only 0.0099 of "
        "mass moves and DPPO keeps it; mu = 0.99 -> pi = 0.80: r = 0.808, inside "
        "PPO's [0.8, 1.2] (A < 0), yet 0.19 > 0.15 of mass moves and DPPO blocks "
        "it. As in the survey's example (q = 0.90 -> p = 0.74), the ratio alone "
        "misjudges how far a common token moves."
    ),
    checks=(
        Check("exact rationals, the two pairs", Method.SYMBOLIC, _exact),
        Check("registry gates, float64", Method.NUMERIC, _registry),
    ),
)
