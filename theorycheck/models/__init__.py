"""JAX causal LMs (Llama family, Qwen2/3, GPT-2, Gemma) and their checkpoint loaders.

``load_model("smollm2")`` gives the embedded SmolLM2-135M-Instruct; a path gives an
HF-format directory or a GGUF file. ``forward`` returns per-position logits,
``generate`` samples with a KV cache, ``split_params``/``logits_from_hidden``
differentiate through the last blocks only.
"""

from theorycheck.models._config import Family, ModelConfig, RopeLayout
from theorycheck.models._exact import exactly_rounded
from theorycheck.models._generate import (
    Generation,
    completion_mask,
    generate,
    sampling_logprobs,
)
from theorycheck.models._gguf import load_gguf, sha256_file
from theorycheck.models._gguf_tokenizer import tokenizer_from_gguf_fields
from theorycheck.models._hf import load_hf, load_tokenizer_json
from theorycheck.models._hf_config import config_from_hf
from theorycheck.models._load import DEFAULT_MODEL, Model, embedded_path, load_model
from theorycheck.models._params import (
    cast_params,
    combine_params,
    count_params,
    init_params,
    logits_from_hidden,
    logits_from_prefix,
    merge_params,
    partition_params,
    split_params,
)
from theorycheck.models._transformer import (
    continue_prefixes,
    distinct_prefixes,
    forward,
    hidden_states,
    prefix_hidden_states,
    response_logits,
)

__all__ = [
    "exactly_rounded",
    "DEFAULT_MODEL",
    "Family",
    "Generation",
    "Model",
    "ModelConfig",
    "RopeLayout",
    "cast_params",
    "combine_params",
    "completion_mask",
    "config_from_hf",
    "continue_prefixes",
    "count_params",
    "distinct_prefixes",
    "embedded_path",
    "forward",
    "generate",
    "hidden_states",
    "init_params",
    "load_gguf",
    "load_hf",
    "load_model",
    "load_tokenizer_json",
    "logits_from_hidden",
    "logits_from_prefix",
    "merge_params",
    "partition_params",
    "prefix_hidden_states",
    "response_logits",
    "sampling_logprobs",
    "sha256_file",
    "split_params",
    "tokenizer_from_gguf_fields",
]
