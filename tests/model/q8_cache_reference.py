#!/usr/bin/env python3
"""Models and float64 logits for the q8_0 KV cache test (test_quantized_cache.cpp).

Usage: q8_cache_reference.py OUT_DIR

For each case of CASES writes OUT_DIR/CASE.gguf (make_family.py's model
builder), OUT_DIR/CASE.q8.ref (reference.py's float64 forward pass with a
q8_0 KV cache: each key and value row stored as 32-value q8_0 blocks and read
back, see q8_0_round) and OUT_DIR/CASE.f16.ref (the same with the f16 cache,
as make_family.py writes it). Both .ref files have make_family.py's WEFTREF1
format. Nothing here calls weft's code: the q8_0 rounding follows the format
(FACTS.md, ggml's quantize_row_q8_0_ref), written in numpy.

Head sizes 32, 64 and 128: a head's row is one, two or four q8_0 blocks.
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "families"))
import make_family as mf  # noqa: E402
import reference  # noqa: E402

# name -> make_family case parameters (DEFAULTS fill the rest).
CASES = {
    # make_family's qwen3 case itself: neox rope, q/k norms, head size 32.
    "qwen3": mf.CASES["qwen3"],
    # llama (normal rope), head size 64 (2 blocks), grouped-query attention.
    "llama_hd64": dict(seed=6401, arch="llama", n_embd=128, n_head=2, n_head_kv=1, n_ff=96),
    # qwen2 (neox rope, q/k/v biases), head size 128 (4 blocks), two kv heads.
    "qwen2_hd128": dict(seed=12802, arch="qwen2", n_embd=256, n_head=2, n_head_kv=2, n_ff=96,
                        qkv_bias=True, eps=1e-6, rope_base=1000000.0, eot="qwen"),
}


def f16(a):
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def q8_0_round(a):
    """What a q8_0 cache gives back for a (..., head_dim) array: per 32-value
    block, d = max|x| / 127 stored as f16, q = round(x / d) (halves away from
    zero, as C's roundf; q = 0 where d = 0), value q * d."""
    a = np.asarray(a, dtype=np.float64)
    assert a.shape[-1] % 32 == 0, a.shape
    b = a.reshape(a.shape[:-1] + (a.shape[-1] // 32, 32))
    d = np.abs(b).max(axis=-1, keepdims=True) / 127.0
    safe = np.where(d > 0, d, 1.0)
    x = b / safe
    q = np.where(d > 0, np.sign(x) * np.floor(np.abs(x) + 0.5), 0.0)
    assert np.abs(q).max(initial=0) <= 127
    return (q * f16(d)).reshape(a.shape)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    for name, params in CASES.items():
        case = dict(mf.DEFAULTS, **params)
        mf.CASES["q8cache_" + name] = case
        w, n_ctx, evals = mf.build("q8cache_" + name)
        n_vocab = w.tensors()["token_embd.weight"].shape[0]
        f16_logits = mf.run_evals(w.kv(), w.tensors(), n_ctx, evals)
        # reference.py stores cache rows through reference.f16_round (selftest.py swaps it the same way).
        original = reference.f16_round
        reference.f16_round = q8_0_round
        try:
            q8_logits = mf.run_evals(w.kv(), w.tensors(), n_ctx, evals)
        finally:
            reference.f16_round = original
        mf.write_atomic(os.path.join(out, name + ".gguf"), w.to_bytes())
        mf.write_atomic(os.path.join(out, name + ".f16.ref"), mf.ref_bytes(n_ctx, n_vocab, evals, f16_logits))
        mf.write_atomic(os.path.join(out, name + ".q8.ref"), mf.ref_bytes(n_ctx, n_vocab, evals, q8_logits))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
