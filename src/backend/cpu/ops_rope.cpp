// rope: rotary position embedding. a f32 [head_dim, n_head, n_tokens, ne3]
// (any strides), pos i32 [n_tokens]. Angles, their cos/sin and the rotation
// are computed in double; each thread caches cos/sin for the last position.
#include <cmath>
#include <cstring>

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

// cos_t[i], sin_t[i] for theta_i = p * base^(-2i/n_dims), i < n_dims/2.
void fill_angles(int32_t p, int n_dims, double base, double* cos_t, double* sin_t) {
  for (int i = 0; i < n_dims / 2; ++i) {
    const double theta = p * std::pow(base, -2.0 * i / n_dims);
    cos_t[i] = std::cos(theta);
    sin_t[i] = std::sin(theta);
  }
}

void rope_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const int n_dims = dst.param_i32(0);
  const int32_t mode = dst.param_i32(1);
  const double base = dst.param_f32(2);
  if (mode != static_cast<int32_t>(RopeMode::normal) && mode != static_cast<int32_t>(RopeMode::neox)) {
    fail(ErrorKind::invalid_input, "rope", "unknown mode " + std::to_string(mode));
  }
  const bool neox = mode == static_cast<int32_t>(RopeMode::neox);
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const int half = n_dims / 2;
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  RowScratch scratch(kc, dst);
  double* cos_t = scratch.take<double>(ne0);
  double* sin_t = scratch.take<double>(ne0);
  bool have_angles = false;
  int32_t cached_p = 0;

  // Pair i of a row: elements (i0, i0 + step).
  const int64_t step = neox ? half : 1;
  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    int32_t p;
    std::memcpy(&p, static_cast<const uint8_t*>(pos.data) + i2 * pos.nb[0], sizeof p);
    if (!have_angles || p != cached_p) {
      fill_angles(p, n_dims, base, cos_t, sin_t);
      have_angles = true;
      cached_p = p;
    }
    const uint8_t* src = row_ptr(a, i1, i2, i3);
    uint8_t* out = row_ptr(dst, i1, i2, i3);
    for (int i = 0; i < half; ++i) {
      const int64_t i0 = neox ? i : 2 * i;
      const double x0 = load_f32(src + i0 * a.nb[0]);
      const double x1 = load_f32(src + (i0 + step) * a.nb[0]);
      store_f32(out + i0 * dst.nb[0], static_cast<float>(x0 * cos_t[i] - x1 * sin_t[i]));
      store_f32(out + (i0 + step) * dst.nb[0], static_cast<float>(x0 * sin_t[i] + x1 * cos_t[i]));
    }
    for (int64_t i0 = n_dims; i0 < ne0; ++i0) {
      store_f32(out + i0 * dst.nb[0], load_f32(src + i0 * a.nb[0]));
    }
  }
}

// f32 values, i32 positions.
bool rope_supports(const Tensor& n) { return is_f32(n.src[0]) && is_i32(n.src[1]); }

// cos and sin per pair, in double (a row's length each: n_dims <= ne0).
size_t rope_scratch_bytes(const Tensor& n, int) { return 2 * scratch_piece_bytes(n.src[0]->ne[0], sizeof(double)); }

}  // namespace

const OpFamily kRopeFamily{"rope", rope_supports, rope_scratch_bytes, rope_op};

}  // namespace weft::cpu
