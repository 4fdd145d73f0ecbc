"""An independent plain-numpy forward pass, float64, on Hugging Face tensor names and
layouts ([out, in] matrices, rotate-half RoPE, repeat_kv), one position at a time.

Llama/Qwen2/Qwen3, GPT-2 and Gemma, each written out in full from the papers' and
Hugging Face's definitions, sharing only the norms, RoPE and attention helpers."""

from __future__ import annotations

import math

import numpy as np


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _ln(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _rotate_half(x, pos, theta):
    d = x.shape[-1]
    out = np.empty_like(x)
    for j in range(d // 2):
        ang = pos * theta ** (-2.0 * j / d)
        a, b = x[..., j], x[..., j + d // 2]
        out[..., j] = a * math.cos(ang) - b * math.sin(ang)
        out[..., j + d // 2] = b * math.cos(ang) + a * math.sin(ang)
    return out


def _attend(q, k, v):
    """q [T, H, d], k/v [T, H, d] -> [T, H*d], causal, one query at a time."""
    t_len, h, d = q.shape
    out = np.zeros((t_len, h, d))
    for t in range(t_len):
        for head in range(h):
            s = k[: t + 1, head] @ q[t, head] / math.sqrt(d)
            p = np.exp(s - s.max())
            out[t, head] = (p / p.sum()) @ v[: t + 1, head]
    return out.reshape(t_len, h * d)


def reference_logits(tensors: dict, cfg: dict, ids) -> np.ndarray:
    """Logits [T, V] for one sequence of ids."""
    t = {k: np.asarray(v, np.float64) for k, v in tensors.items()}
    ids = list(ids)
    if cfg["architectures"][0] == "GPT2LMHeadModel":
        return _gpt2(t, cfg, ids)
    if cfg["architectures"][0] == "GemmaForCausalLM":
        return _gemma(t, cfg, ids)
    arch = cfg["architectures"][0]
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", cfg["hidden_size"] // h)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    x = t["model.embed_tokens.weight"][ids]
    pos = np.arange(len(ids), dtype=np.float64)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = _rms(x, t[p + "input_layernorm.weight"], eps)
        proj = {}
        for n in "qkv":
            y = a @ t[p + f"self_attn.{n}_proj.weight"].T
            if arch == "Qwen2ForCausalLM":
                y = y + t[p + f"self_attn.{n}_proj.bias"]
            proj[n] = y.reshape(len(ids), -1, hd)
        if arch == "Qwen3ForCausalLM":
            proj["q"] = _rms(proj["q"], t[p + "self_attn.q_norm.weight"], eps)
            proj["k"] = _rms(proj["k"], t[p + "self_attn.k_norm.weight"], eps)
        q = np.stack(
            [_rotate_half(proj["q"][s], pos[s], theta) for s in range(len(ids))]
        )
        k = np.stack(
            [_rotate_half(proj["k"][s], pos[s], theta) for s in range(len(ids))]
        )
        k, v = np.repeat(k, h // kv, axis=1), np.repeat(proj["v"], h // kv, axis=1)
        x = x + _attend(q, k, v) @ t[p + "self_attn.o_proj.weight"].T
        a = _rms(x, t[p + "post_attention_layernorm.weight"], eps)
        gate = a @ t[p + "mlp.gate_proj.weight"].T
        up = a @ t[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ t[p + "mlp.down_proj.weight"].T
    x = _rms(x, t["model.norm.weight"], eps)
    head = t.get("lm_head.weight", t["model.embed_tokens.weight"])
    return x @ head.T


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _gpt2(t, cfg, ids):
    d, h, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    p0 = "transformer."
    x = t[p0 + "wte.weight"][ids] + t[p0 + "wpe.weight"][: len(ids)]
    for i in range(cfg["n_layer"]):
        p = f"{p0}h.{i}."
        a = _ln(x, t[p + "ln_1.weight"], t[p + "ln_1.bias"], eps)
        qkv = a @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
        q, k, v = (z.reshape(len(ids), h, d // h) for z in np.split(qkv, 3, axis=-1))
        x = x + _attend(q, k, v) @ t[p + "attn.c_proj.weight"]
        x = x + t[p + "attn.c_proj.bias"]
        a = _ln(x, t[p + "ln_2.weight"], t[p + "ln_2.bias"], eps)
        m = _gelu_tanh(a @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
        x = x + m @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
    x = _ln(x, t[p0 + "ln_f.weight"], t[p0 + "ln_f.bias"], eps)
    return x @ t[p0 + "wte.weight"].T


def _gemma(t, cfg, ids):
    """Gemma: RMSNorm gain 1 + w, embedding times sqrt(D), GeGLU (tanh), tied head."""
    d, h = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    hd, eps, theta = cfg["head_dim"], cfg["rms_norm_eps"], cfg["rope_theta"]
    n = len(ids)

    def norm(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)

    x = t["model.embed_tokens.weight"][ids] * math.sqrt(d)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = norm(x, t[p + "input_layernorm.weight"])
        q = (a @ t[p + "self_attn.q_proj.weight"].T).reshape(n, h, hd)
        k = (a @ t[p + "self_attn.k_proj.weight"].T).reshape(n, kv, hd)
        v = (a @ t[p + "self_attn.v_proj.weight"].T).reshape(n, kv, hd)
        q = np.stack([_rotate_half(q[s], float(s), theta) for s in range(n)])
        k = np.stack([_rotate_half(k[s], float(s), theta) for s in range(n)])
        k, v = np.repeat(k, h // kv, axis=1), np.repeat(v, h // kv, axis=1)
        x = x + _attend(q, k, v) @ t[p + "self_attn.o_proj.weight"].T
        a = norm(x, t[p + "post_attention_layernorm.weight"])
        gate = _gelu_tanh(a @ t[p + "mlp.gate_proj.weight"].T)
        up = a @ t[p + "mlp.up_proj.weight"].T
        x = x + (gate * up) @ t[p + "mlp.down_proj.weight"].T
    x = norm(x, t["model.norm.weight"])
    head = t.get("lm_head.weight", t["model.embed_tokens.weight"])
    return x @ head.T
