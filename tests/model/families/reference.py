"""A float64 numpy forward pass for decoder-only LLM families, written from the
family contract (/tmp/spec/families.md, kept in sync with the list below) and the
published architectures, independently of weft's C++ code.

    ref = Reference(kv, tensors, n_ctx)      # what a GGUF file holds (see below)
    logits = ref.eval(n_past, tokens)         # (len(tokens), n_vocab) float64

Input: kv = {key: python value} and tensors = {name: float64 numpy array}, the
values a reader of the file sees (gguf_writer.GGUFWriter.kv()/.tensors(), or a
parsed file). A numpy array has the GGUF dims reversed: a GGUF matrix [in, out]
is numpy (out, in) and y = W @ x; stacked experts [in, out, n_expert] are numpy
(n_expert, out, in).

Contract implemented (one cache, many evals):
  * The KV cache holds n_ctx rows per layer, all zero at the start. An eval of n
    tokens at n_past writes rows n_past .. n_past+n-1 (keys after k-norm and rope,
    and values, each rounded to float16) and then attends over rows
    [0, n_past + n) read back from the cache, the current tokens' included.
    Rows never written are NOT masked: they score q.0 = 0 and add value 0.
  * Query at position p sees row j iff j <= p, and on a sliding layer also p-j < W.
  * Architectures: llama, qwen2, qwen3, qwen3moe, qwen2moe, phi3, gemma2, gemma3,
    deepseek2, gpt-oss (the per-family differences are in Hparams below and
    commented where used). deepseek2 caches each token's normalized latent and
    rope key (one f16 row) and decompresses per-head keys and values from it
    (Reference._mla_attention). gpt-oss as OpenAI's published model code
    (transformers' GptOss*): q/k/v/o biases; a learned sink logit per head
    appended to each row of scores before the softmax and dropped after it;
    sliding window on even layers; the pre-FFN norm stored as
    post_attention_norm; router logits plus bias, top k of the logits, softmax
    over those k; each expert down(glu) + b_down with glu = (clamp(up + b_up,
    -7, 7) + 1) * g sigmoid(1.702 g), g = min(gate + b_gate, 7).
"""
import math

import numpy as np

NEOX_ARCHS = {"qwen2", "qwen3", "qwen3moe", "qwen2moe", "phi3", "gemma2", "gemma3", "gpt-oss"}
GPTOSS_ALPHA, GPTOSS_LIMIT = 1.702, 7.0
GEMMA_ARCHS = {"gemma2", "gemma3"}


def f16_round(a):
    """Round to the nearest float16 (ties to even), as the f16 KV cache stores."""
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis (w used as stored)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def swiglu_oai(gate, up):
    """gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7), g sigmoid(1.702 g) (u + 1)."""
    g = np.minimum(gate, GPTOSS_LIMIT)
    u = np.clip(up, -GPTOSS_LIMIT, GPTOSS_LIMIT)
    return g / (1.0 + np.exp(-GPTOSS_ALPHA * g)) * (u + 1.0)


def softcap(x, c):
    """c * tanh(x / c): values pushed into (-c, c)."""
    return c * np.tanh(x / c)


def llama3_freq_factors(n_rot, base, factor, orig_ctx, low=1.0, high=4.0):
    """Llama 3.x rope scaling (contract "llama"): for i < n_rot/2,
    freq = base^(-2i/n_rot), wavelen = 2 pi / freq, low_wl = L/low, high_wl = L/high;
    ff = 1 if wavelen < high_wl; F if wavelen > low_wl;
    else smooth = (L/wavelen - low)/(high - low), ff = 1/((1 - smooth)/F + smooth)."""
    ff = np.empty(n_rot // 2)
    low_wl, high_wl = orig_ctx / low, orig_ctx / high
    for i in range(n_rot // 2):
        wavelen = 2.0 * math.pi / base ** (-2.0 * i / n_rot)
        if wavelen < high_wl:
            ff[i] = 1.0
        elif wavelen > low_wl:
            ff[i] = factor
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            ff[i] = 1.0 / ((1.0 - smooth) / factor + smooth)
    return ff


def yarn_freq_factors(n_rot, base, factor, orig_ctx, beta_fast=32.0, beta_slow=1.0):
    """YaRN as transformers' _compute_yarn_parameters writes it: the
    correction range [low, high] = [floor(d(beta_fast)), ceil(d(beta_slow))]
    clamped to [0, n_rot - 1], d(r) = n_rot ln(L / (2 pi r)) / (2 ln base);
    extrapolation weight e_i = 1 - clamp((i - low) / (high - low), 0, 1);
    inv_freq_i = interp_i (1 - e_i) + extrap_i e_i with extrap_i =
    base^(-2i/n_rot), interp_i = extrap_i / factor. Returned as the
    divisors ff_i = extrap_i / inv_freq_i that rope() applies; the magnitude
    (0.1 ln(factor) + 1) is the caller's attn_factor."""
    def corr_dim(rotations):
        return n_rot * math.log(orig_ctx / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), n_rot - 1)
    if low == high:
        high += 0.001
    i = np.arange(n_rot // 2, dtype=np.float64)
    extrap = base ** (-2.0 * i / n_rot)
    interp = extrap / factor
    e = 1.0 - np.clip((i - low) / (high - low), 0.0, 1.0)
    return extrap / (interp * (1.0 - e) + extrap * e)


def rope(x, pos, n_rot, neox, base, freq_scale=1.0, ff=None, attn_factor=1.0):
    """Rotary embedding of x (n, heads, head_dim) at positions pos (n,).
    theta_i = p * freq_scale * base^(-2i/n_rot) / ff[i] for i < n_rot/2;
    normal mode rotates pairs (x[2i], x[2i+1]), neox mode (x[i], x[i + n_rot/2]);
    (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos) * attn_factor; dims >= n_rot kept."""
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half) / n_rot)
    if ff is not None:
        inv = inv / np.asarray(ff, dtype=np.float64)
    theta = np.asarray(pos, dtype=np.float64)[:, None] * freq_scale * inv[None, :]  # (n, half)
    cos = (np.cos(theta) * attn_factor)[:, None, :]
    sin = (np.sin(theta) * attn_factor)[:, None, :]
    out = x.copy()
    if neox:
        x0, x1 = x[..., :half], x[..., half:n_rot]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:n_rot] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * cos - x1 * sin
        out[..., 1:n_rot:2] = x0 * sin + x1 * cos
    return out


class Hparams:
    """The model's hyperparameters, read from kv per the contract (defaults there)."""

    def __init__(self, kv, tensors, n_ctx):
        arch = kv["general.architecture"]
        p = arch + "."
        self.arch = arch
        self.n_vocab = tensors["token_embd.weight"].shape[0]
        self.n_embd = kv[p + "embedding_length"]
        self.n_layer = kv[p + "block_count"]
        self.n_ff = kv.get(p + "feed_forward_length", 0)
        self.n_head = kv[p + "attention.head_count"]
        self.n_head_kv = kv.get(p + "attention.head_count_kv", self.n_head)
        self.eps = kv[p + "attention.layer_norm_rms_epsilon"]
        self.head_dim = kv.get(p + "attention.key_length", self.n_embd // self.n_head)
        self.deepseek = arch == "deepseek2"
        if self.deepseek:
            self._deepseek2(kv, p)
        elif kv.get(p + "attention.value_length", self.head_dim) != self.head_dim:
            raise ValueError("key_length != value_length")
        self.n_rot = kv.get(p + "rope.dimension_count", self.head_dim)
        self.neox = arch in NEOX_ARCHS
        self.gemma = arch in GEMMA_ARCHS
        self.gptoss = arch == "gpt-oss"
        self.n_expert = kv.get(p + "expert_count", 0)
        self.n_expert_used = kv.get(p + "expert_used_count", 0)
        # Router weights renormalised to sum 1: default false for qwen2moe, true otherwise.
        # Router weights renormalised: default false for qwen2moe and deepseek2.
        self.expert_weights_norm = kv.get(p + "expert_weights_norm", arch not in ("qwen2moe", "deepseek2"))

        # Attention scaling. Gemma: q *= attention.scale (else 1/sqrt(head_dim), or
        # 1/sqrt(n_embd/n_head) for the 27B files) and kq_scale = 1; others 1/sqrt(head_dim).
        if self.gemma:
            big = (arch == "gemma2" and self.n_layer == 46) or (arch == "gemma3" and self.n_layer == 62)
            default = 1.0 / math.sqrt(self.n_embd // self.n_head if big else self.head_dim)
            self.q_scale = kv.get(p + "attention.scale", default)
            self.kq_scale = 1.0
        else:
            self.q_scale = 1.0
            self.kq_scale = 1.0 / math.sqrt(self.k_dim if self.deepseek else self.head_dim)
        self.attn_softcap = kv.get(p + "attn_logit_softcapping") if arch == "gemma2" else None
        self.final_softcap = kv.get(p + "final_logit_softcapping") if arch == "gemma2" else None
        # Gemma: x0 = embedding * sqrt(n_embd), that factor taken as a float32.
        self.embd_scale = float(np.float32(math.sqrt(self.n_embd))) if self.gemma else 1.0

        # Sliding windows per layer (None: global).
        # The pattern: a period (layer il slides when il % period < period - 1)
        # or one bool per layer; absent: Gemma 2 alternates, Gemma 3 has one
        # global layer in six, every other family slides on every layer.
        window = kv.get(p + "attention.sliding_window")
        pattern = kv.get(p + "attention.sliding_window_pattern",
                         {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}.get(arch, 1))
        if window is None:
            self.window = [None] * self.n_layer
        elif isinstance(pattern, list):
            self.window = [window if slides else None for slides in pattern]
        else:
            self.window = [window if il % pattern < pattern - 1 or pattern == 1 else None
                           for il in range(self.n_layer)]

        # Rope per layer: (base, freq_scale, ff or None, attn_factor).
        base = kv.get(p + "rope.freq_base", 10000.0)
        freq_scale, ff, attn_factor = 1.0, None, 1.0
        scaling = kv.get(p + "rope.scaling.type")
        if scaling == "linear":
            freq_scale = 1.0 / kv[p + "rope.scaling.factor"]
        elif scaling == "llama3":
            ff = llama3_freq_factors(self.n_rot, base, kv[p + "rope.scaling.factor"],
                                     kv[p + "rope.scaling.original_context_length"],
                                     kv.get(p + "rope.scaling.low_freq_factor", 1.0),
                                     kv.get(p + "rope.scaling.high_freq_factor", 4.0))
        elif scaling == "yarn":
            factor = kv[p + "rope.scaling.factor"]
            ff = yarn_freq_factors(self.n_rot, base, factor, kv[p + "rope.scaling.original_context_length"],
                                   kv.get(p + "rope.scaling.yarn_beta_fast", 32.0),
                                   kv.get(p + "rope.scaling.yarn_beta_slow", 1.0))
            attn_factor = (0.1 * math.log(factor) + 1.0) * kv.get(p + "rope.scaling.yarn_attn_factor", 1.0)
        if arch == "llama" and "rope_freqs.weight" in tensors:
            ff = tensors["rope_freqs.weight"]  # the tensor wins over the keys
        if arch == "phi3":
            # LongRoPE: long factors when the runtime context exceeds the original one.
            orig = kv.get(p + "rope.scaling.original_context_length", 0)
            name = "rope_factors_long.weight" if n_ctx > orig else "rope_factors_short.weight"
            ff = tensors.get(name)
            attn_factor = kv.get(p + "rope.scaling.attn_factor", 1.0)
        if self.deepseek and scaling == "yarn":
            # DeepSeek's YaRN (its published modeling code): the rotated values keep
            # magnitude 1 (mscale / mscale_all_dim = 1) and the softmax scale is
            # multiplied by mscale^2, mscale = 1 + 0.1 mscale_all_dim ln(factor), the
            # file's yarn_log_multiplier being 0.1 mscale_all_dim.
            mscale = 1.0 + kv.get(p + "rope.scaling.yarn_log_multiplier", 0.0) * math.log(kv[p + "rope.scaling.factor"])
            self.kq_scale *= mscale * mscale
            attn_factor = 1.0
        self.rope = [(base, freq_scale, ff, attn_factor)] * self.n_layer
        if arch == "gemma3":
            # Sliding layers: base freq_base_swa (default 10000), no scaling; global layers as above.
            base_swa = kv.get(p + "rope.freq_base_swa", 10000.0)
            self.rope = [(base_swa, 1.0, None, 1.0) if self.window[il] is not None
                         else (base, freq_scale, None, 1.0) for il in range(self.n_layer)]


    def _deepseek2(self, kv, p):
        """DeepSeek-V2/V3 (deepseek2): multi-head latent attention and its router.
        Head shapes: key_length_mla / value_length_mla when present (newer converters;
        key_length / value_length then describe the cached row), else key_length /
        value_length. Normal (interleaved) rope on the last n_rot dims of each head's key."""
        self.kv_lora = kv[p + "attention.kv_lora_rank"]
        self.q_lora = kv.get(p + "attention.q_lora_rank", 0)
        if p + "attention.key_length_mla" in kv:
            self.k_dim, self.v_dim = kv[p + "attention.key_length_mla"], kv[p + "attention.value_length_mla"]
        else:
            self.k_dim, self.v_dim = kv[p + "attention.key_length"], kv[p + "attention.value_length"]
        self.n_rot = kv[p + "rope.dimension_count"]
        self.dense_lead = kv.get(p + "leading_dense_block_count", 0)
        self.gating = {0: "softmax", 1: "softmax", 2: "sigmoid"}[kv.get(p + "expert_gating_func", 0)]
        self.weights_scale = kv.get(p + "expert_weights_scale", 1.0)
        self.groups = kv.get(p + "expert_group_count", 0)
        self.group_used = kv.get(p + "expert_group_used_count", 0)


class Reference:
    def __init__(self, kv, tensors, n_ctx):
        self.t = tensors
        self.hp = Hparams(kv, tensors, n_ctx)
        self.n_ctx = n_ctx
        hp = self.hp
        # deepseek2 caches the latent and the rope key of each token (f16), and
        # decompresses them per head below (the plain form of MLA).
        shape = (n_ctx, 1, hp.kv_lora + hp.n_rot) if hp.deepseek else (n_ctx, hp.n_head_kv, hp.head_dim)
        self.k_cache = [np.zeros(shape) for _ in range(hp.n_layer)]
        self.v_cache = [np.zeros(shape) for _ in range(hp.n_layer)]

    def _w(self, il, name):
        return self.t.get(f"blk.{il}.{name}")

    # ---- multi-head latent attention (deepseek2), decompressed ----
    def _mla_attention(self, il, h, pos):
        """q = W_qb rms_norm(W_qa h) (or W_q h), per head [q_nope, q_pe]; [c, k_pe] =
        W_kv_a h with c normalized (kv_a_norm); per head K = [W_k,h c, k_pe],
        V = W_v,h c, with W_k,h / W_v,h the rows of attn_kv_b (each head's nope key
        rows, then its value rows) or attn_k_b transposed / attn_v_b; softmax(q.K
        scale) V per head; concatenated heads through attn_output."""
        hp, n = self.hp, h.shape[0]
        H, rank, rot, nope = hp.n_head, hp.kv_lora, hp.n_rot, hp.k_dim - hp.n_rot
        if hp.q_lora:
            q = rms_norm(h @ self._w(il, "attn_q_a.weight").T, self._w(il, "attn_q_a_norm.weight"), hp.eps)
            q = q @ self._w(il, "attn_q_b.weight").T
        else:
            q = h @ self._w(il, "attn_q.weight").T
        q = q.reshape(n, H, hp.k_dim)
        kv = h @ self._w(il, "attn_kv_a_mqa.weight").T  # (n, rank + rot)
        c = rms_norm(kv[:, :rank], self._w(il, "attn_kv_a_norm.weight"), hp.eps)
        base, freq_scale, ff, attn_factor = hp.rope[il]
        q_pe = rope(q[:, :, nope:], pos, rot, False, base, freq_scale, ff, attn_factor)
        k_pe = rope(kv[:, None, rank:], pos, rot, False, base, freq_scale, ff, attn_factor)
        self.k_cache[il][pos] = f16_round(np.concatenate([c[:, None, :], k_pe], axis=-1))
        n_kv = int(pos[-1]) + 1
        cached = self.k_cache[il][:n_kv, 0]  # (n_kv, rank + rot)
        c_all, pe_all = cached[:, :rank], cached[:, rank:]
        kv_b = self._w(il, "attn_kv_b.weight")
        if kv_b is not None:
            per = kv_b.reshape(H, nope + hp.v_dim, rank)
            wk, wv = per[:, :nope, :], per[:, nope:, :]  # (H, nope, rank), (H, v, rank)
        else:
            wk = np.transpose(self._w(il, "attn_k_b.weight"), (0, 2, 1))  # (H, rank, nope) -> (H, nope, rank)
            wv = self._w(il, "attn_v_b.weight")  # (H, v, rank)
        k_nope = np.einsum("hdc,jc->jhd", wk, c_all)  # (n_kv, H, nope)
        v = np.einsum("hvc,jc->jhv", wv, c_all)       # (n_kv, H, v)
        s = (np.einsum("ihd,jhd->hij", q[:, :, :nope], k_nope) +
             np.einsum("ihd,jd->hij", q_pe, pe_all)) * hp.kq_scale
        j = np.arange(n_kv)[None, :]
        s = np.where((j <= pos[:, None])[None, :, :], s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=-1, keepdims=True)
        out = np.einsum("hij,jhv->ihv", pr, v).reshape(n, H * hp.v_dim)
        return out @ self._w(il, "attn_output.weight").T

    # ---- attention (all families) ----
    def _attention(self, il, h, pos):
        hp, n = self.hp, h.shape[0]
        if hp.deepseek:
            return self._mla_attention(il, h, pos)
        q_dim, kv_dim = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
        wqkv = self._w(il, "attn_qkv.weight")
        if wqkv is not None:
            # phi3 fused: output rows [0, q_dim) q, then kv_dim of k, then kv_dim of v.
            qkv = h @ wqkv.T
            q, k, v = qkv[:, :q_dim], qkv[:, q_dim:q_dim + kv_dim], qkv[:, q_dim + kv_dim:]
        else:
            q, k, v = h @ self._w(il, "attn_q.weight").T, h @ self._w(il, "attn_k.weight").T, h @ self._w(il, "attn_v.weight").T
        for name, val in (("q", q), ("k", k), ("v", v)):
            b = self._w(il, f"attn_{name}.bias")  # qwen2 / qwen2moe biases
            if b is not None:
                val += b
        q = q.reshape(n, hp.n_head, hp.head_dim)
        k = k.reshape(n, hp.n_head_kv, hp.head_dim)
        v = v.reshape(n, hp.n_head_kv, hp.head_dim)
        # qwen3 / qwen3moe / gemma3: rms_norm over each head's head_dim values, before rope.
        qn, kn = self._w(il, "attn_q_norm.weight"), self._w(il, "attn_k_norm.weight")
        if qn is not None:
            q = rms_norm(q, qn, hp.eps)
        if kn is not None:
            k = rms_norm(k, kn, hp.eps)
        base, freq_scale, ff, attn_factor = hp.rope[il]
        q = rope(q, pos, hp.n_rot, hp.neox, base, freq_scale, ff, attn_factor)
        k = rope(k, pos, hp.n_rot, hp.neox, base, freq_scale, ff, attn_factor)
        q = q * hp.q_scale

        # f16 cache: write, then read back every row up to the last position.
        self.k_cache[il][pos] = f16_round(k)
        self.v_cache[il][pos] = f16_round(v)
        n_kv = int(pos[-1]) + 1
        group = hp.n_head // hp.n_head_kv  # query head h reads kv head h // group
        kc = np.repeat(self.k_cache[il][:n_kv], group, axis=1)  # (n_kv, n_head, head_dim)
        vc = np.repeat(self.v_cache[il][:n_kv], group, axis=1)
        s = np.einsum("ihd,jhd->hij", q, kc) * hp.kq_scale  # (n_head, n, n_kv)
        if hp.attn_softcap is not None:
            s = softcap(s, hp.attn_softcap)  # gemma2: before mask and softmax
        j = np.arange(n_kv)[None, :]
        visible = j <= pos[:, None]
        if hp.window[il] is not None:
            visible &= (pos[:, None] - j) < hp.window[il]
        s = np.where(visible[None, :, :], s, -np.inf)
        sinks = self._w(il, "attn_sinks.weight")  # gpt-oss: (n_head,)
        if sinks is not None:  # one more column per row, softmaxed with the rest, then dropped
            s = np.concatenate([s, np.broadcast_to(sinks[:, None, None], (hp.n_head, n, 1))], axis=-1)
        s = s - s.max(axis=-1, keepdims=True)
        pr = np.exp(s)
        pr /= pr.sum(axis=-1, keepdims=True)
        pr = pr[..., :n_kv]
        out = np.einsum("hij,jhd->ihd", pr, vc).reshape(n, q_dim)
        out = out @ self._w(il, "attn_output.weight").T
        bo = self._w(il, "attn_output.bias")
        return out if bo is None else out + bo

    # ---- feed-forward ----
    def _ffn(self, il, h):
        hp = self.hp
        act = gelu_tanh if hp.gemma else silu
        router = self._w(il, "ffn_gate_inp.weight")
        if router is not None and hp.gptoss:
            return self._moe_gptoss(il, h, router)
        if router is not None:
            return self._deepseek_moe(il, h, router) if hp.deepseek else self._moe(il, h, router)
        up = h @ self._w(il, "ffn_up.weight").T
        gate_w = self._w(il, "ffn_gate.weight")
        if gate_w is None:
            # phi3 fused ffn_up: rows [0, n_ff) gate, [n_ff, 2 n_ff) up.
            nf = up.shape[1] // 2
            gate, up = up[:, :nf], up[:, nf:]
        else:
            gate = h @ gate_w.T
        return (act(gate) * up) @ self._w(il, "ffn_down.weight").T

    def _deepseek_moe(self, il, h, router):
        """DeepSeek routing: scores sigmoid(router h) or softmax; selection scores =
        scores + exp_probs_b (when present); with groups, only the group_used groups
        whose two best selection scores sum highest stay eligible; top k of the
        eligible selection scores (ties: lower index); weights = the unbiased scores,
        / their sum if expert_weights_norm, * expert_weights_scale; plus the ungated
        shared expert."""
        hp = self.hp
        gate_e, up_e, down_e = (self._w(il, f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
        logits = h @ router.T
        if hp.gating == "sigmoid":
            probs = 1.0 / (1.0 + np.exp(-logits))
        else:
            probs = np.exp(logits - logits.max(axis=1, keepdims=True))
            probs /= probs.sum(axis=1, keepdims=True)
        bias = self._w(il, "exp_probs_b.bias")
        sel = probs + bias if bias is not None else probs.copy()
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            st = sel[t].copy()
            if hp.groups > 1 and 0 < hp.group_used < hp.groups:
                g = st.reshape(hp.groups, -1)
                gscore = np.sort(g, axis=1)[:, ::-1][:, :2].sum(axis=1)
                keep = np.argsort(-gscore, kind="stable")[:hp.group_used]
                mask = np.full(hp.groups, True)
                mask[keep] = False
                g = g.copy()
                g[mask] = -np.inf
                st = g.reshape(-1)
            top = np.argsort(-st, kind="stable")[:hp.n_expert_used]
            w = probs[t, top]
            if hp.expert_weights_norm:
                w = w / w.sum()
            w = w * hp.weights_scale
            for e, we in zip(top, w):
                y = silu(gate_e[e] @ h[t]) * (up_e[e] @ h[t])
                out[t] += we * (down_e[e] @ y)
        y = silu(h @ self._w(il, "ffn_gate_shexp.weight").T) * (h @ self._w(il, "ffn_up_shexp.weight").T)
        return out + y @ self._w(il, "ffn_down_shexp.weight").T

    def _moe(self, il, h, router):
        """probs = softmax(router h); top k (ties: lower index); weights = those probs,
        / their sum if expert_weights_norm; out = sum_k w_k down_k(silu(gate_k h) * up_k h);
        qwen2moe adds sigmoid(gate_inp_shexp . h) * down_sh(silu(gate_sh h) * up_sh h)."""
        hp = self.hp
        gate_e, up_e, down_e = (self._w(il, f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
        logits = h @ router.T  # (n, n_expert)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-probs[t], kind="stable")[:hp.n_expert_used]
            w = probs[t, top]
            if hp.expert_weights_norm:
                w = w / w.sum()
            for e, we in zip(top, w):
                y = silu(gate_e[e] @ h[t]) * (up_e[e] @ h[t])
                out[t] += we * (down_e[e] @ y)
        sh_gate = self._w(il, "ffn_gate_inp_shexp.weight")
        if sh_gate is not None:
            y = silu(h @ self._w(il, "ffn_gate_shexp.weight").T) * (h @ self._w(il, "ffn_up_shexp.weight").T)
            y = y @ self._w(il, "ffn_down_shexp.weight").T
            g = 1.0 / (1.0 + np.exp(-(h @ sh_gate)))  # (n,)
            out += g[:, None] * y
        return out

    def _moe_gptoss(self, il, h, router):
        """logits = router h + b; top k logits (ties: lower index); w = softmax of those k;
        out = sum_k w_k (down_k swiglu_oai(gate_k h + bg_k, up_k h + bu_k) + bd_k)."""
        hp = self.hp
        gate_e, up_e, down_e = (self._w(il, f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
        gate_b, up_b, down_b = (self._w(il, f"ffn_{n}_exps.bias") for n in ("gate", "up", "down"))
        logits = h @ router.T + self._w(il, "ffn_gate_inp.bias")
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-logits[t], kind="stable")[:hp.n_expert_used]
            w = np.exp(logits[t, top] - logits[t, top].max())
            w /= w.sum()
            for e, we in zip(top, w):
                y = swiglu_oai(gate_e[e] @ h[t] + gate_b[e], up_e[e] @ h[t] + up_b[e])
                out[t] += we * (down_e[e] @ y + down_b[e])
        return out

    # ---- whole model ----
    def eval(self, n_past, tokens):
        """Logits (len(tokens), n_vocab) of tokens at positions n_past..; updates the cache."""
        hp = self.hp
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        if n == 0 or n_past < 0 or n_past + n > self.n_ctx:
            raise ValueError(f"eval of {n} tokens at {n_past} does not fit n_ctx {self.n_ctx}")
        pos = n_past + np.arange(n)
        x = self.t["token_embd.weight"][tokens] * hp.embd_scale
        for il in range(hp.n_layer):
            a = self._attention(il, rms_norm(x, self._w(il, "attn_norm.weight"), hp.eps), pos)
            if hp.gemma:  # gemma: x = x + rms_norm(Wo a, post_attention_norm)
                a = rms_norm(a, self._w(il, "post_attention_norm.weight"), hp.eps)
            x = x + a
            # gpt-oss stores its pre-FFN norm as post_attention_norm.
            ffn_norm = self._w(il, "post_attention_norm.weight" if hp.gptoss else "ffn_norm.weight")
            f = self._ffn(il, rms_norm(x, ffn_norm, hp.eps))
            if hp.gemma:  # gemma: x = x + rms_norm(ffn, post_ffw_norm)
                f = rms_norm(f, self._w(il, "post_ffw_norm.weight"), hp.eps)
            x = x + f
        x = rms_norm(x, self.t["output_norm.weight"], hp.eps)
        out_w = self.t.get("output.weight", self.t["token_embd.weight"])  # tied when absent
        logits = x @ out_w.T
        if hp.final_softcap is not None:
            logits = softcap(logits, hp.final_softcap)
        return logits


def run_evals(kv, tensors, n_ctx, evals):
    """[(n_past, tokens), ...] on one cache -> [logits (n, n_vocab), ...]."""
    ref = Reference(kv, tensors, n_ctx)
    return [ref.eval(n_past, toks) for n_past, toks in evals]
