// Op constructors. Each checks its operands and throws Error(invalid_input)
// with a message starting "[op]" that names the offending shapes; the RPC
// server reuses these same checks when it rebuilds a received graph.
//
// Conventions (ggml's): ne[0] is the row; matrices are [cols, rows].
// Elementwise ops (add .. swiglu, gelu_erf, sigmoid, softcap) take f32, f16
// or bf16 operands in any mix and produce a's dtype; other math ops take and
// produce f32 unless stated. Op parameters are
// stored in Tensor::op_params at the indices noted (i = int32, f = float).
#pragma once

#include <cstdint>
#include <span>

#include "weft/core/context.h"

namespace weft::ops {

// Elementwise a (op) b; b broadcasts: a.ne[i] % b.ne[i] == 0 for each dim.
Tensor* add(Context& ctx, Tensor* a, Tensor* b);
Tensor* sub(Context& ctx, Tensor* a, Tensor* b);
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);
Tensor* div(Context& ctx, Tensor* a, Tensor* b);

Tensor* scale(Context& ctx, Tensor* a, float s);  // f[0] = s
Tensor* sqr(Context& ctx, Tensor* a);
Tensor* sqrt(Context& ctx, Tensor* a);
Tensor* silu(Context& ctx, Tensor* a);  // x / (1 + e^-x)
Tensor* gelu(Context& ctx, Tensor* a);  // tanh approximation
Tensor* gelu_erf(Context& ctx, Tensor* a);  // 0.5 x (1 + erf(x / sqrt 2)): the exact form
Tensor* sigmoid(Context& ctx, Tensor* a);   // 1 / (1 + e^-x)
// cap * tanh(x / cap) (Gemma 2's logit soft-capping); cap finite and > 0. f[0] = cap.
Tensor* softcap(Context& ctx, Tensor* a, float cap);
Tensor* swiglu(Context& ctx, Tensor* a, Tensor* b);  // silu(a) * b, same shapes
// gpt-oss's clamped SwiGLU ("swiglu_oai"), elementwise over a (the gate) and
// b (the up projection), same shapes, the result in a's dtype:
//   x = min(a, limit), y = clamp(b, -limit, limit), out = x * sigmoid(alpha x) * (y + 1).
// alpha finite; limit finite and > 0. f[0] = alpha, f[1] = limit.
Tensor* swiglu_oai(Context& ctx, Tensor* a, Tensor* b, float alpha, float limit);

// Along rows. eps in f[0].
Tensor* rms_norm(Context& ctx, Tensor* a, float eps);  // x / sqrt(mean(x^2) + eps)
Tensor* norm(Context& ctx, Tensor* a, float eps);      // (x - mean) / sqrt(var + eps)

// softmax(a * scale + mask) along rows. mask (optional, f32 or f16) has
// mask.ne[0] == a.ne[0], mask.ne[1] >= a.ne[1], and broadcasts over dims 2, 3
// (a.ne[i] % mask.ne[i] == 0). f[0] = scale.
// sinks (optional, src[2]; protocol 1.9): f32, packed, [a.ne[2]]: one logit
// per index of dim 2 (an attention head) that joins each row's denominator
// and takes no share itself: out_j = e^(w_j) / (sum_i e^(w_i) + e^sink),
// w = a * scale + mask (gpt-oss's attention sinks; the sink is not scaled).
Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask, float scale, Tensor* sinks = nullptr);

// Rotary embedding. a: [head_dim, n_head, n_tokens, 1]; pos: i32 [n_tokens].
// The first n_dims (even, <= head_dim) values of each head are rotated; the
// rest pass through. Angle for pair i at position p: p * base^(-2i/n_dims).
// normal mode pairs (x[2i], x[2i+1]); neox pairs (x[i], x[i + n_dims/2]).
// i[0] = n_dims, i[1] = mode, f[2] = freq_base.
Tensor* rope(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode, float freq_base);

// Frequency scaling of rope_ext: angles are multiplied by freq_scale (linear
// position interpolation), rotated values by attn_factor.
struct RopeScaling {
  float freq_scale = 1.0f;   // finite, > 0
  float attn_factor = 1.0f;  // finite, > 0
};
// rope with per-pair frequency factors and scaling (Llama 3.1, Phi-3 long
// context). a, pos, n_dims, mode as rope; freq_base finite and > 0;
// freq_factors is nullptr or f32, contiguous, exactly [n_dims / 2] (src[2]).
// For pair i at position p the angle is
//   theta_i = p * freq_scale * freq_base^(-2i/n_dims) / ff[i]   (ff[i] = 1 without factors)
// and a rotated pair (x0, x1) becomes attn_factor * (x0 cos - x1 sin,
// x0 sin + x1 cos); values past n_dims are copied unscaled. With no factors
// and the default scaling it equals rope. Factors are data: any float is
// computed through (a zero, negative or non-finite one gives what IEEE gives).
// i[0] = n_dims, i[1] = mode, f[2] = freq_base, f[3] = freq_scale, f[4] = attn_factor.
Tensor* rope_ext(Context& ctx, Tensor* a, Tensor* pos, Tensor* freq_factors, int n_dims, RopeMode mode,
                 float freq_base, RopeScaling scaling = {});

// Fused attention: for each head h and query i, with kv head
// g = h / (H / H_kv),
//   s_j = scale * q[:, i, h] . k[:, j, g]          (j < n_kv)
//   s_j = softcap * tanh(s_j / softcap)            (when softcap > 0)
//   s_j += mask[j, i]                              (when there is a mask)
//   out[:, h, i] = sum_j softmax(s)_j * v[:, j, g]
// a row whose every s_j is -inf gives zeros. q f32 [D, n_q, H]; k and v f32,
// f16 or q8_0, [D, n_kv, H_kv] and [Dv, n_kv, H_kv] (rows of a cache, not
// transposed), each element step its dtype's unit (a q8_0 D or Dv a
// multiple of 32); H a multiple of H_kv;
// mask nullptr or f32 [n_kv, >= n_q] with packed rows. Result f32
// [Dv, H, n_q], packed (heads of a token together, as a projection reads
// them). K and V are read once per query row, the scores never stored.
// f[0] = scale, f[1] = softcap (0: none); both finite, softcap >= 0.
// sinks (optional, src[4]): f32, packed, [H]: head h's softmax denominator
// gains e^sinks[h] (a logit with no value, not scaled, capped nor masked),
//   out[:, h, i] = sum_j e^(s_j) v[:, j, g] / (sum_j e^(s_j) + e^sinks[h]),
// as soft_max's sinks. A node with sinks uses the fifth source, which the
// RPC wire does not carry: it runs on local devices (the model's unfused
// path, soft_max with sinks, serves workers).
Tensor* flash_attn(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, float softcap = 0.0f,
                   Tensor* sinks = nullptr);

Tensor* sum_rows(Context& ctx, Tensor* a);  // [1, ne1, ne2, ne3]
Tensor* argmax(Context& ctx, Tensor* a);    // i32 [ne1, ne2, ne3, 1]; first max wins
// i32 indices that sort each row; i[0] = order. Ties keep the lower index first.
Tensor* argsort(Context& ctx, Tensor* a, SortOrder order);
// i32 [k, ne1, ne2, ne3]: indices of each row's k largest values, largest
// first. i[0] = k.
Tensor* top_k(Context& ctx, Tensor* a, int k);

// a: weights [K, M, A2, A3] of any dtype; b: f32 [K, N, B2, B3] with
// B2 % A2 == 0 and B3 % A3 == 0. Result f32 [M, N, B2, B3]: each output is
// the dot product of a row of a with a row of b.
Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b);
// Expert-selected product. as: [K, M, n_expert] any dtype; b: f32
// [K, n_b, n_tokens] with n_b == 1 or n_b == n_used; ids: i32 [n_used,
// n_tokens]. Result f32 [M, n_used, n_tokens]: with x = ids[e, t] - id_base,
// out[:, e, t] = as[:, :, x] * b[:, e % n_b, t] when x is in [0, n_expert),
// else zeros (nothing computed). id_base (op_params[0]) lets as hold a slice
// of a layer's experts, [id_base, id_base + n_expert), while ids name the
// layer's: each device of an expert split computes only the pairs routed to
// its own slice (docs/experts-split.md). Peers older than protocol 1.6 take
// only id_base 0.
Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids, int32_t id_base = 0);

// a: [K, R, B, 1] any dtype; idx: i32 [n, B]. Result f32 [K, n, B, 1] with
// out[:, i, j] = a[:, idx[i, j], j].
Tensor* get_rows(Context& ctx, Tensor* a, Tensor* idx);
// Writes rows of src (f32 [K, n, B]) into dst ([K, R, B], any dtype except
// i32) at rows idx (i32 [n, B]); returns a view of dst that carries the write.
Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* src, Tensor* idx);
// The rows an expert slice reads: x f32 [K, n] with packed rows; ids i32
// [n_used, n] (a routing, as mul_mat_id takes). Result f32 [K, n]: column t
// is x's when some ids[e, t] is in [first, first + count), else zeros. The
// result is flagged kFlagSparseRows: a device that sends it to the slice's
// device sends only the routed rows. i[0] = first >= 0, i[1] = count > 0.
Tensor* routed_rows(Context& ctx, Tensor* x, Tensor* ids, int32_t first, int32_t count);
// Copies a into b converting dtype, element by element in logical order;
// returns a view of b that carries the write. Same element count; for a
// quantized b the shapes must match. a may be f32, f16, bf16 (or i32 into
// i32), or quantized with packed rows into a packed f32 b of its shape
// (dequantized).
Tensor* cpy(Context& ctx, Tensor* a, Tensor* b);
// A packed copy of a (any dtype; a quantized a must have packed rows).
Tensor* cont(Context& ctx, Tensor* a);
// a and b joined along dim (same dtype, not quantized; other dims equal). i[0] = dim.
Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim);

// Views alias their source's memory. Byte strides and offsets are checked to
// stay inside the source's span.
Tensor* view(Context& ctx, Tensor* a, std::span<const int64_t> ne, std::span<const size_t> nb,
             size_t offset);
Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset);
Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
Tensor* view_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                size_t nb2, size_t offset);
// a must be contiguous; same element count.
Tensor* reshape(Context& ctx, Tensor* a, std::span<const int64_t> ne);
Tensor* reshape(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne);
// Dimension i of a becomes dimension axes[i] of the result. i[0..3] = axes.
Tensor* permute(Context& ctx, Tensor* a, int ax0, int ax1, int ax2, int ax3);
Tensor* transpose(Context& ctx, Tensor* a);  // swaps dims 0 and 1

}  // namespace weft::ops
