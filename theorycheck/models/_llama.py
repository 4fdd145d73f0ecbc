r"""The Llama family: Llama, SmolLM2, Qwen2 (q/k/v biases), Qwen3 (q/k RMSNorm).

Pre-norm RMSNorm blocks, rotary positions, grouped-query attention and a SwiGLU MLP
(Touvron et al. 2023; SwiGLU from Shazeer 2020, "GLU Variants Improve Transformer"):

.. math:: h' = h + \mathrm{Attn}(\mathrm{RMS}(h)),\quad
          h'' = h' + W_\text{down}\big(\mathrm{silu}(W_\text{gate} a) \odot
          W_\text{up} a\big),\ a = \mathrm{RMS}(h')

Parameters: ``embed [V, D]``, ``final_norm [D]``, optional ``lm_head [D, V]`` and
``blocks`` with a leading layer axis L: ``attn_norm [L, D]``, ``wq [L, D, H*d]``,
``wk``/``wv [L, D, Hkv*d]``, ``wo [L, H*d, D]``, ``mlp_norm [L, D]``,
``w_gate``/``w_up [L, D, F]``, ``w_down [L, F, D]``; Qwen2 adds ``bq``/``bk``/``bv``,
Qwen3 adds ``q_norm``/``k_norm [L, d]``. Matrices are ``[in, out]`` (``y = x @ W``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from theorycheck._errors import BadInput
from theorycheck.models._config import Family, ModelConfig, RopeLayout
from theorycheck.models._family import (
    ConfigFields,
    FamilyModule,
    default_init,
    write_cache,
)
from theorycheck.models._layers import attention, lift, rms_norm, rope


def attention_part(cfg: ModelConfig, p, h, positions, mask, kv, norm):
    """Q/K/V projections (biases, q/k norm when configured), RoPE, attention, ``wo``.

    Shared by the families built on the Llama block; ``norm(x, w, eps)`` is the family's
    RMSNorm (used on q/k heads when ``cfg.qk_norm``).

    Returns:
        ``(attention output @ wo  [batch, seq, D], new_kv)``.
    """
    b, s, _ = h.shape
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    if cfg.attention_bias:
        q, k, v = q + lift(p["bq"], 3), k + lift(p["bk"], 3), v + lift(p["bv"], 3)
    q = q.reshape(b, s, cfg.num_heads, cfg.head_dim)
    k = k.reshape(b, s, cfg.num_kv_heads, cfg.head_dim)
    v = v.reshape(b, s, cfg.num_kv_heads, cfg.head_dim)
    if cfg.qk_norm:
        q = norm(q, p["q_norm"], cfg.norm_eps)
        k = norm(k, p["k_norm"], cfg.norm_eps)
    q = rope(q, positions, cfg.rope_theta, cfg.rope_layout)
    k = rope(k, positions, cfg.rope_theta, cfg.rope_layout)
    k, v, new_kv = write_cache(k, v, kv)
    return attention(q, k, v, mask) @ p["wo"], new_kv


def block(cfg: ModelConfig, p, x, positions, mask, kv):
    """One Llama block (the module docstring's formula)."""
    h = rms_norm(x, p["attn_norm"], cfg.norm_eps)
    out, new_kv = attention_part(cfg, p, h, positions, mask, kv, rms_norm)
    x = x + out
    h = rms_norm(x, p["mlp_norm"], cfg.norm_eps)
    x = x + (jax.nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]
    return x, new_kv


def embed(params, cfg: ModelConfig, tokens, positions):
    """Token embedding ``E[x]`` (positions enter through RoPE)."""
    return jnp.take(params["embed"], tokens, axis=0)


def final_norm(params, cfg: ModelConfig, x):
    """RMSNorm with ``final_norm`` as gain."""
    return rms_norm(x, params["final_norm"], cfg.norm_eps)


def shapes(cfg: ModelConfig) -> dict:
    """Per-layer shape of every parameter (blocks without the layer axis)."""
    d, v, f = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    top = {"embed": (v, d), "final_norm": (d,)}
    if not cfg.tie_embeddings:
        top["lm_head"] = (d, v)
    blocks = {
        "attn_norm": (d,),
        "wq": (d, q),
        "wk": (d, kv),
        "wv": (d, kv),
        "wo": (q, d),
        "mlp_norm": (d,),
        "w_gate": (d, f),
        "w_up": (d, f),
        "w_down": (f, d),
    }
    if cfg.attention_bias:
        blocks.update(bq=(q,), bk=(kv,), bv=(kv,))
    if cfg.qk_norm:
        blocks.update(q_norm=(cfg.head_dim,), k_norm=(cfg.head_dim,))
    return {"top": top, "block": blocks}


#: our block key -> (HF tensor suffix under the layer prefix, transpose [out, in])
HF_BLOCK = {
    "attn_norm": ("input_layernorm.weight", False),
    "wq": ("self_attn.q_proj.weight", True),
    "wk": ("self_attn.k_proj.weight", True),
    "wv": ("self_attn.v_proj.weight", True),
    "wo": ("self_attn.o_proj.weight", True),
    "mlp_norm": ("post_attention_layernorm.weight", False),
    "w_gate": ("mlp.gate_proj.weight", True),
    "w_up": ("mlp.up_proj.weight", True),
    "w_down": ("mlp.down_proj.weight", True),
    "bq": ("self_attn.q_proj.bias", False),
    "bk": ("self_attn.k_proj.bias", False),
    "bv": ("self_attn.v_proj.bias", False),
    "q_norm": ("self_attn.q_norm.weight", False),
    "k_norm": ("self_attn.k_norm.weight", False),
}
HF_TOP = {
    "embed": ("model.embed_tokens.weight", False),
    "final_norm": ("model.norm.weight", False),
    "lm_head": ("lm_head.weight", True),
}


def hf_names(files):
    """HF tensor names: ``model.layers.{i}.<suffix>`` and the top tensors, as stored."""
    block_names = {k: (f"model.layers.{{i}}.{n}", t) for k, (n, t) in HF_BLOCK.items()}
    return {k: k for k in files}, HF_TOP, block_names


#: architecture name -> (q/k/v bias always on, q/k norm).
HF_VARIANTS = {
    "LlamaForCausalLM": (False, False),
    "Qwen2ForCausalLM": (True, False),
    "Qwen3ForCausalLM": (False, True),
}

HF_REQUIRED = {
    "hidden_act": (None, "silu"),
    "rope_scaling": (None,),
    "mlp_bias": (None, False),
    "use_sliding_window": (None, False),
    "pretraining_tp": (None, 1),
}


def rope_theta(raw: dict, f: ConfigFields, path: str) -> float:
    """``rope_theta`` or ``rope_parameters.rope_theta`` (``rope_type`` default only)."""
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
        theta = ConfigFields(rope_parameters, f"{path}: rope_parameters").get(
            "rope_theta", theta, kind=float
        )
    return 10000.0 if theta is None else theta


def check_head_dim(raw: dict, d: int, heads: int, path: str) -> None:
    """Refuses ``hidden_size`` not a multiple of the heads without a ``head_dim``."""
    if "head_dim" not in raw and d % heads:
        raise BadInput(
            f"{path}: hidden_size = {d} is not a multiple of "
            f"num_attention_heads = {heads} and no 'head_dim' is given"
        )


def hf_config(arch: str, f: ConfigFields, raw: dict, path: str) -> ModelConfig:
    """``config.json`` of a Llama/Qwen2/Qwen3 checkpoint -> :class:`ModelConfig`."""
    bias, qk_norm = HF_VARIANTS[arch]
    theta = rope_theta(raw, f, path)
    d = f.get("hidden_size", required=True)
    heads = f.get("num_attention_heads", required=True)
    check_head_dim(raw, d, heads, path)
    return ModelConfig(
        family=Family.LLAMA,
        name=arch,
        vocab_size=f.get("vocab_size", required=True),
        hidden_size=d,
        num_layers=f.get("num_hidden_layers", required=True),
        num_heads=heads,
        num_kv_heads=f.get("num_key_value_heads", heads),
        head_dim=f.get("head_dim", d // heads),
        intermediate_size=f.get("intermediate_size", required=True),
        norm_eps=f.get("rms_norm_eps", 1e-6, kind=float),
        rope_theta=theta,
        rope_layout=RopeLayout.HALF,
        qk_norm=qk_norm,
        attention_bias=bias or f.get("attention_bias", False, kind=bool),
        tie_embeddings=f.get("tie_word_embeddings", False, kind=bool),
        max_positions=f.get("max_position_embeddings", 2048),
    )


#: GGUF architecture -> (stored rotary layout, q/k norm). llama.cpp's converter
#: permutes Llama's Q/K rows into adjacent pairs; Qwen models keep rotate-half (NEOX).
GGUF_VARIANTS = {
    "llama": (RopeLayout.INTERLEAVED, False),
    "qwen2": (RopeLayout.HALF, False),
    "qwen3": (RopeLayout.HALF, True),
}
GGUF_BLOCK = {
    "attn_norm": ("blk.{i}.attn_norm.weight", False),
    "wq": ("blk.{i}.attn_q.weight", True),
    "wk": ("blk.{i}.attn_k.weight", True),
    "wv": ("blk.{i}.attn_v.weight", True),
    "wo": ("blk.{i}.attn_output.weight", True),
    "bq": ("blk.{i}.attn_q.bias", False),
    "bk": ("blk.{i}.attn_k.bias", False),
    "bv": ("blk.{i}.attn_v.bias", False),
    "q_norm": ("blk.{i}.attn_q_norm.weight", False),
    "k_norm": ("blk.{i}.attn_k_norm.weight", False),
    "mlp_norm": ("blk.{i}.ffn_norm.weight", False),
    "w_gate": ("blk.{i}.ffn_gate.weight", True),
    "w_up": ("blk.{i}.ffn_up.weight", True),
    "w_down": ("blk.{i}.ffn_down.weight", True),
}
GGUF_TOP = {
    "embed": ("token_embd.weight", False),
    "final_norm": ("output_norm.weight", False),
    "lm_head": ("output.weight", True),
}


def gguf_config(arch: str, fields: dict, path: str) -> ModelConfig:
    """GGUF metadata (``<arch>.*`` keys, the tensor list) -> :class:`ModelConfig`."""
    layout, qk_norm = GGUF_VARIANTS[arch]

    def get(name, default=None, kind=int):
        key = f"{arch}.{name}"
        if key not in fields:
            if default is None:
                raise BadInput(f"{path}: missing field {key!r}")
            return default
        return kind(fields[key])

    d, heads = get("embedding_length"), get("attention.head_count")
    n_vocab = len(fields.get("tokenizer.ggml.tokens", ()))
    return ModelConfig(
        family=Family.LLAMA,
        name=f"gguf:{arch}",
        vocab_size=get("vocab_size", n_vocab or None),
        hidden_size=d,
        num_layers=get("block_count"),
        num_heads=heads,
        num_kv_heads=get("attention.head_count_kv", heads),
        head_dim=get("attention.key_length", d // heads),
        intermediate_size=get("feed_forward_length"),
        norm_eps=get("attention.layer_norm_rms_epsilon", kind=float),
        rope_theta=get("rope.freq_base", 10000.0, float),
        rope_layout=layout,
        qk_norm=qk_norm,
        attention_bias="blk.0.attn_q.bias" in fields["_tensors"],
        tie_embeddings="output.weight" not in fields["_tensors"],
        max_positions=get("context_length", 2048),
    )


def validate_rotary(cfg: ModelConfig) -> None:
    """RoPE rotates pairs: ``head_dim`` must be even."""
    if cfg.head_dim % 2:
        raise ValueError(f"head_dim = {cfg.head_dim} must be even for RoPE")


LLAMA = FamilyModule(
    family=Family.LLAMA,
    block=block,
    embed=embed,
    final_norm=final_norm,
    shapes=shapes,
    top_keys=("final_norm",),
    init_value=default_init,
    cache_heads=lambda cfg: cfg.num_kv_heads,
    hf_architectures=tuple(HF_VARIANTS),
    hf_required=HF_REQUIRED,
    hf_config=hf_config,
    hf_names=hf_names,
    gguf_architectures=tuple(GGUF_VARIANTS),
    gguf_config=gguf_config,
    gguf_names=(GGUF_TOP, GGUF_BLOCK),
    validate=validate_rotary,
)
