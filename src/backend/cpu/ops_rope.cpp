// rope and rope_ext: rotary position embedding. a f32 [head_dim, n_head,
// n_tokens, 1] (any strides), pos i32 [n_tokens], for rope_ext optional f32
// frequency factors [n_dims / 2] (any values: they are data) and scaling in
// the op params. rope is rope_ext with no factors, freq_scale 1 and
// attn_factor 1, which leave every value as rope computes it (multiplying by
// 1.0 is exact). Frequencies, angles, their cos/sin and the rotation are
// computed in double; each thread computes the frequencies once per node and
// caches cos/sin for the last position.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels.h"
#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}
inline void store_f32(uint8_t* p, float f) {
  std::memcpy(p, &f, sizeof f);
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
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const int half = rp.n_dims / 2;
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  RowScratch scratch(kc, dst);
  double* freq = scratch.take<double>(ne0);
  double* cos_t = scratch.take<double>(ne0);
  double* sin_t = scratch.take<double>(ne0);
  fill_freqs(rp, freq);
  bool have_angles = false;
  int32_t cached_p = 0;

  // Pair i of a row: elements (i0, i0 + step).
  const int64_t step = rp.neox ? half : 1;
  const double attn = rp.attn_factor;
  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    int32_t p;
    std::memcpy(&p, static_cast<const uint8_t*>(pos.data) + i2 * pos.nb[0], sizeof p);
    if (!have_angles || p != cached_p) {
      for (int i = 0; i < half; ++i) {
        const double theta = p * freq[i];
        cos_t[i] = std::cos(theta);
        sin_t[i] = std::sin(theta);
      }
      have_angles = true;
      cached_p = p;
    }
    const uint8_t* src = row_ptr(a, i1, i2, i3);
    uint8_t* out = row_ptr(dst, i1, i2, i3);
    for (int i = 0; i < half; ++i) {
      const int64_t i0 = rp.neox ? i : 2 * i;
      const double x0 = load_f32(src + i0 * a.nb[0]);
      const double x1 = load_f32(src + (i0 + step) * a.nb[0]);
      store_f32(out + i0 * dst.nb[0], static_cast<float>((x0 * cos_t[i] - x1 * sin_t[i]) * attn));
      store_f32(out + (i0 + step) * dst.nb[0], static_cast<float>((x0 * sin_t[i] + x1 * cos_t[i]) * attn));
    }
    for (int64_t i0 = rp.n_dims; i0 < ne0; ++i0) {
      store_f32(out + i0 * dst.nb[0], load_f32(src + i0 * a.nb[0]));
    }
  }
}

// f32 values and result, i32 positions; rope_ext's factors, when given, f32.
bool rope_supports(const Tensor& n) {
  const bool factors_ok = n.op != Op::rope_ext || n.src[2] == nullptr || is_f32(n.src[2]);
  return n.type == DType::f32 && is_f32(n.src[0]) && is_i32(n.src[1]) && factors_ok;
}

// Frequencies, cos and sin per pair, in double (a row's length each:
// n_dims <= ne0).
size_t rope_scratch_bytes(const Tensor& n, int) {
  return 3 * scratch_piece_bytes(n.src[0]->ne[0], sizeof(double));
}

}  // namespace

const OpFamily kRopeFamily{"rope", rope_supports, rope_scratch_bytes, rope_op};

}  // namespace weft::cpu
