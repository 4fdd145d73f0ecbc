"""Checks run in float64, scoped: nothing leaves the process in float64 afterwards.

The test session itself runs with x64 on (tests/conftest.py), so the process-default
assertions run in a fresh interpreter."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import jax, jax.numpy as jnp
from theorycheck.claims import Check, Claim, Method, evaluate, float64, passed
from theorycheck.claims import run_claims

assert jnp.zeros(1).dtype == jnp.float32
with float64():
    assert jnp.zeros(1).dtype == jnp.float64
assert jnp.zeros(1).dtype == jnp.float32

seen = []
def _dtype():
    seen.append(str(jnp.zeros(1).dtype))
    return passed("dtype recorded")
claim = Claim("dtype.seen", "s", "DERIVED", "st",
              (Check("a", Method.NUMERIC, _dtype), Check("b", Method.SYMBOLIC, _dtype)))
assert str(evaluate(claim).status) == "holds"
assert seen == ["float64", "float64"], seen

# the pdm and dppo checks once switched jax_enable_x64 on for the whole process
results = run_claims(
    ["proofs/pdm/prop1.py", "proofs/dppo/masks.py"],
    only=["pdm.local_term_is_ratio_sign", "dppo.mask_direction_rule"],
    quick=True,
)
assert [str(r.status) for r in results] == ["holds", "holds"], results
assert not jax.config.jax_enable_x64
assert jnp.zeros(1).dtype == jnp.float32 and jnp.asarray(1.0).dtype == jnp.float32
print("float32 after prove")
"""


def test_checks_run_in_float64_and_the_process_stays_float32():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "float32 after prove" in out.stdout
