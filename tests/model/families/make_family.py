#!/usr/bin/env python3
"""Writes tiny random GGUF models of each family and their expected logits.

Usage: make_family.py OUT_DIR [CASE ...] [--drop-tensor NAME]... [--drop-key KEY]...

For each CASE (default: all of CASES below) writes OUT_DIR/CASE.gguf and
OUT_DIR/CASE.ref. The contents depend only on the case (fixed seeds). With a
--drop-tensor/--drop-key, that tensor/key is left out of the .gguf (for tests
that expect weft to name what is missing) and no .ref is written. It is an
error (exit status 1) if a CASE named lacks it; with no CASE named, the cases
lacking it are skipped and it is an error if all do. Write dropped files to
their own OUT_DIR: they replace CASE.gguf there.

.ref format (little-endian): "WEFTREF1"; u32 n_ctx; u32 n_vocab; u32 n_evals;
per eval: u32 n_past; u32 n_tokens; i32 tokens[n_tokens];
f64 logits[n_tokens * n_vocab] (token-major). The logits come from
reference.py run on exactly what the .gguf holds, with a KV cache of n_ctx rows,
the evals run in order on one cache.

Models (see CASES for the parameters): GGUF layout and math per
/tmp/spec/families.md; weights f32, matrices N(0, (gain/sqrt(n_in))^2), norm
weights 1 + 0.1 N(0,1); the SentencePiece-style vocabulary of tokenizer_keys().
"""
import argparse
import math
import os
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
from reference import llama3_freq_factors, run_evals  # noqa: E402

# ---------------------------------------------------------------- tokenizer
# Pieces (type 1) chosen so each longer piece is the merge of two earlier ones
# ("▁Once▁upon▁a▁time" -> ▁Once ▁upon ▁a ▁time); a merged piece's score is its
# priority (higher merges first); single characters score lowest.
_CHARS = ["▁", "e", "t", "a", "o", "n", "i", "m", "h", "u", "p", "c", "O", "s", "r", "d"]
_MERGED = ["he", "▁t", "▁a", "on", "im", "up", "nc", "er", "▁the", "▁up", "▁upon",
           "▁tim", "▁time", "▁O", "▁Onc", "▁Once"]
EOT = {"llama": "<|eot_id|>", "qwen": "<|im_end|>", "phi3": "<|end|>", "gemma": "<end_of_turn>"}
T_NORMAL, T_UNKNOWN, T_CONTROL, T_BYTE = 1, 2, 3, 6


def vocabulary(eot):
    """[(piece, score, type)]: <unk> <s> </s>, 256 byte tokens, eot (optional), pieces."""
    v = [("<unk>", 0.0, T_UNKNOWN), ("<s>", 0.0, T_CONTROL), ("</s>", 0.0, T_CONTROL)]
    v += [(f"<0x{b:02X}>", 0.0, T_BYTE) for b in range(256)]
    if eot:
        v.append((EOT[eot], 0.0, T_CONTROL))
    v += [(p, -1.0 - i, T_NORMAL) for i, p in enumerate(_MERGED)]
    v += [(c, -100.0 - i, T_NORMAL) for i, c in enumerate(_CHARS)]
    return v


def tokenizer_keys(w, eot, add_space_prefix=None):
    vocab = vocabulary(eot)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", gw.STRING, [p for p, _, _ in vocab])
    w.add_array("tokenizer.ggml.scores", gw.F32, [s for _, s, _ in vocab])
    w.add_array("tokenizer.ggml.token_type", gw.I32, [t for _, _, t in vocab])
    w.add_u32("tokenizer.ggml.bos_token_id", 1)
    w.add_u32("tokenizer.ggml.eos_token_id", 2)
    w.add_u32("tokenizer.ggml.unknown_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    if add_space_prefix is not None:
        w.add_bool("tokenizer.ggml.add_space_prefix", add_space_prefix)
    return len(vocab)


# ---------------------------------------------------------------- cases
# Common to all unless a case says otherwise.
DEFAULTS = dict(n_layer=2, n_ctx=64, head_dim=None, n_rot=None, eps=1e-5, rope_base=10000.0,
                tied=False, qkv_bias=False, qk_norm=False, fused=False, gemma=False,
                n_expert=0, n_expert_used=0, n_ff_exp=0, n_ff_shexp=0, gain=1.2, qk_gain=None,
                eot=None, add_space_prefix=None, evals="default", extra=None,
                window=None, pattern=None, nocap=False, rope_linear=None, rope_yarn=None, gptoss=False,
                mxfp4=False)

# Seeds: chosen so that no value the reference stores in the f16 KV cache
# lies within 3e-7 (relative) of an f16 rounding boundary, so weft's f32
# arithmetic (a few ulp from float64) rounds every cache entry as the
# reference does; selftest.py checks it. Otherwise one entry landing an f16
# step apart moves the logits by ~1e-4 (normalized), as much as everything
# else together.
CASES = {
    # weft today: llama, normal rope, untied output.
    "llama": dict(seed=1, arch="llama", n_embd=32, n_head=4, n_head_kv=2, n_ff=64),
    # weft today: qwen2, neox rope, q/k/v biases.
    "qwen2": dict(seed=102, arch="qwen2", n_embd=32, n_head=4, n_head_kv=1, n_ff=48, qkv_bias=True,
                  eps=1e-6, rope_base=1000000.0, eot="qwen"),
    # Llama 3.x: tensor rope_freqs.weight from the llama3 formula; tied output; positions past 32k.
    "llama3_freqs": dict(seed=103, arch="llama", n_embd=64, n_head=2, n_head_kv=1, n_ff=96, tied=True,
                         eot="llama", qk_gain=2.0, n_ctx=33024, evals="far", extra="llama3_tensor"),
    # The same model (same seed), scaling from the llama.rope.scaling.* keys.
    "llama3_keys": dict(seed=103, arch="llama", n_embd=64, n_head=2, n_head_kv=1, n_ff=96, tied=True,
                        eot="llama", qk_gain=2.0, extra="llama3_keys"),
    # qwen3: head_dim 32 from key_length (q_dim 128 != n_embd 64), q/k norms.
    "qwen3": dict(seed=1804, arch="qwen3", n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=96,
                  qk_norm=True, eps=1e-6, rope_base=1000000.0, eot="qwen"),
    # qwen3moe: 4 experts, 2 used, n_ff_exp 48 != n_ff 96, expert_weights_norm written true.
    "qwen3moe": dict(seed=2405, arch="qwen3moe", n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=96,
                     qk_norm=True, eps=1e-6, rope_base=1000000.0, eot="qwen",
                     n_expert=4, n_expert_used=2, n_ff_exp=48, extra="weights_norm_true"),
    # qwen2moe: biases, 4 experts 2 used, shared expert, expert_weights_norm absent (false).
    "qwen2moe": dict(seed=206, arch="qwen2moe", n_embd=48, n_head=4, n_head_kv=2, n_ff=80, qkv_bias=True,
                     eps=1e-6, rope_base=1000000.0, eot="qwen",
                     n_expert=4, n_expert_used=2, n_ff_exp=32, n_ff_shexp=64),
    # phi3: fused qkv and gate|up, LongRoPE factors; short (n_ctx 32 <= 32) and long (64 > 32).
    "phi3_short": dict(seed=407, arch="phi3", n_embd=48, n_head=4, n_head_kv=2, n_ff=64, fused=True,
                       eot="phi3", n_ctx=32, extra="phi3"),
    "phi3_long": dict(seed=407, arch="phi3", n_embd=48, n_head=4, n_head_kv=2, n_ff=64, fused=True,
                      eot="phi3", n_ctx=64, extra="phi3"),
    # gemma2: 4 layers, head_dim 16 (q_dim 64 != 48), window 4 on even layers, soft-caps 5 / 3.
    "gemma2": dict(seed=808, arch="gemma2", n_embd=48, n_head=4, n_head_kv=2, head_dim=16, n_ff=64,
                   n_layer=4, gemma=True, tied=True, eps=1e-6, eot="gemma", add_space_prefix=False,
                   gain=1.5, extra="gemma2"),
    # gemma3: 6 layers, pattern 3 (layers 2, 5 global), window 4, q/k norms, linear rope x8 on
    # global layers (base 1e6), base 10000 on sliding ones; MQA (one kv head).
    "gemma3": dict(seed=3009, arch="gemma3", n_embd=48, n_head=4, n_head_kv=1, head_dim=16, n_ff=64,
                   n_layer=6, gemma=True, tied=True, qk_norm=True, eps=1e-6, rope_base=1000000.0,
                   eot="gemma", add_space_prefix=False, extra="gemma3"),
    # gpt-oss (OpenAI's open-weight MoE, the standard converter's layout): 4 layers, window 4 on
    # layers 0 and 2, a sink logit per head, q/k/v/o biases, head_dim 16 (q_dim 64 == n_embd, as
    # key_length says), YaRN x32 from 4096 at base 150000 (the published config), the pre-FFN norm
    # as post_attention_norm, 4 experts 2 used with router and expert biases large enough that the
    # clamped SwiGLU clamps, softmax over the top-k logits. Weights f32 (gptoss_mxfp4: the
    # experts' gate in MXFP4).
    "gptoss": dict(seed=6130, arch="gpt-oss", n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=64,
                   n_layer=4, qkv_bias=True, rope_base=150000.0, n_expert=4, n_expert_used=2, n_ff_exp=32,
                   gptoss=True, extra="gptoss", rope_yarn=dict(factor=32.0, orig=4096)),
}

# The option matrix: each family's base case again with an optional key
# present, absent or past the context (windows, their per-layer pattern,
# soft-caps, rope scaling, tied output, fused tensors). Each entry: base
# case, its own seed (chosen as above), and the overrides; "window":
# "absent" drops the family's window key, an int writes that window;
# "pattern": a period or one bool per layer; "nocap": no soft-cap keys.
VARIANTS = {
    # The converter writes 2047 for Phi-3-mini-4k: every layer slides, the
    # window larger than the context in use.
    "phi3_window_big": ("phi3_short", 407, dict(window=2047)),
    "phi3_window": ("phi3_long", 407, dict(window=5)),
    "phi3_unfused": ("phi3_short", 407, dict(fused=False)),
    # A window in a family without a pattern slides on every layer.
    "llama_window": ("llama", 1, dict(window=3)),
    "qwen2_window_pattern": ("qwen2", 102, dict(window=4, pattern=[True, False])),
    "qwen2_tied": ("qwen2", 102, dict(tied=True)),
    "qwen3_linear": ("qwen3", 1804, dict(rope_linear=4.0)),
    # YaRN (rope.scaling.type yarn): default betas, and every key set.
    "qwen3_yarn": ("qwen3", 5010, dict(rope_yarn=dict(factor=4.0, orig=4096))),
    "llama_yarn": ("llama", 1, dict(rope_yarn=dict(factor=8.0, orig=32, beta_fast=8.0, beta_slow=0.5,
                                                     attn=0.9))),
    "qwen3moe_window_big": ("qwen3moe", 2405, dict(window=4096)),
    "qwen2moe_window": ("qwen2moe", 5007, dict(window=6)),
    "gemma2_nowindow": ("gemma2", 5044, dict(window="absent", nocap=True)),
    "gemma2_window_big": ("gemma2", 5023, dict(window=4096, tied=False)),
    "gemma3_window_list": ("gemma3", 5001, dict(pattern=[True, False, True, True, False, False])),
    "gemma3_nowindow": ("gemma3", 5005, dict(window="absent")),
    # gpt-oss's experts as real files hold them: ffn_gate_exps in MXFP4 (test_families.cpp
    # allows this case the q8_0 rounding of the activations the MXFP4 product reads).
    "gptoss_mxfp4": ("gptoss", 6108, dict(mxfp4=True)),
}
for _name, (_base, _seed, _over) in VARIANTS.items():
    CASES[_name] = dict(CASES[_base], seed=_seed, **_over)
for _c in CASES.values():
    for _k, _v in DEFAULTS.items():
        _c.setdefault(_k, _v)

# Llama 3 scaling used by both llama3 cases (see the report for why L = 64):
# with n_rot 32 and base 10000 the factors are [1, 1, smoothed x3, 8 x11].
LLAMA3 = dict(factor=8.0, orig_ctx=64, low=1.0, high=4.0)


def make_evals(kind, rng, n_vocab):
    """default: prompt of 7 at 0, then 5 single tokens (positions 7..11).
    far: prompt of 7, 3 single tokens (7..9), then 2 tokens at n_past 32990."""
    toks = [int(t) for t in rng.integers(0, n_vocab, 12)]
    evals = [(0, toks[:7])]
    if kind == "default":
        evals += [(7 + i, [toks[7 + i]]) for i in range(5)]
    elif kind == "far":
        evals += [(7 + i, [toks[7 + i]]) for i in range(3)] + [(32990, toks[10:12])]
    return evals


# DeepSeek-V2/V3 (deepseek2), written as the standard converter does: a V3-like
# model (q compression, sigmoid router with a selection bias and group-limited
# choice, weights normalized and scaled, YaRN with its mscale, the newer
# converter's attn_k_b / attn_v_b and *_mla keys) and a V2-Lite-like one (no q
# compression, softmax router, an older converter's attn_kv_b and plain keys).
# Both: one leading dense layer, then routed experts plus shared ones.
DEEPSEEK = {
    "deepseek2": dict(seed=2029, n_embd=64, n_head=4, n_layer=3, q_lora=32, kv_lora=32, nope=16, rot=8, v=16,
                      n_ff=96, n_expert=8, n_expert_used=2, n_ff_exp=24, shared=1, groups=4, group_used=2,
                      sigmoid=True, bias=True, norm=True, scale=2.5, kv_b=False,
                      yarn=dict(factor=4.0, orig=32, log_mul=0.0707)),
    "deepseek2_lite": dict(seed=2025, n_embd=48, n_head=4, n_layer=3, q_lora=0, kv_lora=32, nope=16, rot=8, v=12,
                           n_ff=80, n_expert=4, n_expert_used=2, n_ff_exp=24, shared=2, groups=0, group_used=0,
                           sigmoid=False, bias=False, norm=None, scale=None, kv_b=True, yarn=None),
}


def build_deepseek2(name):
    """-> (GGUFWriter, n_ctx, evals) for a DEEPSEEK case."""
    c = DEEPSEEK[name]
    rng = np.random.default_rng(c["seed"])
    p = "deepseek2."
    n_embd, H, n_layer, rank, rot, nope, vd = (c[k] for k in ("n_embd", "n_head", "n_layer", "kv_lora", "rot",
                                                              "nope", "v"))
    k_dim = nope + rot
    w = gw.GGUFWriter()
    w.add_string("general.architecture", "deepseek2")
    w.add_string("general.name", f"weft-test-{name}")
    w.add_u32(p + "context_length", 4096)
    w.add_u32(p + "embedding_length", n_embd)
    w.add_u32(p + "block_count", n_layer)
    w.add_u32(p + "feed_forward_length", c["n_ff"])
    w.add_u32(p + "attention.head_count", H)
    w.add_f32(p + "attention.layer_norm_rms_epsilon", 1e-6)
    w.add_f32(p + "rope.freq_base", 10000.0)
    w.add_u32(p + "rope.dimension_count", rot)
    w.add_u32(p + "leading_dense_block_count", 1)
    if c["q_lora"]:
        w.add_u32(p + "attention.q_lora_rank", c["q_lora"])
    w.add_u32(p + "attention.kv_lora_rank", rank)
    if c["kv_b"]:  # the older converter: decompressed heads under the plain keys
        w.add_u32(p + "attention.head_count_kv", H)
        w.add_u32(p + "attention.key_length", k_dim)
        w.add_u32(p + "attention.value_length", vd)
    else:  # the newer one: the cached row under the plain keys, heads under *_mla
        w.add_u32(p + "attention.head_count_kv", 1)
        w.add_u32(p + "attention.key_length", rank + rot)
        w.add_u32(p + "attention.value_length", rank)
        w.add_u32(p + "attention.key_length_mla", k_dim)
        w.add_u32(p + "attention.value_length_mla", vd)
    w.add_u32(p + "expert_count", c["n_expert"])
    w.add_u32(p + "expert_used_count", c["n_expert_used"])
    w.add_u32(p + "expert_feed_forward_length", c["n_ff_exp"])
    w.add_u32(p + "expert_shared_count", c["shared"])
    if c["scale"] is not None:
        w.add_f32(p + "expert_weights_scale", c["scale"])
    if c["norm"] is not None:
        w.add_bool(p + "expert_weights_norm", c["norm"])
    if c["sigmoid"]:
        w.add_u32(p + "expert_gating_func", 2)
    if c["groups"]:
        w.add_u32(p + "expert_group_count", c["groups"])
        w.add_u32(p + "expert_group_used_count", c["group_used"])
    if c["yarn"]:
        y = c["yarn"]
        w.add_string(p + "rope.scaling.type", "yarn")
        w.add_f32(p + "rope.scaling.factor", y["factor"])
        w.add_u32(p + "rope.scaling.original_context_length", y["orig"])
        w.add_f32(p + "rope.scaling.yarn_log_multiplier", y["log_mul"])
    n_vocab = tokenizer_keys(w, None)

    def mat(n_out, n_in, g=1.2):
        return rng.normal(0.0, g / math.sqrt(n_in), (n_out, n_in))

    def norm(n):
        return 1.0 + 0.1 * rng.normal(size=n)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd, 1.5))
    for il in range(n_layer):
        b = f"blk.{il}."
        w.add_tensor(b + "attn_norm.weight", norm(n_embd))
        if c["q_lora"]:
            w.add_tensor(b + "attn_q_a.weight", mat(c["q_lora"], n_embd))
            w.add_tensor(b + "attn_q_a_norm.weight", norm(c["q_lora"]))
            w.add_tensor(b + "attn_q_b.weight", mat(H * k_dim, c["q_lora"], 2.0))
        else:
            w.add_tensor(b + "attn_q.weight", mat(H * k_dim, n_embd, 2.0))
        w.add_tensor(b + "attn_kv_a_mqa.weight", mat(rank + rot, n_embd, 2.0))
        w.add_tensor(b + "attn_kv_a_norm.weight", norm(rank))
        kv_b = mat(H * (nope + vd), rank, 1.5)  # torch (H (nope + v), rank): per head nope rows, then v rows
        if c["kv_b"]:
            w.add_tensor(b + "attn_kv_b.weight", kv_b)
        else:  # as the converter cuts it: k_b (H, rank, nope), v_b (H, v, rank)
            per = kv_b.reshape(H, nope + vd, rank)
            w.add_tensor(b + "attn_k_b.weight", np.ascontiguousarray(np.transpose(per[:, :nope, :], (0, 2, 1))))
            w.add_tensor(b + "attn_v_b.weight", np.ascontiguousarray(per[:, nope:, :]))
        w.add_tensor(b + "attn_output.weight", mat(n_embd, H * vd))
        w.add_tensor(b + "ffn_norm.weight", norm(n_embd))
        if il < 1:
            w.add_tensor(b + "ffn_gate.weight", mat(c["n_ff"], n_embd))
            w.add_tensor(b + "ffn_up.weight", mat(c["n_ff"], n_embd))
            w.add_tensor(b + "ffn_down.weight", mat(n_embd, c["n_ff"]))
            continue
        ne, nfe, nfs = c["n_expert"], c["n_ff_exp"], c["n_ff_exp"] * c["shared"]
        w.add_tensor(b + "ffn_gate_inp.weight", mat(ne, n_embd, 2.0))
        if c["bias"]:
            w.add_tensor(b + "exp_probs_b.bias", 0.3 * rng.normal(size=ne))
        w.add_tensor(b + "ffn_gate_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
        w.add_tensor(b + "ffn_up_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
        w.add_tensor(b + "ffn_down_exps.weight", np.stack([mat(n_embd, nfe) for _ in range(ne)]))
        w.add_tensor(b + "ffn_gate_shexp.weight", mat(nfs, n_embd))
        w.add_tensor(b + "ffn_up_shexp.weight", mat(nfs, n_embd))
        w.add_tensor(b + "ffn_down_shexp.weight", mat(n_embd, nfs))
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", mat(n_vocab, n_embd, 1.5))
    return w, 64, make_evals("default", rng, n_vocab)


def build(name):
    """-> (GGUFWriter, n_ctx, evals) for one case."""
    if name in DEEPSEEK:
        return build_deepseek2(name)
    c = CASES[name]
    rng = np.random.default_rng(c["seed"])
    arch, p = c["arch"], c["arch"] + "."
    n_embd, n_head, n_head_kv, n_layer = c["n_embd"], c["n_head"], c["n_head_kv"], c["n_layer"]
    head_dim = c["head_dim"] or n_embd // n_head
    n_rot = c["n_rot"] or head_dim
    q_dim, kv_dim = n_head * head_dim, n_head_kv * head_dim
    n_ff = c["n_ff"]

    w = gw.GGUFWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", f"weft-test-{name}")
    w.add_u32(p + "context_length", max(4096, 4 * c["n_ctx"]))
    w.add_u32(p + "embedding_length", n_embd)
    w.add_u32(p + "block_count", n_layer)
    w.add_u32(p + "feed_forward_length", n_ff)
    w.add_u32(p + "attention.head_count", n_head)
    w.add_u32(p + "attention.head_count_kv", n_head_kv)
    w.add_f32(p + "attention.layer_norm_rms_epsilon", c["eps"])
    w.add_f32(p + "rope.freq_base", c["rope_base"])
    w.add_u32(p + "rope.dimension_count", n_rot)
    if c["head_dim"]:
        w.add_u32(p + "attention.key_length", head_dim)
        w.add_u32(p + "attention.value_length", head_dim)
    if c["n_expert"]:
        w.add_u32(p + "expert_count", c["n_expert"])
        w.add_u32(p + "expert_used_count", c["n_expert_used"])
        w.add_u32(p + "expert_feed_forward_length", c["n_ff_exp"])
    if c["n_ff_shexp"]:
        w.add_u32(p + "expert_shared_feed_forward_length", c["n_ff_shexp"])
    n_vocab = tokenizer_keys(w, c["eot"], c["add_space_prefix"])

    gain = c["gain"]
    qk_gain = c["qk_gain"] or gain

    def mat(n_out, n_in, g=gain):
        return rng.normal(0.0, g / math.sqrt(n_in), (n_out, n_in))

    def norm(n):
        return 1.0 + 0.1 * rng.normal(size=n)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd, 1.5))
    for il in range(n_layer):
        b = f"blk.{il}."
        w.add_tensor(b + "attn_norm.weight", norm(n_embd))
        if c["fused"]:
            w.add_tensor(b + "attn_qkv.weight", np.concatenate(
                [mat(q_dim, n_embd, qk_gain), mat(kv_dim, n_embd, qk_gain), mat(kv_dim, n_embd)]))
        else:
            w.add_tensor(b + "attn_q.weight", mat(q_dim, n_embd, qk_gain))
            w.add_tensor(b + "attn_k.weight", mat(kv_dim, n_embd, qk_gain))
            w.add_tensor(b + "attn_v.weight", mat(kv_dim, n_embd))
        if c["qkv_bias"]:
            w.add_tensor(b + "attn_q.bias", 0.3 * rng.normal(size=q_dim))
            w.add_tensor(b + "attn_k.bias", 0.3 * rng.normal(size=kv_dim))
            w.add_tensor(b + "attn_v.bias", 0.3 * rng.normal(size=kv_dim))
        if c["qk_norm"]:
            w.add_tensor(b + "attn_q_norm.weight", norm(head_dim))
            w.add_tensor(b + "attn_k_norm.weight", norm(head_dim))
        w.add_tensor(b + "attn_output.weight", mat(n_embd, q_dim))
        if c["gptoss"]:
            w.add_tensor(b + "attn_output.bias", 0.3 * rng.normal(size=n_embd))
            w.add_tensor(b + "attn_sinks.weight", 1.5 * rng.normal(size=n_head))
        if c["gemma"] or c["gptoss"]:  # gpt-oss: the pre-FFN norm under this name
            w.add_tensor(b + "post_attention_norm.weight", norm(n_embd))
        if not c["gptoss"]:
            w.add_tensor(b + "ffn_norm.weight", norm(n_embd))
        if c["gptoss"]:
            add_gptoss_experts(w, rng, b, n_embd, c["n_expert"], c["n_ff_exp"], mat, c["mxfp4"])
        elif c["n_expert"]:
            ne, nfe = c["n_expert"], c["n_ff_exp"]
            w.add_tensor(b + "ffn_gate_inp.weight", mat(ne, n_embd, 2.0))
            w.add_tensor(b + "ffn_gate_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
            w.add_tensor(b + "ffn_up_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
            w.add_tensor(b + "ffn_down_exps.weight", np.stack([mat(n_embd, nfe) for _ in range(ne)]))
            if c["n_ff_shexp"]:
                nfs = c["n_ff_shexp"]
                w.add_tensor(b + "ffn_gate_inp_shexp.weight", rng.normal(0.0, 1.0 / math.sqrt(n_embd), n_embd))
                w.add_tensor(b + "ffn_gate_shexp.weight", mat(nfs, n_embd))
                w.add_tensor(b + "ffn_up_shexp.weight", mat(nfs, n_embd))
                w.add_tensor(b + "ffn_down_shexp.weight", mat(n_embd, nfs))
        elif c["fused"]:
            w.add_tensor(b + "ffn_up.weight", np.concatenate([mat(n_ff, n_embd), mat(n_ff, n_embd)]))
            w.add_tensor(b + "ffn_down.weight", mat(n_embd, n_ff))
        else:
            w.add_tensor(b + "ffn_gate.weight", mat(n_ff, n_embd))
            w.add_tensor(b + "ffn_up.weight", mat(n_ff, n_embd))
            w.add_tensor(b + "ffn_down.weight", mat(n_embd, n_ff))
        if c["gemma"]:
            w.add_tensor(b + "post_ffw_norm.weight", norm(n_embd))
    w.add_tensor("output_norm.weight", norm(n_embd))
    if not c["tied"]:
        w.add_tensor("output.weight", mat(n_vocab, n_embd, 1.5))

    extra = c["extra"]
    if extra == "llama3_tensor":
        w.add_tensor("rope_freqs.weight", llama3_freq_factors(
            n_rot, c["rope_base"], LLAMA3["factor"], LLAMA3["orig_ctx"], LLAMA3["low"], LLAMA3["high"]))
    elif extra == "llama3_keys":
        w.add_string(p + "rope.scaling.type", "llama3")
        w.add_f32(p + "rope.scaling.factor", LLAMA3["factor"])
        w.add_u32(p + "rope.scaling.original_context_length", LLAMA3["orig_ctx"])
        w.add_f32(p + "rope.scaling.low_freq_factor", LLAMA3["low"])
        w.add_f32(p + "rope.scaling.high_freq_factor", LLAMA3["high"])
    elif extra == "weights_norm_true":
        w.add_bool(p + "expert_weights_norm", True)
    elif extra == "phi3":
        w.add_tensor("rope_factors_long.weight", rng.uniform(1.0, 4.0, n_rot // 2))
        w.add_tensor("rope_factors_short.weight", rng.uniform(1.0, 4.0, n_rot // 2))
        w.add_u32(p + "rope.scaling.original_context_length", 32)
        w.add_f32(p + "rope.scaling.attn_factor", 1.2)
    elif extra == "gemma2":
        w.add_u32(p + "attention.sliding_window", 4)
        if not c["nocap"]:
            w.add_f32(p + "attn_logit_softcapping", 5.0)
            w.add_f32(p + "final_logit_softcapping", 3.0)
    elif extra == "gptoss":
        w.add_u32(p + "attention.sliding_window", 4)
    elif extra == "gemma3":
        w.add_u32(p + "attention.sliding_window", 4)
        w.add_u32(p + "attention.sliding_window_pattern", 3)
        w.add_f32(p + "rope.freq_base_swa", 10000.0)
        w.add_string(p + "rope.scaling.type", "linear")
        w.add_f32(p + "rope.scaling.factor", 8.0)

    apply_overrides(w, c, p)
    evals = make_evals(c["evals"], rng, n_vocab)
    return w, c["n_ctx"], evals


def add_gptoss_experts(w, rng, b, n_embd, ne, nfe, mat, mxfp4):
    """Router and experts with their biases. The gate and up biases (sd 4) put
    many pre-activations past the SwiGLU's clamp at +-7. With mxfp4,
    ffn_gate_exps is MXFP4: random codes under scale bytes 122-123 (values up to
    6 * 2^-4, sd ~0.15, as mat()'s); the reference reads the values the blocks
    hold."""
    w.add_tensor(b + "ffn_gate_inp.weight", mat(ne, n_embd, 2.0))
    w.add_tensor(b + "ffn_gate_inp.bias", rng.normal(size=ne))
    if mxfp4:
        n_blocks = n_embd // 32
        w.add_tensor_mxfp4(b + "ffn_gate_exps.weight", rng.integers(122, 124, (ne, nfe, n_blocks)),
                           rng.integers(0, 16, (ne, nfe, n_blocks, 32)))
    else:
        w.add_tensor(b + "ffn_gate_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
    w.add_tensor(b + "ffn_up_exps.weight", np.stack([mat(nfe, n_embd) for _ in range(ne)]))
    w.add_tensor(b + "ffn_down_exps.weight", np.stack([mat(n_embd, nfe, 0.5) for _ in range(ne)]))
    w.add_tensor(b + "ffn_gate_exps.bias", 4.0 * rng.normal(size=(ne, nfe)))
    w.add_tensor(b + "ffn_up_exps.bias", 4.0 * rng.normal(size=(ne, nfe)))
    w.add_tensor(b + "ffn_down_exps.bias", 0.3 * rng.normal(size=(ne, n_embd)))


def apply_overrides(w, c, p):
    """The matrix's keys (see VARIANTS), over what the family's extra wrote."""
    window_key, pattern_key = p + "attention.sliding_window", p + "attention.sliding_window_pattern"
    if c["window"] is not None:
        for key in (window_key, pattern_key):
            if key in w.kv():
                w.remove_key(key)
        if c["window"] != "absent":
            w.add_u32(window_key, c["window"])
    if c["pattern"] is not None:
        if pattern_key in w.kv():
            w.remove_key(pattern_key)
        if isinstance(c["pattern"], list):
            w.add_array(pattern_key, gw.BOOL, c["pattern"])
        else:
            w.add_u32(pattern_key, c["pattern"])
    if c["rope_yarn"]:
        y = c["rope_yarn"]
        w.add_string(p + "rope.scaling.type", "yarn")
        w.add_f32(p + "rope.scaling.factor", y["factor"])
        w.add_u32(p + "rope.scaling.original_context_length", y["orig"])
        if "beta_fast" in y:
            w.add_f32(p + "rope.scaling.yarn_beta_fast", y["beta_fast"])
            w.add_f32(p + "rope.scaling.yarn_beta_slow", y["beta_slow"])
            w.add_f32(p + "rope.scaling.yarn_attn_factor", y["attn"])
    if c["rope_linear"]:
        w.add_string(p + "rope.scaling.type", "linear")
        w.add_f32(p + "rope.scaling.factor", c["rope_linear"])


def ref_bytes(n_ctx, n_vocab, evals, logits):
    out = bytearray(b"WEFTREF1")
    out += struct.pack("<III", n_ctx, n_vocab, len(evals))
    for (n_past, toks), lg in zip(evals, logits):
        assert lg.shape == (len(toks), n_vocab)
        out += struct.pack("<II", n_past, len(toks))
        out += np.asarray(toks, dtype="<i4").tobytes()
        out += np.ascontiguousarray(lg, dtype="<f8").tobytes()
    return bytes(out)


def write_atomic(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("cases", nargs="*", metavar="CASE", help=f"any of: {' '.join(CASES)} (and DEEPSEEK's)")
    ap.add_argument("--drop-tensor", action="append", default=[], metavar="NAME")
    ap.add_argument("--drop-key", action="append", default=[], metavar="KEY")
    a = ap.parse_args(argv)
    every = list(CASES) + list(DEEPSEEK)
    unknown = [c for c in a.cases if c not in every]
    if unknown:
        ap.error(f"unknown case(s) {' '.join(unknown)}; cases: {' '.join(every)}")
    os.makedirs(a.out_dir, exist_ok=True)
    dropping = bool(a.drop_tensor or a.drop_key)
    written = 0
    for name in a.cases or every:
        w, n_ctx, evals = build(name)
        if dropping:
            try:
                for t in a.drop_tensor:
                    w.remove_tensor(t)
                for k in a.drop_key:
                    w.remove_key(k)
            except KeyError as e:
                if a.cases:  # a case named on the command line must have what is dropped
                    print(f"make_family: {name}: {e.args[0]}", file=sys.stderr)
                    return 1
                continue
            write_atomic(os.path.join(a.out_dir, name + ".gguf"), w.to_bytes())
        else:
            logits = run_evals(w.kv(), w.tensors(), n_ctx, evals)
            n_vocab = w.tensors()["token_embd.weight"].shape[0]
            write_atomic(os.path.join(a.out_dir, name + ".gguf"), w.to_bytes())
            write_atomic(os.path.join(a.out_dir, name + ".ref"), ref_bytes(n_ctx, n_vocab, evals, logits))
        written += 1
    if written == 0:
        print("make_family: nothing written", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
