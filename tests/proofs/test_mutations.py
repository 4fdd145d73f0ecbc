"""Mutation meta-test: the claims exercise the project's own engines.

Each mutation is planted in a temporary copy of ``theorycheck/`` and ``proofs/`` (a
constant a claim tests, a sign in the numeric core's Ḋ, the ½ of the core's full TV,
an index of Theorem 3.1's Δ off by one); ``theorycheck prove --quick`` then runs only
the claims concerned in that copy, and at least one status must change from the
unmutated copy's. The runs go side by side (one process each) to stay fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: name -> (file, the exact text, its mutation, the claims that must notice)
MUTATIONS = {
    "constant: Pinsker's C = 1/4": (
        "proofs/dppo/theorems.py",
        "T32_C, PINSKER_C = 2, 0.5",
        "T32_C, PINSKER_C = 2, 0.25",
        ("dppo.pinsker",),
    ),
    "sign: the core's KL Ḋ global term": (
        "theorycheck/numeric/_ddot.py",
        "glob = jnp.sum(pi * (mu - pi), axis=-1)\n    else:",
        "glob = jnp.sum(pi * (pi - mu), axis=-1)\n    else:",
        ("pdm.prop1_ddot_closed_form",),
    ),
    "the ½ of the core's full TV dropped": (
        "theorycheck/numeric/_divergence.py",
        "return 0.5 * jnp.sum(jnp.abs(jnp.exp(behavior_logp) - jnp.exp(logp))",
        "return 1.0 * jnp.sum(jnp.abs(jnp.exp(behavior_logp) - jnp.exp(logp))",
        ("dppo.core_divergences_match_the_paper",),
    ),
    "Δ off by one: Theorem 3.1's product from j = t": (
        "proofs/dppo/theorems.py",
        "for j in range(t + 1, len(y)):",
        "for j in range(t, len(y)):",
        ("dppo.theorem3_1",),
    ),
}


def _copy(dest: Path, mutation: tuple | None) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("theorycheck", "proofs"):
        shutil.copytree(ROOT / part, dest / part, ignore=ignore)
    if mutation is not None:
        file, old, new, _ = mutation
        path = dest / file
        text = path.read_text()
        assert text.count(old) == 1, f"{file}: the text to mutate is not there once"
        path.write_text(text.replace(old, new))
    return dest


def _start(root: Path, ids) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(root), "THEORYCHECK_PROGRESS": "0"}
    env.pop("THEORYCHECK_PROOFS", None)
    only = [a for cid in ids for a in ("--only", cid)]
    argv = [sys.executable, "-m", "theorycheck", "prove", "proofs", "--quick"]
    return subprocess.Popen(
        [*argv, *only, "--json"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _statuses(proc: subprocess.Popen) -> dict[str, str]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    return {c["id"]: c["status"] for c in json.loads(out)["claims"]}


def test_every_planted_mutation_changes_a_status(tmp_path):
    concerned = sorted({cid for m in MUTATIONS.values() for cid in m[3]})
    runs = {None: _start(_copy(tmp_path / "base", None), concerned)}
    for i, (name, mutation) in enumerate(MUTATIONS.items()):
        runs[name] = _start(_copy(tmp_path / f"m{i}", mutation), mutation[3])
    got = {name: _statuses(proc) for name, proc in runs.items()}
    base = got.pop(None)
    assert all(base[c] == "holds" for c in concerned), base
    unchanged = [
        name
        for name, statuses in got.items()
        if all(statuses[c] == base[c] for c in MUTATIONS[name][3])
    ]
    assert not unchanged, f"mutations no status noticed: {unchanged} ({got})"
