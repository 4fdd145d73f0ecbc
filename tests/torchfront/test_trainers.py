"""Trainers' losses from the command line: --signature skyrl/miles, --compare's
classified differences, the user's own config class (with a user's ``verl`` and
``jaxtyping`` stubs on THEORYCHECK_LOSS_PATH), and the refusals that name the
user's line."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput

torch = pytest.importorskip("torch")

from tests.commands._contract import run_cli  # noqa: E402
from theorycheck import torchfront  # noqa: E402

EXAMPLES = Path(__file__).with_name("trainer_examples.py")

POINT = ["--p", "0.4", "--q", "0.5", "--adv", "1"]
STUB_JAXTYPING = "raise ImportError('a stub that breaks whoever imports it')\n"
CONFIG = """import dataclasses

@dataclasses.dataclass
class ActorConfig:
    {extra}
    clip_ratio: float = 0.2
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
"""
LOSS = """import torch
from verl.workers.config import ActorConfig

def loss(old_log_prob, log_prob, advantages, response_mask,
         loss_agg_mode="token-mean", config=None, rollout_is_weights=None):
    assert isinstance(config, ActorConfig)
    ratio = torch.exp(log_prob - old_log_prob)
    lo, hi = 1 - config.clip_ratio_low, 1 + config.clip_ratio_high
    per = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(lo, hi))
    return (per * response_mask).sum() / response_mask.sum()
"""


def _json(argv):
    res = run_cli(argv)
    assert res.crash is None and res.code == 0, res.err
    return json.loads(res.out)


def test_skyrl_compare_names_the_float32_convention():
    out = _json(
        [
            "coefficient",
            f"{EXAMPLES}:skyrl_ppo",
            "--signature",
            "skyrl",
            "--compare",
            "ppo",
            *POINT,
            "--json",
        ]
    )
    cmp = out["compare"]
    assert cmp["verdict"] == "EQUAL up to conventions"
    # float32 rounding of the ratio; a point whose rounding is below 2e-8
    # relative is named as the smaller convention
    assert "float32 ratio rounding (relative ~1e-7)" in cmp["classes"]
    assert "real" not in cmp["classes"]
    assert 0 < cmp["max_rel"] < 1e-6
    assert cmp["mapping"] == {"eps_clip_low": "eps_low", "eps_clip_high": "eps_high"}


def test_miles_text_output_says_the_mapping():
    res = run_cli(
        [
            "coefficient",
            f"{EXAMPLES}:miles_ppo",
            "--signature",
            "miles",
            "--set",
            "eps_clip_high=0.28",
            "--compare",
            "dapo",
            *POINT,
        ]
    )
    assert res.code == 0, res.err
    assert "EQUAL to dapo at all 212 grid points" in res.out
    assert "eps_clip_high -> eps_high" in res.out


def _trainer(tmp_path, extra=""):
    stubs = tmp_path / "stubs"
    (stubs / "jaxtyping").mkdir(parents=True)
    (stubs / "jaxtyping" / "__init__.py").write_text(STUB_JAXTYPING)
    pkg = tmp_path / "src" / "verl" / "workers"
    pkg.mkdir(parents=True)
    for d in (pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "config.py").write_text(CONFIG.format(extra=extra))
    (pkg / "losses.py").write_text(LOSS)
    return stubs, pkg / "losses.py"


def test_the_users_config_class_and_stubs(tmp_path, monkeypatch):
    stubs, losses = _trainer(tmp_path)
    monkeypatch.setenv("THEORYCHECK_LOSS_PATH", str(stubs))
    out = _json(
        [
            "coefficient",
            f"{losses}:loss",
            "--signature",
            "verl",
            "--set",
            "clip_ratio_high=0.28",
            "--compare",
            "dapo",
            *POINT,
            "--json",
        ]
    )
    assert out["params"] == {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
    assert out["compare"]["verdict"] == "EQUAL"
    assert out["compare"]["rule_params"]["eps_high"] == 0.28


def test_a_config_class_without_defaults_says_how(tmp_path, monkeypatch):
    stubs, losses = _trainer(tmp_path, extra="rollout_n: int")
    monkeypatch.setenv("THEORYCHECK_LOSS_PATH", str(stubs))
    res = run_cli(["coefficient", f"{losses}:loss", "--signature", "verl", *POINT])
    assert res.code == 2
    assert "cannot build the config ActorConfig()" in res.err
    assert "give every field a default" in res.err


def test_a_branch_reaching_the_loss_names_the_users_line():
    """coefficient runs it eagerly; the translation refuses at the branch."""
    name = "verl_branch_on_ratio[verl]"
    c = torchfront.torch_coefficient(str(EXAMPLES), name, 0.6, 0.5, 1.0, {})
    assert c["coefficient"] == pytest.approx(1.2)
    loss = torchfront.load(EXAMPLES, name)
    line = next(
        i
        for i, text in enumerate(EXAMPLES.read_text().splitlines(), 1)
        if "if (ratio > 1.0).any():" in text
    )
    mu = np.log(np.full(4, 0.25))
    with pytest.raises(BadInput, match=f"trainer_examples.py:{line}"):
        with jax.enable_x64(True):
            loss.loss(jnp.zeros(4), 0, adv=1.0, behavior_logp=mu)
