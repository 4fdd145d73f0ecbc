"""The error contract of every command, kept by fuzzing (issue 11).

For every command: malformed numbers, shapes, dtypes, files, paths and user loss files
give exit 2 with ONE stderr line naming the value, never a traceback; every run is
bounded; stdout is empty on exit 2 and one JSON object with ``--json`` on exit 0.

Adding a command to the contract is one entry in :data:`VALID` (a valid command line):
the generic tests then fuzz every flag argparse knows for it, drop its required flags
and add unknown ones. :func:`test_every_command_has_a_contract_entry` fails until the
entry exists. Commands are run in-process through ``theorycheck.cli.main``; user loss
files run in a child process (the isolation under test), a few cases as a subprocess.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.commands._contract import check_contract, run_cli
from tests.models import _checkpoints as ck
from theorycheck import __version__
from theorycheck.cli import build_parser
from theorycheck.commands import _isolate
from theorycheck.losses._audit import synthetic_batch
from theorycheck.models import load_model

FUZZ = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A valid batch and a tiny checkpoint (HF directory + GGUF file)."""
    root = tmp_path_factory.mktemp("contract")
    batch = root / "batch.npz"
    np.savez(batch, **synthetic_batch(0, prompts=2, responses=2, length=4))
    model = root / "hf"
    tensors = ck.write_hf(str(model), "llama", seed=1)
    gguf = root / "tiny.gguf"
    ck.write_gguf(str(gguf), tensors, ck.config_dict("llama"))
    return {"root": root, "batch": str(batch), "model": str(model), "gguf": str(gguf)}


#: one valid ``--json`` command line per command (add new commands here).
VALID = {
    "audit": lambda f: ["audit", f["batch"], "--rules", "ppo", "--json"],
    "coefficient": lambda f: [
        *("coefficient", "ppo", "--p", "0.4", "--q", "0.5", "--adv", "1", "--json")
    ],
    "conventions": lambda f: ["conventions", "--batch-shape", "1,2,4", "--json"],
    "convexity": lambda f: [
        *("convexity", "sft", "--at", "0,1,2", "--sampled", "0", "--json")
    ],
    "logits": lambda f: [
        *("logits", "--model", f["model"], "--prompt", "the cat", "--top", "3"),
        "--json",
    ],
    "predict": lambda f: [
        *("predict", "--behavior", "0.5,0.3,0.2", "--policy", "0.2,0.3,0.5"),
        *("--sampled", "0", "--adv", "1", "--json"),
    ],
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return dict(action.choices)


def _options(command: str) -> list[argparse.Action]:
    """The options of ``command`` that take one value."""
    return [
        a
        for a in _subparsers()[command]._actions
        if a.option_strings and a.nargs is None and a.const is None
        if not isinstance(a, (argparse._HelpAction, argparse._StoreTrueAction))
    ]


def _replace(argv: list[str], flag: str, value: str, *, joined: bool) -> list[str]:
    """``argv`` with ``flag``'s value replaced (or the flag added)."""
    out = list(argv)
    if flag in out:
        i = out.index(flag)
        del out[i : i + 2]
    return out + ([f"{flag}={value}"] if joined else [flag, value])


ODD_TEXT = st.text(
    st.characters(exclude_categories=("Cs",)) | st.sampled_from("\udc80\x00\n"),
    max_size=12,
)
ODD_NUMBERS = st.sampled_from(
    ["nan", "inf", "-inf", "1e308", "1e999", "-1e308", "5e-324", "1e-320", "-0"]
)


def _not(convert):
    def fails(text: str) -> bool:
        try:
            convert(text)
        except (ValueError, OverflowError):
            return True
        return False

    return fails


def malformed(action: argparse.Action):
    """Strings that argparse refuses for ``action``, and odd ones it accepts."""
    if action.choices is not None:
        return ODD_TEXT.filter(lambda t: t not in action.choices)
    if action.type is float:
        return (
            st.sampled_from(["", "x", "1,2", "0x10", "1e", "--", "1..2", "1_0e"])
            | ODD_TEXT.filter(_not(float))
            | ODD_NUMBERS
        )
    if action.type is int:
        return (
            st.sampled_from(["1.5", "1e3", "", "x", "0x10", "nan"])
            | st.integers(-(10**30), 10**30).map(str)
            | ODD_TEXT.filter(_not(int))
        )
    return ODD_TEXT | ODD_NUMBERS


# ------------------------------------------------------------------ every command


def test_every_command_has_a_contract_entry():
    assert set(VALID) == set(_subparsers()), "add the command to VALID"


@pytest.mark.parametrize("command", sorted(VALID))
def test_the_valid_line_passes(files, command):
    check_contract(VALID[command](files), expect=0)


@pytest.mark.parametrize("command", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_every_flag_refuses_malformed_values(files, command, data):
    action = data.draw(st.sampled_from(_options(command)), label="option")
    flag = action.option_strings[-1]
    value = data.draw(malformed(action), label="value")
    joined = data.draw(st.booleans(), label="--flag=value")
    argv = _replace(VALID[command](files), flag, value, joined=joined)
    check_contract(argv, names=(flag, value))


@pytest.mark.parametrize("command", sorted(VALID))
def test_missing_and_unknown_flags_are_one_line(files, command):
    base = VALID[command](files)
    for action in _options(command):
        if action.required:
            flag = action.option_strings[-1]
            argv = _replace(base, flag, "", joined=False)[:-2]
            check_contract(argv, names=(flag,), expect=2)
    check_contract([*base, "--no-such-flag"], names=("--no-such-flag",), expect=2)
    check_contract([*base, "--no-such", "1"], names=("--no-such",), expect=2)


@pytest.mark.parametrize("command", sorted(VALID))
def test_help_prints_usage_on_stdout(command):
    res = run_cli([command, "--help"])
    assert res.code == 0 and res.out.startswith("usage: theorycheck") and not res.err


def test_version_and_no_command():
    res = run_cli(["--version"])
    assert (res.code, res.out.strip(), res.err) == (0, f"theorycheck {__version__}", "")
    check_contract([], names=("COMMAND", "command"), expect=2)
    check_contract(["nope"], names=("'nope'",), expect=2)


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


# ------------------------------------------------------------------------- audit


def _batch_fields():
    return synthetic_batch(1, prompts=2, responses=2, length=3)


MUTATIONS = {
    "drop": lambda b, f: {k: v for k, v in b.items() if k != f},
    "unknown": lambda b, f: {**b, "tokenz": np.zeros(2)},
    "complex": lambda b, f: {**b, f: b[f] + 1j},
    "strings": lambda b, f: {**b, f: b[f].astype(str)},
    "shape": lambda b, f: {**b, f: b[f].reshape(-1)[:-1]},
    "nan": lambda b, f: {**b, f: np.where(np.ones_like(b[f]) > 0, np.nan, b[f])},
    "prompt_id": lambda b, f: {**b, "prompt_id": b["group_id"][::-1] + 7},
    "empty": lambda b, f: {**b, "mask": np.zeros((0, 3)), "p": np.zeros((0, 3))},
}


def _write(path, kind: str, batch: dict) -> None:
    if kind == "npz":
        np.savez(path, **batch)
    elif kind == "json":
        path.write_text(
            json.dumps({k: np.asarray(v).tolist() for k, v in batch.items()})
        )
    elif kind == "json-list":
        path.write_text(json.dumps([1, 2, 3]))
    elif kind == "npy":
        with open(path, "wb") as fh:
            np.save(fh, np.zeros(3))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        np.savez(path, **batch)
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


@FUZZ
@given(
    mutation=st.sampled_from(sorted(MUTATIONS)),
    field=st.sampled_from(["p", "q", "adv", "mask", "group_id"]),
    kind=st.sampled_from(["npz", "json", "json-list", "npy", "empty", "truncated"]),
)
def test_audit_broken_batches(files, mutation, field, kind):
    batch = MUTATIONS[mutation](_batch_fields(), field)
    if kind == "json" and mutation == "complex":
        kind = "npz"  # JSON has no complex numbers
    suffix = ".json" if kind.startswith("json") else ".npz"
    path = files["root"] / f"broken-{mutation}-{field}-{kind}{suffix}"
    _write(path, kind, batch)
    argv = ["audit", str(path), "--rules", "ppo", "--json"]
    check_contract(argv, names=(str(path),), expect=2)


@pytest.mark.parametrize(
    "plot", ["DIR", "chart.txt", "missing/chart.png"], ids=["dir", "txt", "parent"]
)
def test_audit_plot_path_is_checked_before_the_work(files, plot):
    plot = str(files["root"]) if plot == "DIR" else str(files["root"] / plot)
    argv = ["audit", files["batch"], "--plot", plot, "--json"]
    res = check_contract(argv, names=(f"--plot {plot!r}",), expect=2)
    assert res.seconds < 5.0


def test_audit_same_group_and_prompt_ids_are_accepted(files):
    batch = _batch_fields()
    path = files["root"] / "both.npz"
    np.savez(path, **batch, prompt_id=batch["group_id"])
    check_contract(["audit", str(path), "--json"], expect=0)


def test_audit_all_masked_batch_makes_no_false_statement(files):
    batch = {**_batch_fields()}
    batch["mask"] = np.zeros_like(batch["mask"])
    path = files["root"] / "masked.npz"
    np.savez(path, **batch)
    out = json.loads(check_contract(["audit", str(path), "--json"], expect=0).out)
    assert out["zero_adv_group_share"] is None and out["empty_groups"] == 2
    assert all(r["gated_share"] is None for r in out["rules"])
    res = run_cli(["audit", str(path)])
    assert "no group has a valid token" in res.out and "100.00%" not in res.out


# ------------------------------------------------------------------------ logits


@functools.cache
def _cached_model(name: str):
    return load_model(name)


@FUZZ
@given(prompt=ODD_TEXT, top=st.integers(-3, 300))
def test_logits_prompts(files, prompt, top):
    """Prompts and --top against one loaded model (loading is covered above)."""
    argv = ["logits", "--model", files["model"], "--prompt", prompt, "--top", str(top)]
    with mock.patch("theorycheck.models.load_model", _cached_model):
        check_contract([*argv, "--json"], names=("--prompt", "--top"))


@pytest.mark.parametrize("kind", ["empty-dir", "empty-gguf", "half-gguf", "bad-config"])
def test_logits_broken_checkpoints(files, kind):
    root = files["root"] / f"model-{kind}"
    if kind == "empty-dir":
        root.mkdir()
        model = str(root)
    elif kind == "bad-config":
        import shutil

        shutil.copytree(files["model"], root)
        (root / "config.json").write_text("[1, 2")
        model = str(root)
    else:
        with open(files["gguf"], "rb") as fh:
            data = fh.read()
        model = str(root) + ".gguf"
        with open(model, "wb") as fh:
            fh.write(b"" if kind == "empty-gguf" else data[: len(data) // 2])
    check_contract(
        ["logits", "--model", model, "--prompt", "x"], names=(model,), expect=2
    )


# --------------------------------------------------------------------- convexity

NEEDS_REWRITE = pytest.mark.xfail(strict=True, reason="needs the convexity rewrite")

LOSSES = {
    "looping": "while True:\n    pass\n",
    "exits": """
        import sys
        def loss(logits, sampled, adv=1.0):
            sys.exit(0)
        """,
    "exits_at_import": "import sys\nsys.exit(3)\n",
    "chatty": """
        import jax.numpy as jnp
        def loss(logits, sampled, adv=1.0):
            print("hello from the loss")
            return -adv * jax_log_softmax(logits)[sampled]
        def jax_log_softmax(z):
            return z - jnp.log(jnp.sum(jnp.exp(z)))
        """,
    "raises": """
        def loss(logits, sampled, adv=1.0):
            raise RuntimeError("the user's own bug")
        """,
    "returns_int": """
        def loss(logits, sampled, adv=1.0):
            return 3
        """,
    "returns_complex": """
        import jax.numpy as jnp
        def loss(logits, sampled, adv=1.0):
            return jnp.sum(logits) * 1j
        """,
    "reads_out_of_range": """
        import jax.numpy as jnp
        def loss(logits, sampled, adv=1.0):
            return jnp.take(logits, sampled + 10, mode="fill", fill_value=jnp.nan)
        """,
    "nan_at_point": """
        import jax.numpy as jnp
        def loss(logits, sampled, adv=1.0):
            return jnp.sum(jnp.log(logits) ** 2)
        """,
}


@pytest.fixture(scope="module")
def user_losses(tmp_path_factory):
    root = tmp_path_factory.mktemp("user_losses")
    out = {}
    for name, text in LOSSES.items():
        path = root / f"{name}.py"
        path.write_text(textwrap.dedent(text))
        out[name] = f"{path}:loss"
    return out


AT = ["--at", "0.5,1,2", "--sampled", "0", "--json"]


@pytest.mark.parametrize(
    "name,needle",
    [
        ("exits", "called sys.exit(0)"),
        ("exits_at_import", "called sys.exit(3)"),
        ("raises", "RuntimeError: the user's own bug"),
        ("returns_int", "returns_int.py:loss"),
        ("returns_complex", "returns_complex.py:loss"),
    ],
)
def test_convexity_user_code_that_misbehaves_is_one_line(user_losses, name, needle):
    check_contract(["convexity", user_losses[name], *AT], names=(needle,), expect=2)


def test_convexity_a_loss_reading_out_of_range_is_refused(user_losses):
    """JAX clamps an out-of-range index; ``mode="fill"`` makes the loss NaN, which
    the checker's sanity check refuses before any stage."""
    argv = ["convexity", user_losses["reads_out_of_range"], "--json"]
    check_contract(argv, names=("not finite",), expect=2)


def test_convexity_user_prints_never_reach_stdout(user_losses):
    res = check_contract(["convexity", user_losses["chatty"], *AT], expect=0)
    assert "hello from the loss" in res.err
    assert json.loads(res.out)["loss"] == "chatty.py:loss"


def test_convexity_a_looping_module_is_stopped_at_its_deadline(
    user_losses, monkeypatch
):
    monkeypatch.setattr(_isolate, "DEADLINE_BASE_S", 3.0)
    argv = ["convexity", user_losses["looping"], "--timeout", "0.1", "--json"]
    res = check_contract(argv, names=("--timeout 0.1",), expect=2)
    assert res.seconds < 3.0 + 1.0 + 3.0


@pytest.mark.slow
def test_convexity_timeout_bounds_the_whole_run_as_a_subprocess(user_losses):
    """The real deadline (20 s + 10 x --timeout), from a separate process."""
    argv = [sys.executable, "-m", "theorycheck", "convexity", user_losses["looping"]]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(
        [*argv, "--timeout", "0.1", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "21 s (= 20 + 10 x --timeout 0.1)" in (
        proc.stderr
    )


def test_version_as_a_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "theorycheck", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, f"theorycheck {__version__}")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308"])
def test_convexity_timeout_is_checked_before_the_work(value):
    argv = ["convexity", "sft", "--timeout", value, "--json"]
    res = check_contract(argv, names=("--timeout",), expect=2)
    assert res.seconds < 5.0


@NEEDS_REWRITE
def test_convexity_loss_not_finite_at_the_point(user_losses):
    argv = [
        "convexity",
        user_losses["nan_at_point"],
        "--at",
        "-1,1,2",
        "--sampled",
        "0",
    ]
    check_contract([*argv, "--json"], names=("not finite",), expect=2)


@NEEDS_REWRITE
@pytest.mark.parametrize("key", ["bta=2", "kappa=3"])
def test_convexity_unknown_set_key(key):
    argv = ["convexity", "ppo", "--set", key, *AT]
    check_contract(argv, names=(key.split("=")[0],), expect=2)


@NEEDS_REWRITE
def test_convexity_report_path_is_checked_before_the_work(files):
    argv = ["convexity", "sft", "--report", files["batch"], "--timeout", "0.1"]
    argv += ["--json"]
    res = check_contract(argv, names=("--report",), expect=2)
    assert res.seconds < 5.0


@NEEDS_REWRITE
def test_convexity_at_refuses_a_2d_npy(files):
    path = files["root"] / "z2d.npy"
    np.save(path, np.zeros((2, 3)))
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, names=(str(path), "--at"), expect=2)


@NEEDS_REWRITE
def test_convexity_at_refuses_an_unreadable_npy(files):
    path = files["root"] / "garbage.npy"
    path.write_bytes(b"garbage")
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, names=(str(path), "--at"), expect=2)


@NEEDS_REWRITE
def test_convexity_at_reads_whitespace_separated_txt(files):
    path = files["root"] / "z.txt"
    path.write_text("0.5 1\n2\n")
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, expect=0)


# ------------------------------------------------------------------- meta-test


class _Broken:
    """A command that breaks the contract in every way the checker must catch."""

    NAME = "broken"
    HELP = "breaks the contract on purpose"

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--mode", required=True)

    @staticmethod
    def run(args):
        from theorycheck._errors import BadInput

        if args.mode == "raise":
            raise ValueError("not a BadInput: a traceback")
        if args.mode == "two-lines":
            print("first\nsecond", file=sys.stderr)
            return 2
        if args.mode == "not-json":
            print("plain text")
            return 0
        if args.mode == "nan":
            print(json.dumps({"value": float("nan")}))
            return 0
        if args.mode == "null":
            print(json.dumps({"value": None}))
            return 0
        if args.mode == "exit-1":
            return 1
        if args.mode == "stdout-on-error":
            print("{}")
            raise BadInput("--mode stdout-on-error: refused")
        if args.mode == "vague":
            raise BadInput("something is wrong")
        print(json.dumps({"value": 1.0}))
        return 0


@pytest.mark.parametrize(
    "mode",
    [
        "raise",
        "two-lines",
        "not-json",
        "nan",
        "null",
        "exit-1",
        "stdout-on-error",
        "vague",
    ],
)
def test_meta_the_checker_catches_a_broken_handler(monkeypatch, mode):
    import theorycheck.cli as cli

    real = cli._command_modules
    monkeypatch.setattr(cli, "_command_modules", lambda: [*real(), _Broken])
    argv = ["broken", "--mode", mode, "--json"]
    with pytest.raises(AssertionError):
        check_contract(argv, names=("--mode",), required_numbers=("value",))
    check_contract(["broken", "--mode", "ok", "--json"], required_numbers=("value",))
