r"""GPT-2 (Radford et al. 2019): pre-norm LayerNorm blocks, learned positions, fused
qkv, a GELU (tanh) MLP, the head tied to the token embedding.

.. math:: h' = h + \mathrm{Attn}(\mathrm{LN}_1(h)),\quad
          h'' = h' + W_\text{proj}\,\mathrm{gelu}(W_\text{fc}\,\mathrm{LN}_2(h') +
          b_\text{fc}) + b_\text{proj},\quad h^{(0)} = E[x] + P[t]

Parameters: ``embed [V, D]``, ``pos_embed [P, D]``, ``final_norm``/``final_norm_b
[D]`` and blocks ``ln1_w, ln1_b, w_qkv [L, D, 3D], b_qkv, wo, bo, ln2_w, ln2_b, w_fc,
b_fc, w_proj, b_proj``. Matrices are ``[in, out]`` (HF's Conv1D stores them so).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from theorycheck._errors import BadInput
from theorycheck.models._config import Family, ModelConfig
from theorycheck.models._family import (
    ConfigFields,
    FamilyModule,
    default_init,
    write_cache,
)
from theorycheck.models._layers import attention, layer_norm, lift


def block(cfg: ModelConfig, p, x, positions, mask, kv):
    """One GPT-2 block (the module docstring's formula)."""
    b, s, d = x.shape
    h = layer_norm(x, p["ln1_w"], p["ln1_b"], cfg.norm_eps)
    qkv = h @ p["w_qkv"] + lift(p["b_qkv"], 3)
    q, k, v = (
        t.reshape(b, s, cfg.num_heads, cfg.head_dim) for t in jnp.split(qkv, 3, axis=-1)
    )
    k, v, new_kv = write_cache(k, v, kv)
    x = x + attention(q, k, v, mask) @ p["wo"] + lift(p["bo"], 3)
    h = layer_norm(x, p["ln2_w"], p["ln2_b"], cfg.norm_eps)
    h = jax.nn.gelu(h @ p["w_fc"] + lift(p["b_fc"], 3), approximate=True)
    return x + h @ p["w_proj"] + lift(p["b_proj"], 3), new_kv


def embed(params, cfg: ModelConfig, tokens, positions):
    """Token plus learned position embedding, ``E[x] + P[t]``."""
    x = jnp.take(params["embed"], tokens, axis=0)
    return x + jnp.take(params["pos_embed"], positions, axis=0)


def final_norm(params, cfg: ModelConfig, x):
    """LayerNorm ``ln_f``."""
    return layer_norm(x, params["final_norm"], params["final_norm_b"], cfg.norm_eps)


def shapes(cfg: ModelConfig) -> dict:
    """Per-layer shape of every parameter (blocks without the layer axis)."""
    d, v, f = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    top = {
        "embed": (v, d),
        "pos_embed": (cfg.max_positions, d),
        "final_norm": (d,),
        "final_norm_b": (d,),
    }
    blocks = {
        "ln1_w": (d,),
        "ln1_b": (d,),
        "w_qkv": (d, 3 * d),
        "b_qkv": (3 * d,),
        "wo": (d, d),
        "bo": (d,),
        "ln2_w": (d,),
        "ln2_b": (d,),
        "w_fc": (d, f),
        "b_fc": (f,),
        "w_proj": (f, d),
        "b_proj": (d,),
    }
    return {"top": top, "block": blocks}


#: GPT-2 uses Conv1D, whose weights are already [in, out].
HF_BLOCK = {
    "ln1_w": ("ln_1.weight", False),
    "ln1_b": ("ln_1.bias", False),
    "w_qkv": ("attn.c_attn.weight", False),
    "b_qkv": ("attn.c_attn.bias", False),
    "wo": ("attn.c_proj.weight", False),
    "bo": ("attn.c_proj.bias", False),
    "ln2_w": ("ln_2.weight", False),
    "ln2_b": ("ln_2.bias", False),
    "w_fc": ("mlp.c_fc.weight", False),
    "b_fc": ("mlp.c_fc.bias", False),
    "w_proj": ("mlp.c_proj.weight", False),
    "b_proj": ("mlp.c_proj.bias", False),
}
HF_TOP = {
    "embed": ("wte.weight", False),
    "pos_embed": ("wpe.weight", False),
    "final_norm": ("ln_f.weight", False),
    "final_norm_b": ("ln_f.bias", False),
}


def hf_names(files):
    """HF tensor names, with or without the ``transformer.`` prefix."""
    names = {k.removeprefix("transformer."): k for k in files}
    return names, HF_TOP, {k: (f"h.{{i}}.{n}", t) for k, (n, t) in HF_BLOCK.items()}


HF_REQUIRED = {
    "activation_function": (None, "gelu_new", "gelu_pytorch_tanh"),
    "scale_attn_by_inverse_layer_idx": (None, False),
    "scale_attn_weights": (None, True),
    "add_cross_attention": (None, False),
}


def hf_config(arch: str, f: ConfigFields, raw: dict, path: str) -> ModelConfig:
    """``config.json`` of a GPT-2 checkpoint -> :class:`ModelConfig`."""
    d = f.get("n_embd", required=True)
    heads = f.get("n_head", required=True)
    if d % heads:
        raise BadInput(f"{path}: n_embd = {d} is not a multiple of n_head = {heads}")
    return ModelConfig(
        family=Family.GPT2,
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


GPT2 = FamilyModule(
    family=Family.GPT2,
    block=block,
    embed=embed,
    final_norm=final_norm,
    shapes=shapes,
    top_keys=("final_norm", "final_norm_b"),
    init_value=default_init,
    cache_heads=lambda cfg: cfg.num_heads,
    hf_architectures=("GPT2LMHeadModel",),
    hf_required=HF_REQUIRED,
    hf_config=hf_config,
    hf_names=hf_names,
)
