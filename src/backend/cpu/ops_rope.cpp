// rope and rope_ext: rotary position embedding. a f32 [head_dim, n_head,
// n_tokens, 1] (any strides), pos i32 [n_tokens], for rope_ext optional f32
// frequency factors [n_dims / 2] (any values: they are data) and scaling in
// the op params. rope is rope_ext with no factors, freq_scale 1 and
// attn_factor 1, which leave every value as rope computes it (multiplying by
// 1.0 is exact). Frequencies, angles and their cos/sin are computed in
// double, once per node (frequencies) and once per position (cos/sin, cached
// while consecutive rows share it: the heads of a token), then rounded to f32
// times attn_factor; the rotation is the vector kernels' (vec.h), f32 with
// fma.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

// The node's parameters, whichever of the two ops it is.
struct RopeParams {
  int n_dims = 0;
  bool neox = false;
  double base = 0.0;
  double freq_scale = 1.0;
  double attn_factor = 1.0;
  const Tensor* factors = nullptr;  // rope_ext's src[2], or none
};

RopeParams params_of(const Tensor& dst) {
  RopeParams p;
  p.n_dims = dst.param_i32(0);
  const int32_t mode = dst.param_i32(1);
  if (mode != static_cast<int32_t>(RopeMode::normal) && mode != static_cast<int32_t>(RopeMode::neox)) {
    fail(ErrorKind::invalid_input, op_name(dst.op), "unknown mode " + std::to_string(mode));
  }
  p.neox = mode == static_cast<int32_t>(RopeMode::neox);
  p.base = dst.param_f32(2);
  if (dst.op == Op::rope_ext) {
    p.freq_scale = dst.param_f32(3);
    p.attn_factor = dst.param_f32(4);
    p.factors = dst.src[2];
  }
  return p;
}

// freq[i] = freq_scale * base^(-2i/n_dims) / ff[i] for i < n_dims/2: the
// angle of pair i at position p is p * freq[i]. Without factors (rope) the
// product is exactly base^(-2i/n_dims).
void fill_freqs(const RopeParams& rp, double* freq) {
  for (int i = 0; i < rp.n_dims / 2; ++i) {
    double f = rp.freq_scale * std::pow(rp.base, -2.0 * i / rp.n_dims);
    if (rp.factors != nullptr) {
      f /= load_f32(static_cast<const uint8_t*>(rp.factors->data) + i * rp.factors->nb[0]);
    }
    freq[i] = f;
  }
}

void rope_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const RopeParams rp = params_of(dst);
  const int64_t ne0 = a.ne[0];
  const int half = rp.n_dims / 2;
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  const VecKernels& k = vec_kernels();
  RowScratch scratch(kc, dst);
  double* freq = scratch.take<double>(ne0);
  float* cos_t = scratch.take<float>(ne0);
  float* sin_t = scratch.take<float>(ne0);
  float* buf_x = scratch.take<float>(ne0);
  float* buf_o = scratch.take<float>(ne0);
  fill_freqs(rp, freq);
  bool have_angles = false;
  int32_t cached_p = 0;

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    int32_t p;
    std::memcpy(&p, static_cast<const uint8_t*>(pos.data) + i2 * pos.nb[0], sizeof p);
    if (!have_angles || p != cached_p) {
      // Pair i's cos and sin times attn_factor, once per position: at [i]
      // for neox, twice at [2i] and [2i + 1] for the interleaved pairs.
      for (int i = 0; i < half; ++i) {
        const double theta = p * freq[i];
        const auto c = static_cast<float>(std::cos(theta) * rp.attn_factor);
        const auto sn = static_cast<float>(std::sin(theta) * rp.attn_factor);
        const int at = rp.neox ? i : 2 * i;
        cos_t[at] = c, sin_t[at] = sn;
        if (!rp.neox) cos_t[at + 1] = c, sin_t[at + 1] = sn;
      }
      have_angles = true;
      cached_p = p;
    }
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_x);
    float* out = out_row_f32(dst, pd, buf_o);
    if (rp.neox) {
      k.rope_halves(x, x + half, cos_t, sin_t, out, out + half, half);
    } else {
      k.rope_pairs(x, cos_t, sin_t, out, rp.n_dims);
    }
    if (out != x && ne0 > rp.n_dims) {
      std::memmove(out + rp.n_dims, x + rp.n_dims, static_cast<size_t>(ne0 - rp.n_dims) * sizeof(float));
    }
    store_row_f32(dst, pd, out, ne0);
  });
}

// f32 values and result, i32 positions; rope_ext's factors, when given, f32.
bool rope_supports(const Tensor& n) {
  const bool factors_ok = n.op != Op::rope_ext || n.src[2] == nullptr || is_f32(n.src[2]);
  return n.type == DType::f32 && is_f32(n.src[0]) && is_i32(n.src[1]) && factors_ok;
}

// The frequencies (double), the cos and sin tables, and a source and a
// result row for strided operands (f32); a row's length each (n_dims <= ne0).
size_t rope_scratch_bytes(const Tensor& n, int) {
  const int64_t ne0 = n.src[0]->ne[0];
  return scratch_piece_bytes(ne0, sizeof(double)) + 4 * scratch_piece_bytes(ne0, sizeof(float));
}

}  // namespace

const OpFamily kRopeFamily{"rope", rope_supports, rope_scratch_bytes, rope_op};

}  // namespace weft::cpu
