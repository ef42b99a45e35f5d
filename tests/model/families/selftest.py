#!/usr/bin/env python3
"""Self-consistency checks of gguf_writer.py, reference.py and make_family.py.

Usage: selftest.py            (exit status 0 when every check passes)

  a. The writer round-trips: a GGUF reader written here (from FACTS.md "GGUF v3",
     sharing nothing with gguf_writer) reads back every key with its type, every
     tensor, and finds offsets and the data section aligned (default 32 and an
     explicit general.alignment); every case's file is read back the same way.
  b. Evals split differently (all at once, prompt + steps, one token at a time)
     agree; the .ref logits equal the reference run on the file as read back.
  c. llama3 frequency factors against hand-computed values.
  d. Soft-caps bite: gemma2 logits within +-3 and not so without the cap; the
     attention cap changes the logits.
  e. Rope: identity at position 0, scores depend only on relative positions.
  f. The options matter: sliding windows change only positions past the window,
     phi3 short and long differ, llama3 tensor and keys agree, vocabulary merges.
"""
import math
import os
import struct
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
import make_family as mf  # noqa: E402
import reference as ref  # noqa: E402

FAILED = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILED.append(what)


# ------------------------------------------------------------ independent reader
def read_gguf(data):
    """-> (kv {key: value}, types {key: type}, tensors {name: float64 array}, offsets ok)."""
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF", "magic"
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    assert version == 3
    kv, types = {}, {}
    for _ in range(n_kv):
        k = string()
        t = take("<I")
        types[k] = (9, struct.unpack_from("<I", data, pos)[0]) if t == 9 else t
        kv[k] = value(t)
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    aligned = start % align == 0 and all(off % align == 0 for _, _, _, off in infos)
    tensors = {}
    for name, ne, t, off in infos:
        count = int(np.prod(ne))
        if t == 39:  # mxfp4: 17-byte blocks of 32 along ne0, the OCP MX E2M1 codes under an E8M0 scale
            fp4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
            raw = np.frombuffer(data, dtype=np.uint8, count=count // 32 * 17, offset=start + off).reshape(-1, 17)
            vals = np.empty((raw.shape[0], 32))
            for i, blk in enumerate(raw):
                for j in range(16):
                    for k, code in ((j, int(blk[1 + j]) & 15), (j + 16, int(blk[1 + j]) >> 4)):
                        vals[i, k] = (-1 if code & 8 else 1) * fp4[code & 7] * 2.0 ** (int(blk[0]) - 127)
            tensors[name] = vals.reshape(ne[::-1])
            continue
        dt = {0: "<f4", 1: "<f2"}[t]
        a = np.frombuffer(data, dtype=dt, count=count, offset=start + off)
        tensors[name] = a.reshape(ne[::-1]).astype(np.float64)
    return kv, types, tensors, aligned


def check_writer():
    for align in (None, 64):
        w = gw.GGUFWriter()
        w.add_string("general.architecture", "test")
        if align:
            w.add_u32("general.alignment", align)
        w.add_u32("t.u32", 4000000000)
        w.add_i32("t.i32", -123456)
        w.add_f32("t.f32", 1.1)
        w.add_bool("t.bool", True)
        w.add_bool("t.false", False)
        w.add_u64("t.u64", 2 ** 40 + 3)
        w.add_string("t.str", "w\u00f6rld \u2581x")
        w.add_array("t.strs", gw.STRING, ["<s>", "", "\u2581the"])
        w.add_array("t.f32s", gw.F32, [0.0, -1.5, 0.1])
        w.add_array("t.i32s", gw.I32, [-1, 0, 7])
        rng = np.random.default_rng(0)
        w.add_tensor("a", rng.normal(size=(3, 5)))                  # 60 bytes: next offset padded
        w.add_tensor("b", rng.normal(size=(7,)), gw.GGML_F16)
        w.add_tensor("c", rng.normal(size=(2, 3, 4)))
        kv, types, tensors, aligned = read_gguf(w.to_bytes())
        tag = f"writer (alignment {align or 'default'})"
        check(kv == w.kv(), f"{tag}: keys and values read back")
        check(kv["t.f32"] == float(np.float32(1.1)) and kv["t.strs"][2] == "\u2581the", f"{tag}: f32 and strings")
        expect_types = {k: (t if t != gw.ARRAY else (9, w._kv[k][1][0])) for k, t in w.kv_types().items()}
        check(types == expect_types, f"{tag}: value types")
        check(aligned, f"{tag}: data section and offsets aligned")
        wt = w.tensors()
        check(list(tensors) == list(wt) and all(np.array_equal(tensors[n], wt[n]) for n in wt),
              f"{tag}: tensors (f32, f16, 3-D) read back")
        check(tensors["c"].shape == (2, 3, 4), f"{tag}: dims reversed and back")


# ------------------------------------------------------------ per case
def splits(evals):
    """The same tokens and positions as evals, run (1) as few evals as possible, and
    (2) one token at a time."""
    flat = [(n_past + i, t) for n_past, toks in evals for i, t in enumerate(toks)]
    runs = []
    for p, t in flat:
        if runs and runs[-1][0] + len(runs[-1][1]) == p:
            runs[-1][1].append(t)
        else:
            runs.append((p, [t]))
    return runs, [(p, [t]) for p, t in flat]


def stack(logits):
    return np.concatenate(logits, axis=0)


def check_cases(tmp):
    results = {}
    for name in list(mf.CASES) + list(mf.DEEPSEEK):
        w, n_ctx, evals = mf.build(name)
        kv, _, tensors, aligned = read_gguf(w.to_bytes())
        base = ref.run_evals(kv, tensors, n_ctx, evals)
        results[name] = (kv, tensors, n_ctx, evals, base)
        check(aligned and kv == w.kv() and all(np.array_equal(tensors[n], a) for n, a in w.tensors().items()),
              f"{name}: file reads back")
        mf.main([tmp, name])
        with open(os.path.join(tmp, name + ".ref"), "rb") as f:
            data = f.read()
        magic, (n_ctx_r, n_vocab, n_evals) = data[:8], struct.unpack_from("<III", data, 8)
        pos, same = 20, magic == b"WEFTREF1" and n_ctx_r == n_ctx and n_evals == len(evals)
        for (n_past, toks), lg in zip(evals, base):
            np_, nt = struct.unpack_from("<II", data, pos)
            pos += 8
            got_t = np.frombuffer(data, "<i4", nt, pos)
            pos += 4 * nt
            got = np.frombuffer(data, "<f8", nt * n_vocab, pos).reshape(nt, n_vocab)
            pos += 8 * nt * n_vocab
            same &= np_ == n_past and list(got_t) == toks and np.array_equal(got, lg)
        check(same and pos == len(data), f"{name}: .ref = reference on the file as read back")
        scale = np.abs(stack(base)).max()
        for label, ev in zip(("all at once", "one token at a time"), splits(evals)):
            d = np.abs(stack(ref.run_evals(kv, tensors, n_ctx, ev)) - stack(base)).max() / scale
            check(d < 1e-9, f"{name}: evals split {label}: max rel diff {d:.1e}")
        lg = stack(base)
        check(lg.std() > 0.3 and np.isfinite(lg).all(), f"{name}: logits not degenerate (std {lg.std():.2f})")
    return results


def check_llama3(results):
    ff = ref.llama3_freq_factors(32, 10000.0, 8.0, 64, 1.0, 4.0)
    # i=0: wavelen 2 pi < 64/4 -> 1; i=1: 2 pi 10^(1/4) = 11.17 < 16 -> 1;
    # i=2: wavelen 2 pi sqrt(10) = 19.869, smooth = (64/19.869 - 1)/3 = 0.74037,
    #      ff = 1/(0.25963/8 + 0.74037) = 1.293976; i=5: 2 pi 10^(5/4) = 111.7 > 64 -> 8.
    check(ff[0] == 1.0 and ff[1] == 1.0 and abs(ff[2] - 1.293976) < 2e-6 and np.all(ff[5:] == 8.0),
          f"llama3 factors by hand: {np.round(ff[:6], 6)}")
    # Llama 3.1 8B values (base 500000, n_rot 128, L 8192): ff[0] = 1, last = 8, smoothed in between.
    ff8 = ref.llama3_freq_factors(128, 500000.0, 8.0, 8192)
    wl = 2 * math.pi * 500000.0 ** (2 * 30 / 128)  # 2 pi 470.3 = 2955, between 8192/4 and 8192
    s = (8192 / wl - 1) / 3
    check(ff8[0] == 1.0 and ff8[-1] == 8.0 and 0 < s < 1 and abs(ff8[30] - 1 / ((1 - s) / 8 + s)) < 1e-12,
          "llama3 factors, 8B settings")
    a, b = results["llama3_freqs"][4], results["llama3_keys"][4]
    d = np.abs(stack(a[:4]) - stack(b[:4])).max()
    check(d < 1e-4, f"llama3_freqs (tensor) and llama3_keys (keys) agree on the shared evals: {d:.1e}")
    # The far eval: how much of the attention survives ~33000 zero rows (information).
    kv, tensors, n_ctx, evals, base = results["llama3_freqs"]
    t = dict(tensors)
    t["rope_freqs.weight"] = np.ones_like(t["rope_freqs.weight"])
    no_ff = ref.run_evals(kv, t, n_ctx, evals)
    d_far = np.abs(no_ff[-1] - base[-1]).max()
    check(d_far > 1e-2, f"llama3_freqs: far eval (n_past 32990) depends on the factors: {d_far:.2e}")
    # ... and on the prompt's rows, ~32980 positions back, despite the zero rows in between.
    alone = ref.run_evals(kv, tensors, n_ctx, evals[-1:])
    d_prompt = np.abs(alone[-1] - base[-1]).max()
    check(d_prompt > 1e-2, f"llama3_freqs: far eval depends on the prompt's cache rows: {d_prompt:.2e}")


def check_softcap(results):
    kv, tensors, n_ctx, evals, base = results["gemma2"]
    lg = stack(base)
    check(np.abs(lg).max() <= 3.0, f"gemma2: max |logit| {np.abs(lg).max():.3f} <= final cap 3")
    k2 = dict(kv)
    del k2["gemma2.final_logit_softcapping"]
    raw = stack(ref.run_evals(k2, tensors, n_ctx, evals))
    check(np.abs(raw).max() > 3.0 and np.allclose(np.tanh(raw / 3) * 3, lg, atol=1e-12, rtol=0),
          f"gemma2: final cap bites (uncapped max {np.abs(raw).max():.2f})")
    k3 = dict(kv)
    del k3["gemma2.attn_logit_softcapping"]
    d = np.abs(stack(ref.run_evals(k3, tensors, n_ctx, evals)) - lg).max()
    check(d > 1e-2, f"gemma2: attention cap changes the logits by {d:.2e}")


def check_rope():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(1, 2, 16)), rng.normal(size=(1, 2, 16))
    ff = rng.uniform(1, 4, 6)
    for neox in (False, True):
        r = lambda x, p: ref.rope(x, np.array([p]), 12, neox, 500.0, 0.5, ff)  # noqa: E731
        ident = np.allclose(r(q, 0), q)
        s1 = np.einsum("ihd,ihd->h", r(q, 9), r(k, 4))
        s2 = np.einsum("ihd,ihd->h", r(q, 105), r(k, 100))
        keep = np.array_equal(r(q, 7)[..., 12:], q[..., 12:])
        scaled = np.allclose(np.linalg.norm(ref.rope(q, np.array([3]), 16, neox, 1e4, attn_factor=1.2)),
                             1.2 * np.linalg.norm(q))
        check(ident and np.allclose(s1, s2) and keep and scaled,
              f"rope {'neox' if neox else 'normal'}: identity at 0, relative, dims >= n_rot kept, attn_factor")
    # Normal mode pairs adjacent dims: a vector in dims (0, 1) only stays there.
    x = np.zeros((1, 1, 8))
    x[0, 0, :2] = [1.0, 0.0]
    y = ref.rope(x, np.array([1]), 8, False, 10000.0)
    check(np.allclose(y[0, 0, :2], [math.cos(1), math.sin(1)]) and np.all(y[0, 0, 2:] == 0), "rope normal: pair (0, 1)")
    y = ref.rope(x, np.array([1]), 8, True, 10000.0)
    check(np.allclose([y[0, 0, 0], y[0, 0, 4]], [math.cos(1), math.sin(1)]), "rope neox: pair (0, 4)")


def check_options(results):
    for name, window, layers in (("gemma2", 4, 4), ("gemma3", 4, 6)):
        kv, tensors, n_ctx, evals, base = results[name]
        k2 = dict(kv)
        k2[name + ".attention.sliding_window"] = 1000
        lg = ref.run_evals(k2, tensors, n_ctx, evals)
        d_in = np.abs(lg[0][:window] - base[0][:window]).max()
        d_out = min(np.abs(lg[i] - base[i]).max() for i in range(1, len(evals)))
        check(d_in < 1e-12 and d_out > 1e-3,
              f"{name}: window changes positions >= {window} only ({d_in:.0e} before, >= {d_out:.1e} after)")
    hp = ref.Hparams(results["gemma3"][0], results["gemma3"][1], 64)
    check([w is None for w in hp.window] == [False, False, True, False, False, True] and
          hp.rope[2][:2] == (1e6, 1 / 8) and hp.rope[0][:2] == (1e4, 1.0), "gemma3: layers 2, 5 global, rope per layer")
    s, l = results["phi3_short"], results["phi3_long"]
    hs, hl = ref.Hparams(s[0], s[1], s[2]), ref.Hparams(l[0], l[1], l[2])
    check(np.array_equal(hs.rope[0][2], s[1]["rope_factors_short.weight"]) and
          np.array_equal(hl.rope[0][2], l[1]["rope_factors_long.weight"]) and
          abs(hs.rope[0][3] - 1.2) < 1e-6, "phi3: short factors at n_ctx 32, long at 64, attn_factor 1.2")
    d = np.abs(stack(s[4]) - stack(l[4])).max()
    check(d > 1e-2, f"phi3: short and long logits differ by {d:.2e}")
    for name in ("qwen3moe", "qwen2moe"):
        # The top-k choice must not hinge on rounding: margin between the k-th and next prob.
        kv, tensors, n_ctx, evals, _ = results[name]
        r, gaps = ref.Reference(kv, tensors, n_ctx), []
        moe = r._moe

        def spy(il, h, router, moe=moe, gaps=gaps, k=r.hp.n_expert_used):
            pr = np.exp(h @ router.T)
            pr = -np.sort(-pr / pr.sum(axis=1, keepdims=True), axis=1)
            gaps.extend(pr[:, k - 1] - pr[:, k])
            return moe(il, h, router)
        r._moe = spy
        for n_past, toks in evals:
            r.eval(n_past, toks)
        check(min(gaps) > 1e-4, f"{name}: top-k router margin {min(gaps):.1e} (choice robust to f32)")
    hq = ref.Hparams(results["qwen2moe"][0], results["qwen2moe"][1], 64)
    h3 = ref.Hparams(results["qwen3moe"][0], results["qwen3moe"][1], 64)
    check(not hq.expert_weights_norm and h3.expert_weights_norm, "expert_weights_norm: qwen2moe false, qwen3moe true")
    # Every merged piece is two pieces of the vocabulary (reachable by SentencePiece merges).
    pieces = {p for p, _, _ in mf.vocabulary("llama")}
    ok = all(any(m[:i] in pieces and m[i:] in pieces for i in range(1, len(m))) for m in mf._MERGED)
    check(ok and len(pieces) == len(mf.vocabulary("llama")), "vocabulary: merged pieces reachable, no duplicates")


def check_gptoss(results):
    """gpt-oss's parts each change the logits: the sinks (a sink of -1e30 is
    no sink), the expert biases, and the clamp of the SwiGLU."""
    kv, tensors, n_ctx, evals, base = results["gptoss"]

    def differs(t):
        d = np.abs(stack(ref.run_evals(kv, t, n_ctx, evals)) - stack(base)).max()
        return d / np.abs(stack(base)).max()

    no_sinks = {n: (np.full_like(a, -1e30) if n.endswith("attn_sinks.weight") else a) for n, a in tensors.items()}
    check(differs(no_sinks) > 1e-3, f"gptoss: sinks matter ({differs(no_sinks):.2g})")
    no_bias = {n: (np.zeros_like(a) if n.endswith("_exps.bias") else a) for n, a in tensors.items()}
    check(differs(no_bias) > 1e-3, f"gptoss: expert biases matter ({differs(no_bias):.2g})")
    limit = ref.GPTOSS_LIMIT
    try:
        ref.GPTOSS_LIMIT = 1e9
        check(differs(tensors) > 1e-3, "gptoss: the SwiGLU's clamp bites")
    finally:
        ref.GPTOSS_LIMIT = limit


def check_cache_rounding():
    """No value any case stores in the f16 cache is within 3e-7 (relative)
    of an f16 rounding boundary (the seeds in make_family.py are chosen so):
    weft's f32 results, a few ulp from float64, round to the same f16."""
    margin = 3e-7
    original = ref.f16_round
    for name in list(mf.CASES) + list(mf.DEEPSEEK):
        near = [0, 0]

        def counting(a):
            a = np.asarray(a, dtype=np.float64)
            r = original(a)
            near[0] += int(np.sum((original(a * (1 + margin)) != r) | (original(a * (1 - margin)) != r)))
            near[1] += a.size
            return r

        ref.f16_round = counting
        try:
            w, n_ctx, evals = mf.build(name)
            mf.run_evals(w.kv(), w.tensors(), n_ctx, evals)
        finally:
            ref.f16_round = original
        check(near[0] == 0, f"{name}: {near[0]} of {near[1]} cached values within {margin:g} of an f16 boundary")


def check_deepseek(results):
    """deepseek2: the converter's cut of attn_kv_b into attn_k_b / attn_v_b (the
    V3-like file) gives the reference the same model as attn_kv_b itself; the
    expert choice (after the bias and the group limit) and the group choice do
    not hinge on rounding; the group limit changes the logits."""
    kv, tensors, n_ctx, evals, base = results["deepseek2"]
    H, nope, v, rank = 4, 16, 16, 32
    joined = dict(tensors)
    for il in range(kv["deepseek2.block_count"]):
        b = f"blk.{il}."
        k_b, v_b = joined.pop(b + "attn_k_b.weight"), joined.pop(b + "attn_v_b.weight")
        per = np.concatenate([np.transpose(k_b, (0, 2, 1)), v_b], axis=1)  # (H, nope + v, rank)
        joined[b + "attn_kv_b.weight"] = per.reshape(H * (nope + v), rank)
    d = np.abs(stack(ref.run_evals(kv, joined, n_ctx, evals)) - stack(base)).max()
    check(d < 1e-12, f"deepseek2: attn_k_b/attn_v_b and the attn_kv_b they came from agree ({d:.1e})")
    for name in ("deepseek2", "deepseek2_lite"):
        kv, tensors, n_ctx, evals, base = results[name]
        r, gaps = ref.Reference(kv, tensors, n_ctx), []
        hp = r.hp

        def spy(il, h, router, moe=r._deepseek_moe, gaps=gaps, hp=hp, r=r):
            logits = h @ router.T
            sel = 1 / (1 + np.exp(-logits)) if hp.gating == "sigmoid" else np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
            bias = r._w(il, "exp_probs_b.bias")
            sel = sel + bias if bias is not None else sel
            for t in range(sel.shape[0]):
                st = sel[t].copy()
                if hp.groups > 1:
                    g = np.sort(st.reshape(hp.groups, -1), axis=1)[:, ::-1]
                    gs = -np.sort(-g[:, :2].sum(axis=1))
                    gaps.append(gs[hp.group_used - 1] - gs[hp.group_used])
                    keep = np.argsort(-g[:, :2].sum(axis=1), kind="stable")[:hp.group_used]
                    st = np.where(np.isin(np.arange(hp.groups), keep)[:, None], st.reshape(hp.groups, -1), -np.inf).reshape(-1)
                o = -np.sort(-st)
                gaps.append(o[hp.n_expert_used - 1] - o[hp.n_expert_used])
            return moe(il, h, router)
        r._deepseek_moe = spy
        for n_past, toks in evals:
            r.eval(n_past, toks)
        check(min(gaps) > 1e-4, f"{name}: expert and group choice margin {min(gaps):.1e} (robust to f32)")
    kv, tensors, n_ctx, evals, base = results["deepseek2"]
    kv2 = dict(kv)
    del kv2["deepseek2.expert_group_count"]
    d = np.abs(stack(ref.run_evals(kv2, tensors, n_ctx, evals)) - stack(base)).max()
    check(d > 1e-3, f"deepseek2: without the group limit the logits move by {d:.1e}")


def main():
    check_writer()
    check_cache_rounding()
    with tempfile.TemporaryDirectory() as tmp:
        results = check_cases(tmp)
    check_llama3(results)
    check_softcap(results)
    check_rope()
    check_options(results)
    check_deepseek(results)
    check_gptoss(results)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
