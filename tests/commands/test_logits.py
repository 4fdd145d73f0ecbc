"""``theorycheck logits``: the JSON contract on tiny checkpoints, and refused input."""

import json
import os

import numpy as np
import pytest

from tests.models import _checkpoints as ck
from tests.models._reference import reference_logits
from theorycheck.cli import main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("hf_llama"))
    tensors = ck.write_hf(directory, "llama", seed=3)
    gguf_path = os.path.join(directory, "tiny.gguf")
    ck.write_gguf(gguf_path, tensors, ck.config_dict("llama"))
    return directory, gguf_path, tensors


def _run_json(capsys, *argv):
    assert main(["logits", "--json", *argv]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    return json.loads(out)


def test_logits_json_matches_reference_softmax(tiny, capsys):
    directory, _, tensors = tiny
    prompt = "the cap then a cat"
    got = _run_json(capsys, "--model", directory, "--prompt", prompt, "--top", "5")
    assert got["model"] == directory and len(got["tokens"]) == 5
    assert set(got["tokens"][0]) == {"id", "token", "prob"}
    ids = ck.tiny_tokenizer().encode(prompt).ids
    z = reference_logits(tensors, ck.config_dict("llama"), ids)[-1]
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    want = np.argsort(-p)[:5]
    assert [t["id"] for t in got["tokens"]] == want.tolist()
    # float32 model vs float64 numpy reference
    np.testing.assert_allclose([t["prob"] for t in got["tokens"]], p[want], atol=1e-5)
    vocab = ck.vocab_tokens()
    first = got["tokens"][0]
    assert first["token"] == ck.tiny_tokenizer().decode([first["id"]])
    assert vocab[first["id"]]  # an id of the written vocabulary


def test_logits_gguf_file_agrees_with_hf_directory(tiny, capsys):
    directory, gguf_path, _ = tiny
    a = _run_json(capsys, "--model", directory, "--prompt", "then a", "--top", "3")
    b = _run_json(capsys, "--model", gguf_path, "--prompt", "then a", "--top", "3")
    assert [t["id"] for t in a["tokens"]] == [t["id"] for t in b["tokens"]]
    np.testing.assert_allclose(
        [t["prob"] for t in a["tokens"]], [t["prob"] for t in b["tokens"]], atol=1e-6
    )


def test_logits_human_output_lists_tokens(tiny, capsys):
    directory, _, _ = tiny
    assert main(["logits", "--model", directory, "--prompt", "the", "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("model: ") and len(lines) == 4


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            ["--model", "no-such-model", "--prompt", "x"],
            "unknown model 'no-such-model'",
        ),
        (
            ["--model", "missing.gguf", "--prompt", "x"],
            "missing.gguf: missing GGUF file",
        ),
        (["--top", "0", "--prompt", "x"], "--top 0 must be >= 1"),
        (["--top", "100000", "--prompt", "x"], "--top 100000 exceeds the vocabulary"),
        (["--prompt", ""], "--prompt '' encodes to no tokens"),
    ],
)
def test_logits_bad_input_exits_2_with_one_line(tiny, capsys, argv, needle):
    directory, _, _ = tiny
    if "--model" not in argv:
        argv = ["--model", directory, *argv]
    assert main(["logits", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert needle in captured.err and captured.err.count("\n") == 1


def test_logits_missing_tokenizer_names_the_file(tiny, tmp_path, capsys):
    import shutil

    directory = str(tmp_path / "copy")
    shutil.copytree(tiny[0], directory)
    os.remove(os.path.join(directory, "tokenizer.json"))
    assert main(["logits", "--model", directory, "--prompt", "x"]) == 2
    assert "tokenizer.json: tokenizer missing" in capsys.readouterr().err


def _broken_copy(tiny, tmp_path, edit):
    """A copy of the tiny HF checkpoint with one tensor edited."""
    import shutil

    from safetensors.numpy import load_file, save_file

    directory = str(tmp_path / "broken")
    shutil.copytree(tiny[0], directory)
    path = os.path.join(directory, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)
    return directory


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e38], ids=["nan", "inf", "huge"])
def test_logits_non_finite_weights_exit_2(tiny, tmp_path, capsys, value):
    def edit(t):
        t["model.norm.weight"][:] = value
        if value == 1e38:  # finite weights whose product overflows float32
            t["model.embed_tokens.weight"] *= np.float32(1e10)

    directory = _broken_copy(tiny, tmp_path, edit)
    assert main(["logits", "--model", directory, "--prompt", "the", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "non-finite logits" in captured.err


def test_logits_prompt_the_tokenizer_refuses_exits_2(tiny, capsys):
    prompt = "a\udc80b"  # a lone surrogate: what a non-UTF-8 argv byte becomes
    assert main(["logits", "--model", tiny[0], "--prompt", prompt]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "cannot be encoded" in captured.err and "\\udc80" in captured.err


def test_logits_tokenizer_larger_than_the_model_exits_2(tiny, tmp_path, capsys):
    def edit(t):  # keep 100 of 268 rows: ids >= 100 fall outside the model
        t["model.embed_tokens.weight"] = t["model.embed_tokens.weight"][:100].copy()

    directory = _broken_copy(tiny, tmp_path, edit)
    config = os.path.join(directory, "config.json")
    with open(config) as fh:
        cfg = json.load(fh)
    cfg["vocab_size"] = 100
    with open(config, "w") as fh:
        json.dump(cfg, fh)
    argv = ["logits", "--model", directory, "--prompt", "then a cat", "--top", "2"]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "outside the model's vocabulary of 100" in captured.err
