"""The error contract against an adversarial user, class by class (issue 18, §4): each
case answers exit 2 with ONE stderr line naming the bad value, or exit 0 with a true
answer; never a traceback, a hang or a silent reinterpretation (``audit``,
``coefficient``, ``conventions``, ``logits``, ``predict``, ``prove``, ``reproduce``, the
dispatcher). ``convexity``'s inputs are in ``test_contract_files.py``."""

from __future__ import annotations

import os

import pytest

from tests.commands._contract import check_contract

BATCH = "examples/batches/synthetic.json"
COEF = ["coefficient", "ppo", "--p", "0.5", "--q", "0.5", "--adv", "1"]
PRED = ["predict", "--behavior", "0.5,0.5", "--policy", "0.4,0.6", "--sampled", "0"]
PRED += ["--adv", "1"]
CONV = ["conventions", "--batch-shape", "1,2,4"]


# ------------------------------------------------------------------ the dispatcher


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--nonsense"], "--nonsense"),
        (["--nonsense=3", "predict"], "--nonsense=3"),
        (["--json", "prove"], "--json"),
    ],
)
def test_options_before_the_command_are_named(argv, name):
    check_contract(argv, names=(name,), expect=2)


@pytest.mark.parametrize(
    "argv, flag",
    [
        ([*COEF, "--p", "0.6"], "--p"),
        ([*COEF, "--adv=2"], "--adv"),
        ([*PRED, "--behavior", "0.2,0.8"], "--behavior"),
        ([*CONV, "--batch-shape", "1,1,1"], "--batch-shape"),
        (["audit", BATCH, "--rules", "ppo", "--rules", "dapo"], "--rules"),
        (["prove", "examples/claims", "--timeout", "1", "--timeout", "2"], "--timeout"),
    ],
)
def test_a_one_value_flag_given_twice_is_refused(argv, flag):
    """argparse keeps the last value silently; the user meant one of them."""
    check_contract([*argv, "--json"], names=(flag,), expect=2)


@pytest.mark.parametrize(
    "argv, value",
    [
        ([*CONV, "--lengths", "-1,2"], "-1"),
        ([*COEF[:-1], "-1e3"], None),
        ([*COEF[:-1], "-inf"], "-inf"),
        ([*PRED[:-1], "-nan"], "nan"),
    ],
)
def test_negative_numbers_are_values_not_flags(argv, value):
    """``--lengths -1,2`` was "expected one argument"; now the value is judged."""
    res = check_contract([*argv, "--json"], names=(value,) if value else ())
    if value is None:
        assert res.code == 0
    else:
        assert res.code == 2 and "expected one argument" not in res.err


# ------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    "value, word",
    [
        ("1e-400", "underflows to 0"),
        ("-1e-400", "underflows to 0"),
        ("1e400", "overflows to inf"),
        ("1_0e-999", "underflows to 0"),
    ],
)
def test_set_values_that_float64_cannot_hold_are_refused(value, word):
    """``--set eps_low=1e-400`` became 0 silently (a different rule)."""
    item = f"eps_low={value}"
    res = check_contract([*COEF, "--set", item, "--json"], names=(item,), expect=2)
    assert word in res.err
    audit = ["audit", BATCH, "--set", f"ppo.{item}", "--json"]
    check_contract(audit, names=(f"ppo.{item}",), expect=2)


@pytest.mark.parametrize("value", ["0", "0.0", "-0", "0e5", "1e-300"])
def test_set_values_that_are_zero_or_representable_pass(value):
    check_contract([*COEF, "--set", f"eps_low={value}", "--json"], expect=0)


def test_a_ratio_that_overflows_names_the_behavior_entry():
    argv = [
        *("predict", "--behavior", "1e-320,1", "--policy", "0.5,0.5"),
        *("--sampled", "0", "--adv", "1", "--json"),
    ]
    check_contract(argv, names=("--behavior entry 0",), expect=2)


# ------------------------------------------------------------------ files


def _fifo(tmp_path, name):
    path = tmp_path / name
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("kind", ["empty", "dir", "devnull", "fifo", "nul", "missing"])
def test_audit_batch_paths_name_what_they_are(tmp_path, kind):
    batch = {
        "empty": "",
        "dir": str(tmp_path),
        "devnull": os.devnull,
        "fifo": _fifo(tmp_path, "pipe.json") if kind == "fifo" else "",
        "nul": "batch\x00.json",
        "missing": str(tmp_path / "missing.json"),
    }[kind]
    word = {
        "empty": "is empty",
        "dir": "is a directory",
        "devnull": "not a regular file",
        "fifo": "not a regular file",
        "nul": "NUL",
        "missing": "does not exist",
    }[kind]
    res = check_contract(["audit", batch, "--json"], names=(batch,), expect=2)
    assert word in res.err and res.seconds < 10  # a pipe is never opened


@pytest.mark.parametrize(
    "argv, name",
    [
        (["audit", BATCH, "--rules", "ppo,ppo"], "'ppo' is named twice"),
        (
            ["audit", BATCH, "--set", "ppo.eps_low=0.1", "--set", "ppo.eps_low=0.2"],
            "ppo.eps_low is given twice",
        ),
    ],
)
def test_audit_duplicates_are_refused(argv, name):
    check_contract([*argv, "--json"], names=(name,), expect=2)


@pytest.mark.parametrize("plot", ["", "/proc/chart.png", "BLOCKED/chart.png"])
def test_audit_plot_paths_are_one_clean_line(tmp_path, plot):
    if plot.startswith("BLOCKED"):
        (tmp_path / "BLOCKED").write_text("a file, not a folder")
        plot = str(tmp_path / plot)
    res = check_contract(["audit", BATCH, "--plot", plot], names=(plot,), expect=2)
    assert res.err.count("--plot") == 1  # not wrapped twice


def test_prove_a_named_pipe_is_not_opened(tmp_path):
    pipe = _fifo(tmp_path, "claims.py")
    res = check_contract(["prove", pipe], names=(pipe,), expect=2)
    assert res.seconds < 10


@pytest.mark.parametrize("command", ["prove", "audit"])
@pytest.mark.parametrize("kind", ["loop", "long", "broken"])
def test_odd_links_and_names_are_one_line(tmp_path, command, kind):
    suffix = ".py" if command == "prove" else ".json"
    if kind == "loop":
        a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
        a.symlink_to(b)
        b.symlink_to(a)
        path, word = str(a), "symbolic link"
    elif kind == "broken":
        a = tmp_path / f"gone{suffix}"
        a.symlink_to(tmp_path / "nowhere")
        path, word = str(a), "symbolic link"
    else:
        path, word = "x" * 5000 + suffix, "x" * 40
    res = check_contract([command, path, "--json"], names=(word,), expect=2)
    assert res.seconds < 10


def test_a_package_whose_init_exits_is_named(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import sys\nsys.exit(4)\n")
    (pkg / "claims.py").write_text("x = 1\n")
    res = check_contract(["prove", str(pkg)], names=("__init__.py",), expect=2)
    assert "sys.exit(4)" in res.err


def test_reproduce_out_name_too_long():
    out = "o" * 5000
    check_contract(["reproduce", "--out", out], names=(out,), expect=2)
