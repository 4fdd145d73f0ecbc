"""The error contract, per command: files, paths and user code (``audit``, ``logits``,
``convexity``); see ``test_contract.py`` for the generic part."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.commands._contract import (
    FUZZ,
    ODD_TEXT,
    check_contract,
    run_cli,
)
from theorycheck.commands import _isolate
from theorycheck.losses._audit import synthetic_batch
from theorycheck.models import load_model

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
    """JAX clamps (or fills) an out-of-range index silently; the checker's sanity
    check finds it (checkify's index checks) and refuses before any stage."""
    argv = ["convexity", user_losses["reads_out_of_range"], "--json"]
    check_contract(argv, names=("indexes out of range",), expect=2)


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


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308"])
def test_convexity_timeout_is_checked_before_the_work(value):
    argv = ["convexity", "sft", "--timeout", value, "--json"]
    res = check_contract(argv, names=("--timeout",), expect=2)
    assert res.seconds < 5.0


def test_convexity_loss_not_finite_at_the_point(user_losses):
    argv = [
        "convexity",
        user_losses["nan_at_point"],
        "--at=-1,1,2",  # a value starting with "-" is attached (argparse)
        "--sampled",
        "0",
    ]
    check_contract([*argv, "--json"], names=("not finite",), expect=2)


@pytest.mark.parametrize("key", ["bta=2", "kappa=3"])
def test_convexity_unknown_set_key(key):
    argv = ["convexity", "ppo", "--set", key, *AT]
    check_contract(argv, names=(key.split("=")[0],), expect=2)


def test_convexity_report_path_is_checked_before_the_work(files):
    argv = ["convexity", "sft", "--report", files["batch"], "--timeout", "0.1"]
    argv += ["--json"]
    res = check_contract(argv, names=("--report",), expect=2)
    assert res.seconds < 5.0


def test_convexity_at_refuses_a_2d_npy(files):
    path = files["root"] / "z2d.npy"
    np.save(path, np.zeros((2, 3)))
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, names=(str(path), "--at"), expect=2)


def test_convexity_at_refuses_an_unreadable_npy(files):
    path = files["root"] / "garbage.npy"
    path.write_bytes(b"garbage")
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, names=(str(path), "--at"), expect=2)


def test_convexity_at_reads_whitespace_separated_txt(files):
    path = files["root"] / "z.txt"
    path.write_text("0.5 1\n2\n")
    argv = ["convexity", "sft", "--at", str(path), "--sampled", "0", "--json"]
    check_contract(argv, expect=0)
