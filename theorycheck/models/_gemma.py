r"""Gemma (Gemma Team 2024, "Gemma: Open Models Based on Gemini Research and
Technology", section 2): the Llama block with three changes.

* RMSNorm with gain :math:`1 + w` (the stored weight is an offset from 1, zero at
  initialisation), statistics and gain in float32, cast back last:
  :math:`y = \mathrm{cast}\big(x / \sqrt{\overline{x^2} + \epsilon} \cdot (1 + w)\big)`.
* GeGLU MLP (Shazeer 2020) with the tanh GELU:
  :math:`W_\text{down}\big(\mathrm{gelu}_\text{tanh}(W_\text{gate} a) \odot
  W_\text{up} a\big)`.
* The embedding scaled by :math:`\sqrt{D}` (rounded to the parameter dtype, as
  Hugging Face's ``GemmaModel`` does): :math:`h^{(0)} = \sqrt{D}\, E[x]`; the head is
  :math:`E` itself, unscaled.

Parameters, rotary positions (rotate-half) and grouped-query attention are the Llama
family's (:mod:`theorycheck.models._llama`), under the same Hugging Face tensor names.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from theorycheck.models import _llama
from theorycheck.models._config import Family, ModelConfig, RopeLayout
from theorycheck.models._family import ConfigFields, FamilyModule, default_init
from theorycheck.models._layers import accumulation_dtype, lift


def gemma_rms_norm(x, weight, eps: float):
    r"""Gemma's RMSNorm, :math:`x / \sqrt{\overline{x^2} + \epsilon} \cdot (1 + w)`.

    Args:
        x: activations with the normalised axis last.
        weight: the stored offset ``w`` (gain ``1 + w``).
        eps: the stabiliser.

    Returns:
        ``y`` with the shape and dtype of ``x`` (computed in at least float32).
    """
    acc = x.astype(accumulation_dtype(x.dtype))
    acc = acc * jax.lax.rsqrt(jnp.mean(acc * acc, axis=-1, keepdims=True) + eps)
    gain = 1.0 + lift(weight.astype(acc.dtype), x.ndim)
    return (acc * gain).astype(x.dtype)


def block(cfg: ModelConfig, p, x, positions, mask, kv):
    """One Gemma block: Llama's attention, Gemma's norm and GeGLU."""
    h = gemma_rms_norm(x, p["attn_norm"], cfg.norm_eps)
    out, new_kv = _llama.attention_part(cfg, p, h, positions, mask, kv, gemma_rms_norm)
    x = x + out
    h = gemma_rms_norm(x, p["mlp_norm"], cfg.norm_eps)
    gate = jax.nn.gelu(h @ p["w_gate"], approximate=True)
    return x + (gate * (h @ p["w_up"])) @ p["w_down"], new_kv


def embed(params, cfg: ModelConfig, tokens, positions):
    r""":math:`\sqrt{D}\, E[x]`, the factor rounded to the parameter dtype."""
    x = jnp.take(params["embed"], tokens, axis=0)
    return x * jnp.asarray(math.sqrt(cfg.hidden_size), x.dtype)


def final_norm(params, cfg: ModelConfig, x):
    """Gemma's RMSNorm with ``final_norm`` as the gain offset."""
    return gemma_rms_norm(x, params["final_norm"], cfg.norm_eps)


def init_value(key: str) -> str:
    """Norm offsets 0 (gain 1, as Hugging Face initialises them), biases 0."""
    if key.endswith("norm"):
        return "zeros"
    return default_init(key)


#: transformers versions disagree on what ``hidden_act: "gelu"`` means for Gemma
#: (exact or tanh GELU), so only the unambiguous tanh spelling is read.
HF_REQUIRED = {
    "hidden_act": (None, "gelu_pytorch_tanh"),
    "hidden_activation": (None, "gelu_pytorch_tanh"),
    "query_pre_attn_scalar": (None,),
    "attn_logit_softcapping": (None,),
    "final_logit_softcapping": (None,),
}


def hf_config(arch: str, f: ConfigFields, raw: dict, path: str) -> ModelConfig:
    """``config.json`` of a ``GemmaForCausalLM`` checkpoint -> :class:`ModelConfig`.

    ``head_dim`` is required (Hugging Face's default, 256, is not ``D / H``); the head
    is tied unless ``tie_word_embeddings`` is false.
    """
    heads = f.get("num_attention_heads", required=True)
    return ModelConfig(
        family=Family.GEMMA,
        name=arch,
        vocab_size=f.get("vocab_size", required=True),
        hidden_size=f.get("hidden_size", required=True),
        num_layers=f.get("num_hidden_layers", required=True),
        num_heads=heads,
        num_kv_heads=f.get("num_key_value_heads", heads),
        head_dim=f.get("head_dim", required=True),
        intermediate_size=f.get("intermediate_size", required=True),
        norm_eps=f.get("rms_norm_eps", 1e-6, kind=float),
        rope_theta=_llama.rope_theta(raw, f, path),
        rope_layout=RopeLayout.HALF,
        attention_bias=f.get("attention_bias", False, kind=bool),
        tie_embeddings=f.get("tie_word_embeddings", True, kind=bool),
        max_positions=f.get("max_position_embeddings", 8192),
    )


GEMMA = FamilyModule(
    family=Family.GEMMA,
    block=block,
    embed=embed,
    final_norm=final_norm,
    shapes=_llama.shapes,
    top_keys=("final_norm",),
    init_value=init_value,
    cache_heads=lambda cfg: cfg.num_kv_heads,
    hf_architectures=("GemmaForCausalLM",),
    hf_required=HF_REQUIRED,
    hf_config=hf_config,
    hf_names=_llama.hf_names,
    validate=_llama.validate_rotary,
)
