"""The command line with PyTorch losses: verdicts equal to the registry rule each
loss implements (two routes: the registry's JAX form and a torch file), coefficients
by torch autograd equal to the registry's analytic ones, and the error contract
(exit 2, one line) for bad input, isolated as JAX losses are."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.commands._contract import check_contract, run_cli  # noqa: E402
from theorycheck.commands import _isolate  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.py")
EXAMPLES = Path(__file__).parents[2] / "examples" / "losses" / "torch"
AT = ["--at", "0.5,1,2", "--sampled", "0", "--json"]


def _verdict(argv):
    """A whole check (minutes on a loaded 2-core machine: no time limit here)."""
    res = run_cli(["convexity", *argv, "--json"])
    assert res.crash is None and res.code == 0, res.err
    return json.loads(res.out)


@pytest.mark.parametrize(
    "torch_argv,rule_argv",
    [
        # region-convex and not convex: dual clip with A = -1 (convex where pi_k < 2/5)
        (
            [f"{EXAMPLES}/verl_dual_clip.py:loss", "--signature", "verl"],
            ["dual_clip"],
        ),
        # a weight computed under no_grad (CISPO), A = 1: convex for every V and
        # every sampled token, as the registry's cispo (the no_grad block is one
        # frozen value, whose sampled-token family the structure stage fits)
        ([f"{CORPUS}:cispo_verl", "--signature", "verl"], ["cispo"]),
    ],
)
def test_torch_verdict_equals_the_registry_rule(torch_argv, rule_argv):
    adv = ["--set", "adv=-1"] if rule_argv == ["dual_clip"] else ["--set", "adv=1"]
    mine = _verdict([*torch_argv, *adv])
    rule = _verdict([*rule_argv, *adv])
    assert (mine["verdict"], mine["scope"], mine["condition"]) == (
        rule["verdict"],
        rule["scope"],
        rule["condition"],
    )
    assert mine["methods"][0]["method"] == "torch gate"
    assert mine["params"]["adv"] == rule["params"]["adv"]


def test_convex_and_not_convex_logits_forms():
    """-log pi_k is convex for every V (closed form: H = S >= 0); -A log pi_k with the
    function's own A = -1 is not (H = -S)."""
    ce = _verdict([f"{CORPUS}:cross_entropy"])
    # the translation is built per V, so the derivation in V (docs/convexity.md's
    # scope rules) cannot read it: the structure's proof covers the V it derived;
    # sampled is a Python int in the trace, so no relabelling argument: the proof
    # covers k = 0, z3 every k at V = 3
    assert ce["verdict"] == "convex"
    assert ce["scope"] == (
        "V in {3, 4}, sampled token k = 0; V = 3, every sampled token"
    ), ce["scope"]
    neg = _verdict([f"{CORPUS}:reinforce_neg"])
    assert neg["verdict"] == "not_convex" and neg["params"]["adv"] == -1.0
    # a branch on the length above every traced V: refuted above its constant
    branch = _verdict([f"{CORPUS}:shape_branch"])
    assert branch["verdict"] == "not_convex", branch
    assert branch["scope"] == "V = 42, sampled token k = 0", branch["scope"]


def test_coefficient_equals_the_rule_it_implements():
    """The command line's coefficient of a verl-signature loss (one isolated run:
    the other losses go through the same function in-process, below)."""
    argv = [f"{EXAMPLES}/verl_dual_clip.py:loss", "--signature", "verl"]
    res = check_contract(
        ["coefficient", *argv, "--p", "0.45", "--q", "0.3", "--adv", "-0.7"]
        + ["--compare", "dual_clip", "--json"],
        expect=0,
    )
    out = json.loads(res.out)
    assert out["compare"]["equal"] and out["compare"]["differ"] == 0, out["compare"]
    assert out["coefficient"] == pytest.approx(out["compare"]["coefficient"])


@pytest.mark.parametrize(
    "path,func,rule",
    [
        (CORPUS, "ppo_verl[verl]", "ppo"),
        (CORPUS, "cispo_verl[verl]", "cispo"),
        (CORPUS, "cispo_detach_verl[verl]", "cispo"),
        (CORPUS, "item_weight_verl[verl]", "cispo"),
        (EXAMPLES / "clipped_ratio.py", "loss", "ppo"),
        (CORPUS, "reinforce_neg", "pg"),
    ],
)
def test_corpus_coefficients_equal_the_rule_each_implements(path, func, rule):
    """What ``coefficient --compare`` runs, in this process (torch imported once):
    c by torch autograd equals the rule's at (0.45, 0.3, adv) and on the grid."""
    from theorycheck import torchfront

    adv = -1.0 if func == "reinforce_neg" else -0.7
    out = torchfront.compare_rule(str(path), func, rule, 0.45, 0.3, adv, {})
    assert out["equal"] and out["differ"] == 0, out


def test_compare_says_where_a_loss_is_not_the_rule():
    argv = [f"{EXAMPLES}/verl_dual_clip.py:loss", "--signature", "verl"]
    res = check_contract(
        ["coefficient", *argv, "--p", "0.4", "--q", "0.1", "--adv", "-1"]
        + ["--compare", "ppo", "--json"],
        expect=0,
    )
    cmp = json.loads(res.out)["compare"]
    assert not cmp["equal"] and cmp["differ"] > 0
    (region,) = cmp["regions"]  # the dual clip: A < 0 and r > 3 (up to the grid)
    assert region["adv"] == -1 and 3.0 < region["ratio_min"] < 3.2


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch_losses")
    (root / "looping.py").write_text("import torch\nwhile True:\n    pass\n")
    return root


@pytest.mark.parametrize(
    "func,needle",
    [
        ("neither", "fn(logits, sampled"),
        ("verl_named", "--signature verl"),
        ("vector", "not a scalar"),
        ("no_loss_tuple", "not the loss tensor"),
        ("half", "bfloat16"),
        ("float16", "float16"),
        ("to_cuda", "cuda"),
        ("raises", "the user's torch bug"),
        ("branches", "data-dependent"),
        ("random_weight", "randomness"),
    ],
)
def test_bad_torch_losses_are_one_line(func, needle):
    check_contract(["convexity", f"{CORPUS}:{func}", *AT], names=(needle,), expect=2)


def test_a_torch_loss_that_prints_keeps_stdout_clean():
    res = check_contract(["convexity", f"{CORPUS}:chatty", *AT], expect=0)
    assert "hello from the torch loss" in res.err
    assert json.loads(res.out)["loss"] == "corpus.py:chatty"


def test_a_hanging_torch_file_is_stopped_at_its_deadline(bad, monkeypatch):
    monkeypatch.setattr(_isolate, "DEADLINE_BASE_S", 3.0)
    argv = ["convexity", f"{bad}/looping.py:loss", "--timeout", "0.1", "--json"]
    check_contract(argv, names=("--timeout 0.1",), expect=2)


def test_verl_signature_for_a_jax_file_is_refused():
    jax_file = Path(__file__).parents[2] / "examples" / "losses" / "is_surrogate.py"
    check_contract(
        ["convexity", f"{jax_file}:loss", "--signature", "verl"],
        names=("does not import torch",),
        expect=2,
    )


def test_without_the_extra_a_torch_loss_says_how_to_install(tmp_path):
    """torch missing (a stand-in package that fails as a missing one does): one
    line with the pip command, from a separate process."""
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
    )
    root = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), root])}
    for argv in (
        ["convexity", f"{CORPUS}:cross_entropy", *AT],
        ["coefficient", f"{CORPUS}:cross_entropy", "--p", "0.5", "--q", "0.5"]
        + ["--adv", "1"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "theorycheck", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "pip install 'theorycheck[torch]'" in proc.stderr
