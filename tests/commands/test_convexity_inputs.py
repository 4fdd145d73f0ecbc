"""How ``theorycheck convexity`` loads and describes a user's loss: each class of bad
input answers exit 2 and one line naming it; legal inputs are read as written."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.commands._contract import check_contract
from theorycheck.commands._isolate_child import descendants

HEAD = (
    "import functools, subprocess\nimport jax, jax.numpy as jnp\nimport numpy as np\n"
)
FILES = {
    "part.py": "def _base(z, k, adv=1.0):\n"
    "    return -adv * jax.nn.log_softmax(z)[k]\n"
    "loss = functools.partial(_base, adv=2.0)\n",
    "fill.py": "def loss(z, k):\n"
    "    return -jnp.take(jax.nn.log_softmax(z), k, mode='fill')\n",
    "none.py": "def loss(z, k, adv=1.0, behavior_logp=None):\n"
    "    return -adv * jnp.exp(jax.nn.log_softmax(z)[k] - behavior_logp[k])\n",
    "arr.py": "def loss(z, k, w=np.array([1.0, 2.0]), opts={'c': 1.0}):\n"
    "    return -jax.nn.log_softmax(z)[k]\n",
    "notpy.txt": "def loss(z, k):\n    return z[k]\n",
}
AT = ["--at", "0,0,0", "--sampled", "0", "--json"]


@pytest.fixture(scope="module")
def loss_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    for name, body in FILES.items():
        (d / name).write_text(HEAD + body)
    (d / "adir").mkdir()
    return d


@pytest.mark.parametrize(
    "path,needle",
    [
        ("adir", "is a directory"),
        ("/dev/null", "is not a regular file"),
        ("notpy.txt", "is not a Python file"),
        ("missing.py", "does not exist"),
    ],
)
def test_a_loss_file_that_is_not_a_python_file_is_named(loss_dir, path, needle):
    spec = (path if path.startswith("/") else str(loss_dir / path)) + ":loss"
    res = check_contract(["convexity", spec, *AT], expect=2, names=[needle])
    assert "AttributeError" not in res.err


def test_a_partial_is_a_loss_with_its_bound_defaults(loss_dir):
    res = check_contract(["convexity", f"{loss_dir / 'part.py'}:loss", *AT], expect=0)
    assert json.loads(res.out)["params"] == {"adv": 2.0}


def test_take_with_fill_mode_in_range_is_legal(loss_dir):
    res = check_contract(["convexity", f"{loss_dir / 'fill.py'}:loss", *AT], expect=0)
    assert json.loads(res.out)["psd"] is True


def test_a_none_default_of_behavior_logp_gets_the_documented_mu(loss_dir):
    res = check_contract(["convexity", f"{loss_dir / 'none.py'}:loss", *AT], expect=0)
    params = json.loads(res.out)["params"]
    assert params["q"] == 0.5 and params["behavior_logp"].startswith("log mu")


def test_array_and_mapping_defaults_print_as_values(loss_dir):
    res = check_contract(["convexity", f"{loss_dir / 'arr.py'}:loss", *AT], expect=0)
    params = json.loads(res.out)["params"]
    assert params == {"w": [1.0, 2.0], "opts": {"c": 1.0}}


def test_at_with_a_different_vocab_is_refused():
    argv = ["convexity", "sft", "--at", "0,0,0", "--sampled", "0", "--vocab", "5"]
    check_contract(argv, expect=2, names=["--vocab 5"])
    check_contract([*argv[:-1], "3"], expect=0)


def test_a_vocabulary_too_large_for_memory_is_refused_up_front():
    res = check_contract(["convexity", "sft", "--vocab", "1000000000"], expect=2)
    assert "1000000000" in res.err and "GiB" in res.err


def test_a_detached_child_of_the_loss_does_not_outlive_the_check(tmp_path):
    (tmp_path / "child.py").write_text(
        HEAD + "subprocess.Popen(['sleep', '377.123'], start_new_session=True)\n"
        "def loss(z, k):\n    return -jax.nn.log_softmax(z)[k]\n"
    )
    before = set(descendants(1))
    check_contract(["convexity", f"{tmp_path / 'child.py'}:loss", *AT], expect=0)
    time.sleep(0.5)
    left = []
    for pid in set(descendants(1)) - before:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd[:2] == [b"sleep", b"377.123"]:
            left.append(pid)
    for pid in left:  # clean up before failing
        os.kill(pid, 9)
    assert not left
