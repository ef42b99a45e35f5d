// sum_rows (f32 -> f32 [1, ne1, ne2, ne3], summed in double) and argmax
// (f32 -> i32 [ne1, ne2, ne3, 1]; the first maximum wins, NaNs are skipped
// unless the whole row is NaN, which gives 0).
#include <cstring>

#include "kernels.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

double sum_row(const uint8_t* p, size_t nb0, int64_t n) {
  if (nb0 == sizeof(float)) {
    const float* x = reinterpret_cast<const float*>(p);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      s0 += x[i];
      s1 += x[i + 1];
      s2 += x[i + 2];
      s3 += x[i + 3];
    }
    for (; i < n; ++i) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
  }
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += load_f32(p + i * nb0);
  return s;
}

int32_t argmax_row(const uint8_t* p, size_t nb0, int64_t n) {
  int32_t best = 0;
  float best_v = 0.0f;
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_f32(p + i * nb0);
    if (v != v) continue;  // NaN
    if (!found || v > best_v) {
      best = static_cast<int32_t>(i);
      best_v = v;
      found = true;
    }
  }
  return best;
}

void reduce_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const int64_t ne0 = a.ne[0];
  const ThreadRows rows(a, kc);
  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const uint8_t* src = row_ptr(a, i1, i2, i3);
    switch (dst.op) {
      case Op::sum_rows: {
        const float s = static_cast<float>(sum_row(src, a.nb[0], ne0));
        std::memcpy(row_ptr(dst, i1, i2, i3), &s, sizeof s);
        break;
      }
      case Op::argmax: {
        const int32_t idx = argmax_row(src, a.nb[0], ne0);
        std::memcpy(elem_ptr(dst, i1, i2, i3, 0), &idx, sizeof idx);
        break;
      }
      default: fail(ErrorKind::internal, "reduce_op", std::string("not a reduction: ") + op_name(dst.op));
    }
  });
}

bool reduce_supports(const Tensor& n) { return is_f32(n.src[0]); }

// Reads rows in place.
size_t reduce_scratch_bytes(const Tensor&, int) { return 0; }

}  // namespace

const OpFamily kReduceFamily{"reduce", reduce_supports, reduce_scratch_bytes, reduce_op};

}  // namespace weft::cpu
