"""The error contract, per command: numbers, vectors and shapes (``coefficient``,
``predict``, ``conventions``); see ``test_contract.py`` for the generic part."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.commands._contract import (
    FUZZ,
    ODD_NUMBERS,
    check_contract,
)

# ------------------------------------------------------------------- coefficient

TOKEN_RULES = ["pg", "is_pg", "ppo", "dapo", "dual_clip", "cispo", "glm5", "sapo"]
TOKEN_RULES += ["dppo_binary_tv", "dppo_binary_kl", "dppo_capped"]
NUMBER = st.floats(allow_nan=True, allow_infinity=True).map(repr) | ODD_NUMBERS


def _looks_like_a_flag(text: str) -> bool:
    """argparse reads ``-1e-05`` or ``-inf`` as an option, not a value."""
    return text.startswith("-") and not re.match(r"^-\d+$|^-\d*\.\d+$", text)


def _prob_ok(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and 0 < value <= 1 and not text.startswith("-")


@FUZZ
@given(
    name=st.sampled_from(TOKEN_RULES),
    p=NUMBER | st.floats(0, 1).map(repr),
    q=NUMBER | st.floats(0, 1).map(repr),
    adv=NUMBER,
)
def test_coefficient_numbers(name, p, q, adv):
    argv = ["coefficient", name, "--p", p, "--q", q, "--adv", adv, "--json"]
    names = ["--p"] if not _prob_ok(p) else ["--q"] if not _prob_ok(q) else []
    names += [f for f, v in (("--q", q), ("--adv", adv)) if _looks_like_a_flag(v)]
    res = check_contract(
        argv,
        names=names or ["--adv", "coefficient"],
        required_numbers=("coefficient", "log_ratio", "p", "q", "adv"),
    )
    if res.code == 0:
        out = json.loads(res.out)
        p_, q_ = float(p), float(q)
        assert out["log_ratio"] == pytest.approx(math.log(p_) - math.log(q_))


@pytest.mark.parametrize(
    "argv,name",
    [
        (["cispo", "--p", "1", "--q", "0.5", "--adv", "1e308"], "--adv 1e+308"),
        (["is_pg", "--p", "1", "--q", "1e-320", "--set", "log_ratio_clamp=inf"], "inf"),
    ],
)
def test_coefficient_overflow_exits_2(argv, name):
    if "--adv" not in argv:
        argv = [*argv, "--adv", "1"]
    check_contract(["coefficient", *argv, "--json"], names=(name,), expect=2)


def test_coefficient_tiny_q_gives_a_finite_log_ratio():
    argv = ["coefficient", "pg", "--p", "1", "--q", "1e-320", "--adv", "-1", "--json"]
    out = json.loads(check_contract(argv, expect=0).out)
    assert out["ratio"] is None  # p/q overflows float64: said, not inf
    assert out["log_ratio"] == math.log(1.0) - math.log(1e-320)
    assert out["log_ratio"] == pytest.approx(736.8272408909739, rel=1e-15)


# ----------------------------------------------------------------------- predict

PROBS = st.lists(
    st.floats(0, 1) | st.sampled_from([0.0, 1.0, 1e-320, 5e-324, -0.1, math.nan]),
    min_size=1,
    max_size=6,
)


def _csv(values, normalise: bool) -> str:
    total = math.fsum(v for v in values if math.isfinite(v))
    if normalise and total > 0:
        values = [v / total for v in values]
    return ",".join(repr(v) for v in values)


@FUZZ
@given(
    mu=PROBS,
    pi=PROBS,
    norm=st.booleans(),
    sampled=st.integers(-2, 7),
    adv=NUMBER,
    extra=st.sampled_from(
        [[], ["--divergence", "tv"], ["--estimator", "topk-uniform", "--topk", "2"]]
    ),
)
def test_predict_vectors(mu, pi, norm, sampled, adv, extra):
    argv = ["predict", "--behavior", _csv(mu, norm), "--policy", _csv(pi, norm)]
    argv += ["--sampled", str(sampled), "--adv", adv, *extra, "--json"]
    check_contract(
        argv,
        names=("--behavior", "--policy", "--sampled", "--adv", "--topk"),
        required_numbers=("divergence", "ddot", "local", "global", "ratio"),
    )


# ------------------------------------------------------------------- conventions

DIM = st.integers(-2, 6) | st.integers(10**7, 10**12)


@FUZZ
@given(
    shape=st.lists(DIM, min_size=0, max_size=4),
    lengths=st.none() | st.lists(st.integers(-1, 12), max_size=8),
    micro=st.none() | st.integers(-1, 5),
    max_len=st.none() | st.integers(-1, 14),
)
def test_conventions_shapes(shape, lengths, micro, max_len):
    argv = ["conventions", "--batch-shape", ",".join(map(str, shape)), "--json"]
    if lengths is not None:
        argv += ["--lengths", ",".join(map(str, lengths))]
    if micro is not None:
        argv += ["--micro-batch-size", str(micro)]
    if max_len is not None:
        argv += ["--max-len", str(max_len)]
    check_contract(
        argv, names=("--batch-shape", "--lengths", "--micro-batch-size", "--max-len")
    )


@pytest.mark.parametrize(
    "argv,name",
    [
        (["--batch-shape", "100000,1000,100000"], "--batch-shape 100000,1000,100000"),
        (
            ["--batch-shape", "1,2,8", "--lengths", "3,8", "--max-len", "5"],
            "--max-len 5",
        ),
    ],
)
def test_conventions_rows_of_the_issue(argv, name):
    res = check_contract(["conventions", *argv, "--json"], names=(name,), expect=2)
    assert res.seconds < 5.0  # refused up front, not after building the batch
