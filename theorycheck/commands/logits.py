"""``theorycheck logits``: the next-token distribution of a real checkpoint."""

from __future__ import annotations

import argparse

import numpy as np

from theorycheck._errors import BadInput

NAME = "logits"
HELP = "next-token distribution after a prompt (SmolLM2 default, HF dir or .gguf)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="smollm2",
        metavar="NAME_OR_PATH",
        help="'smollm2' (embedded default), an HF directory or a .gguf "
        "file (default: smollm2)",
    )
    parser.add_argument(
        "--prompt",
        required=True,
        metavar="TEXT",
        help="the text whose next token is predicted",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="how many most likely tokens to list (default: 10)",
    )


def encode_prompt(model, prompt: str) -> list[int]:
    """Token ids of ``prompt``; BadInput if the tokenizer refuses it or gives no
    token, or an id outside the model's vocabulary."""
    try:
        ids = list(model.tokenizer.encode(prompt).ids)
    except Exception as err:  # tokenizers raises bare Exception subclasses
        first = (str(err).strip().splitlines() or [""])[0]
        raise BadInput(
            f"--prompt {prompt!r} cannot be encoded: {type(err).__name__}: {first}"
        ) from None
    if not ids:
        raise BadInput(f"--prompt {prompt!r} encodes to no tokens")
    vocab = model.config.vocab_size
    outside = [i for i in ids if not 0 <= i < vocab]
    if outside:
        raise BadInput(
            f"--prompt {prompt!r} encodes to token id {outside[0]}, outside the "
            f"model's vocabulary of {vocab}: tokenizer and weights do not match"
        )
    longest = getattr(model.config, "max_positions", None)
    if longest is not None and len(ids) > longest:
        raise BadInput(
            f"--prompt ({len(prompt)} characters) encodes to {len(ids)} tokens, more "
            f"than the model's max_positions = {longest}"
        )
    return ids


def next_token_distribution(model, prompt: str) -> np.ndarray:
    r"""Float64 probabilities of the token after ``prompt``, ``[V]``.

    .. math::
        p = \operatorname{softmax}(z_{\text{last}})

    Args:
        model: a loaded :class:`theorycheck.models.Model`.
        prompt: the text, tokenised with the model's tokenizer.

    Returns:
        The softmax of the last position's logits.

    Raises:
        BadInput: the prompt cannot be encoded, or the logits are not finite
        (NaN or huge weights in the checkpoint).
    """
    from theorycheck.models import forward

    ids = encode_prompt(model, prompt)
    logits = np.asarray(
        forward(model.params, model.config, np.asarray([ids], dtype=np.int32))[0, -1],
        np.float64,
    )
    bad = ~np.isfinite(logits)
    if bad.any():
        raise BadInput(
            f"non-finite logits after --prompt {prompt!r}: {int(bad.sum())} of "
            f"{logits.size} are NaN or infinite (first at token id "
            f"{int(np.argmax(bad))}); the checkpoint's weights are not usable"
        )
    z = logits - logits.max()
    return np.exp(z) / np.exp(z).sum()


def run(args: argparse.Namespace) -> int:
    from theorycheck._progress import stage
    from theorycheck.commands._output import emit_json
    from theorycheck.models import load_model

    if args.top < 1:
        raise BadInput(f"--top {args.top} must be >= 1")
    stage(f"loading model {args.model}")
    model = load_model(args.model)
    stage(f"next-token distribution after {len(args.prompt)} characters")
    if args.top > model.config.vocab_size:
        raise BadInput(
            f"--top {args.top} exceeds the vocabulary size {model.config.vocab_size}"
        )
    probs = next_token_distribution(model, args.prompt)
    order = np.argsort(-probs, kind="stable")[: args.top]
    tokens = [
        {
            "id": int(i),
            "token": model.tokenizer.decode([int(i)]),
            "prob": float(probs[i]),
        }
        for i in order
    ]
    if args.json:
        emit_json({"model": args.model, "tokens": tokens})
        return 0
    print(
        f"model: {args.model} ({model.config.name}, {model.config.num_layers} "
        f"layers, V = {model.config.vocab_size})"
    )
    print(f"next token after {args.prompt!r}:")
    for rank, t in enumerate(tokens, 1):
        print(f"{rank:4d}  {t['prob']:.4f}  id {t['id']:>6d}  {t['token']!r}")
    return 0
