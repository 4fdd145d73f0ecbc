"""Tiny random checkpoints written the way real ones are: HF directories (single file or
sharded with an index) and GGUF files, plus a tiny byte-level BPE tokenizer."""

from __future__ import annotations

import json
import os

import gguf
import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

#: merges of the tiny tokenizer (byte-level symbols; "Ġ" is the space byte).
MERGES = [
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "n"),
    ("Ġ", "a"),
    ("o", "n"),
    ("e", "r"),
    ("Ġ", "c"),
    ("a", "p"),
    ("Ġc", "ap"),
]
SPECIAL = ["<|endoftext|>", "<|im_start|>"]

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": None,
    "hidden_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 48,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 64,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "torch_dtype": "float32",
}
QWEN3 = {
    **LLAMA,
    "architectures": ["Qwen3ForCausalLM"],
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1e6,
    "tie_word_embeddings": False,
}
QWEN2 = {**LLAMA, "architectures": ["Qwen2ForCausalLM"], "tie_word_embeddings": False}
GPT2 = {
    "architectures": ["GPT2LMHeadModel"],
    "vocab_size": None,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
    "layer_norm_epsilon": 1e-5,
    "activation_function": "gelu_new",
}
#: Gemma: one key/value head, head_dim 16 != hidden_size / heads = 8, tied head.
GEMMA = {
    "architectures": ["GemmaForCausalLM"],
    "vocab_size": None,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "intermediate_size": 48,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_position_embeddings": 64,
    "tie_word_embeddings": True,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "torch_dtype": "float32",
}
CONFIGS = {
    "llama": LLAMA,
    "qwen3": QWEN3,
    "qwen2": QWEN2,
    "gpt2": GPT2,
    "gemma": GEMMA,
}


def byte_symbols() -> list[str]:
    """GPT-2's byte -> printable unicode table, in byte order."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def vocab_tokens() -> list[str]:
    """Token strings by id: specials, the 256 byte symbols, then one per merge."""
    return SPECIAL + byte_symbols() + ["".join(m) for m in MERGES]


def tiny_tokenizer() -> Tokenizer:
    tokens = vocab_tokens()
    tok = Tokenizer(
        models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=MERGES)
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(s, special=True, normalized=False) for s in SPECIAL]
    )
    return tok


def config_dict(kind: str) -> dict:
    cfg = dict(CONFIGS[kind])
    cfg["vocab_size"] = len(vocab_tokens())
    return cfg


def random_hf_tensors(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights under HF tensor names, [out, in] (GPT-2 Conv1D: [in, out]).

    Llama, Qwen2, Qwen3 and Gemma share the tensor names; GPT-2 has its own."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.2):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    def gain(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    v = cfg["vocab_size"]
    if cfg["architectures"][0] == "GPT2LMHeadModel":
        d, f = cfg["n_embd"], 4 * cfg["n_embd"]
        t = {
            "transformer.wte.weight": w(v, d, scale=0.5),
            "transformer.wpe.weight": w(cfg["n_positions"], d, scale=0.1),
            "transformer.ln_f.weight": gain(d),
            "transformer.ln_f.bias": w(d),
        }
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            t.update(
                {
                    p + "ln_1.weight": gain(d),
                    p + "ln_1.bias": w(d),
                    p + "attn.c_attn.weight": w(d, 3 * d),
                    p + "attn.c_attn.bias": w(3 * d),
                    p + "attn.c_proj.weight": w(d, d),
                    p + "attn.c_proj.bias": w(d),
                    p + "ln_2.weight": gain(d),
                    p + "ln_2.bias": w(d),
                    p + "mlp.c_fc.weight": w(d, f),
                    p + "mlp.c_fc.bias": w(f),
                    p + "mlp.c_proj.weight": w(f, d),
                    p + "mlp.c_proj.bias": w(d),
                }
            )
        return t
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // h)
    # Gemma stores each norm's gain as an offset from 1 (gain 1 + w): random offsets
    gemma = cfg["architectures"][0] == "GemmaForCausalLM"
    norm_w = (lambda n: w(n, scale=0.3)) if gemma else gain
    t = {
        "model.embed_tokens.weight": w(v, d, scale=0.5),
        "model.norm.weight": norm_w(d),
    }
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = w(v, d, scale=0.5)
    qwen2 = cfg["architectures"][0] == "Qwen2ForCausalLM"
    qwen3 = cfg["architectures"][0] == "Qwen3ForCausalLM"
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update(
            {
                p + "input_layernorm.weight": norm_w(d),
                p + "self_attn.q_proj.weight": w(h * hd, d),
                p + "self_attn.k_proj.weight": w(kv * hd, d),
                p + "self_attn.v_proj.weight": w(kv * hd, d),
                p + "self_attn.o_proj.weight": w(d, h * hd),
                p + "post_attention_layernorm.weight": norm_w(d),
                p + "mlp.gate_proj.weight": w(f, d),
                p + "mlp.up_proj.weight": w(f, d),
                p + "mlp.down_proj.weight": w(d, f),
            }
        )
        if qwen2:
            t.update(
                {
                    p + "self_attn.q_proj.bias": w(h * hd),
                    p + "self_attn.k_proj.bias": w(kv * hd),
                    p + "self_attn.v_proj.bias": w(kv * hd),
                }
            )
        if qwen3:
            t.update(
                {
                    p + "self_attn.q_norm.weight": gain(hd),
                    p + "self_attn.k_norm.weight": gain(hd),
                }
            )
    return t


def write_hf(directory: str, kind: str, *, seed: int = 0, shards: int = 1) -> dict:
    """Writes config.json, safetensors file(s) and tokenizer.json; returns tensors."""
    os.makedirs(directory, exist_ok=True)
    cfg = config_dict(kind)
    tensors = random_hf_tensors(cfg, seed)
    with open(os.path.join(directory, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    tiny_tokenizer().save(os.path.join(directory, "tokenizer.json"))
    if shards == 1:
        save_file(tensors, os.path.join(directory, "model.safetensors"))
        return tensors
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        save_file(part, os.path.join(directory, fname))
        weight_map.update({n: fname for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": weight_map}, fh)
    return tensors


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's Q/K permutation (rotate-half -> pairs)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_gguf(
    path: str, tensors: dict, cfg: dict, *, tokenizer: bool = True, arch: str = "llama"
) -> None:
    """Writes HF-named Llama ``tensors`` as GGUF the way llama.cpp converts them."""
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(h)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    if "head_dim" in cfg:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if tokenizer:
        tokens = vocab_tokens()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt2")
        w.add_token_list(tokens)
        w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
        w.add_token_merges([" ".join(m) for m in MERGES])
    rename = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    parts = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm",
    }
    # only llama.cpp's Llama converter permutes Q/K; Qwen keeps rotate-half (NEOX)
    permute = arch == "llama"
    for name, arr in tensors.items():
        if name in rename:
            out = rename[name]
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            stem, kind = rest.rsplit(".", 1)
            out = f"blk.{layer}.{parts[stem]}.{kind}"
            if permute and stem == "self_attn.q_proj":
                arr = llama_cpp_permute(arr, h)
            elif permute and stem == "self_attn.k_proj":
                arr = llama_cpp_permute(arr, kv)
        w.add_tensor(out, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def token_batch(vocab: int, batch: int, seq: int, seed: int = 0) -> np.ndarray:
    """Random int32 token ids ``[batch, seq]`` in ``[0, vocab)``."""
    return np.random.default_rng(seed).integers(0, vocab, (batch, seq)).astype(np.int32)


def family_config(family: str, vocab: int):
    """A tiny ``ModelConfig`` of ``family`` (llama, gpt2, gemma): 3 layers, 4 heads
    of 4, grouped-query where the family has it (2 KV heads; GPT-2 4)."""
    from theorycheck.models import Family, ModelConfig

    return ModelConfig(
        family=Family(family),
        vocab_size=vocab,
        hidden_size=16,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2 if family != "gpt2" else 4,
        head_dim=4,
        intermediate_size=32,
        max_positions=32,
    )
