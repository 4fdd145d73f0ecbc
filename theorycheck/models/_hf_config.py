"""``config.json`` of a Hugging Face checkpoint -> :class:`ModelConfig`, strictly.

Fields that change the mathematics (rope scaling, activation, sliding window, ...) must
have the values this implementation computes; anything else is refused with the file and
the field named, never silently ignored.
"""

from __future__ import annotations

import json
import os

from theorycheck._errors import BadInput
from theorycheck.models._config import Family, ModelConfig, RopeLayout

#: architecture name -> (family, q/k/v bias always on, q/k norm).
ARCHITECTURES = {
    "LlamaForCausalLM": (Family.LLAMA, False, False),
    "Qwen2ForCausalLM": (Family.LLAMA, True, False),
    "Qwen3ForCausalLM": (Family.LLAMA, False, True),
    "GPT2LMHeadModel": (Family.GPT2, True, False),
}

#: field -> values this implementation supports (a missing field counts as supported).
_REQUIRED_VALUES = {
    "hidden_act": (None, "silu"),
    "rope_scaling": (None,),
    "mlp_bias": (None, False),
    "use_sliding_window": (None, False),
    "pretraining_tp": (None, 1),
    "activation_function": (None, "gelu_new", "gelu_pytorch_tanh"),
    "scale_attn_by_inverse_layer_idx": (None, False),
    "scale_attn_weights": (None, True),
    "add_cross_attention": (None, False),
}


class _Fields:
    def __init__(self, raw: dict, path: str):
        self.raw, self.path = raw, path

    def get(self, name: str, default=None, *, kind=int, required=False):
        if name not in self.raw or self.raw[name] is None:
            if required:
                raise BadInput(f"{self.path}: missing field {name!r}")
            return default
        value = self.raw[name]
        ok = (
            isinstance(value, bool)
            if kind is bool
            else (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and (kind is float or float(value).is_integer())
            )
        )
        if not ok:
            raise BadInput(
                f"{self.path}: field {name!r} = {value!r} is not a {kind.__name__}"
            )
        return kind(value)


def config_from_hf(raw: dict, path: str = "config.json") -> ModelConfig:
    """Builds a :class:`ModelConfig` from a parsed ``config.json``.

    Args:
        raw: the parsed JSON object.
        path: the file it came from (for error messages).

    Returns:
        The config; raises :class:`BadInput` naming the file and field otherwise.
    """
    archs = raw.get("architectures")
    if not isinstance(archs, list) or len(archs) != 1:
        raise BadInput(
            f"{path}: field 'architectures' = {archs!r} must list exactly "
            f"one of {sorted(ARCHITECTURES)}"
        )
    arch = archs[0]
    if arch not in ARCHITECTURES:
        raise BadInput(
            f"{path}: unknown architecture {arch!r} in field "
            f"'architectures'; supported: {sorted(ARCHITECTURES)}"
        )
    family, bias, qk_norm = ARCHITECTURES[arch]
    for field, allowed in _REQUIRED_VALUES.items():
        if raw.get(field) not in allowed:
            raise BadInput(
                f"{path}: field {field!r} = {raw[field]!r} is not supported "
                f"(supported: {[a for a in allowed if a is not None]})"
            )
    f = _Fields(raw, path)
    if family is Family.GPT2:
        d = f.get("n_embd", required=True)
        heads = f.get("n_head", required=True)
        if d % heads:
            raise BadInput(
                f"{path}: n_embd = {d} is not a multiple of n_head = {heads}"
            )
        return ModelConfig(
            family=family,
            name=arch,
            vocab_size=f.get("vocab_size", required=True),
            hidden_size=d,
            num_layers=f.get("n_layer", required=True),
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=d // heads,
            intermediate_size=f.get("n_inner", 4 * d),
            norm_eps=f.get("layer_norm_epsilon", 1e-5, kind=float),
            tie_embeddings=True,
            attention_bias=True,
            max_positions=f.get("n_positions", 1024),
        )
    theta = f.get("rope_theta", None, kind=float)
    rope_parameters = raw.get("rope_parameters")
    if rope_parameters is not None:
        if (
            not isinstance(rope_parameters, dict)
            or rope_parameters.get("rope_type", "default") != "default"
        ):
            raise BadInput(
                f"{path}: field 'rope_parameters' = {rope_parameters!r} is "
                "not supported (only rope_type 'default')"
            )
        theta = _Fields(rope_parameters, f"{path}: rope_parameters").get(
            "rope_theta", theta, kind=float
        )
    d = f.get("hidden_size", required=True)
    heads = f.get("num_attention_heads", required=True)
    if "head_dim" not in raw and d % heads:
        raise BadInput(
            f"{path}: hidden_size = {d} is not a multiple of "
            f"num_attention_heads = {heads} and no 'head_dim' is given"
        )
    try:
        return ModelConfig(
            family=family,
            name=arch,
            vocab_size=f.get("vocab_size", required=True),
            hidden_size=d,
            num_layers=f.get("num_hidden_layers", required=True),
            num_heads=heads,
            num_kv_heads=f.get("num_key_value_heads", heads),
            head_dim=f.get("head_dim", d // heads),
            intermediate_size=f.get("intermediate_size", required=True),
            norm_eps=f.get("rms_norm_eps", 1e-6, kind=float),
            rope_theta=10000.0 if theta is None else theta,
            rope_layout=RopeLayout.HALF,
            qk_norm=qk_norm,
            attention_bias=bias or f.get("attention_bias", False, kind=bool),
            tie_embeddings=f.get("tie_word_embeddings", False, kind=bool),
            max_positions=f.get("max_position_embeddings", 2048),
        )
    except ValueError as err:
        raise BadInput(f"{path}: {err}") from None


def read_hf_config(directory: str) -> ModelConfig:
    """Reads and checks ``<directory>/config.json``.

    Args:
        directory: an HF-format checkpoint directory.

    Returns:
        Its :class:`ModelConfig`.
    """
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise BadInput(
            f"{path}: missing (an HF checkpoint directory needs config.json)"
        )
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInput(f"{path}: not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: expected a JSON object")
    return config_from_hf(raw, path)
