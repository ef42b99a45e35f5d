// Row gather (get_rows) and scatter (set_rows).
#include <algorithm>

#include "kernels.h"
#include "scratch_k2.h"

namespace weft::cpu {
namespace {

int32_t index_at(const Tensor& idx, int64_t i, int64_t j) {
  return *reinterpret_cast<const int32_t*>(elem_ptr(idx, i, j, 0, 0));
}

}  // namespace

// out[:, i, j] = a[:, idx[i, j], j] as f32; an index outside [0, R) gives a
// row of zeros (a worker thread cannot report it).
void get_rows_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& idx = *dst.src[1];
  const int64_t k = a.ne[0];
  const int64_t n = dst.ne[1];
  const Range r = split_range(n * dst.ne[2], kc.ith, kc.nth);
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t i = row % n, j = row / n;
    auto* out = reinterpret_cast<float*>(row_ptr(dst, i, j, 0));
    const int32_t src_row = index_at(idx, i, j);
    if (src_row < 0 || src_row >= a.ne[1]) {
      std::fill(out, out + k, 0.0f);
    } else {
      to_f32(a.type, row_ptr(a, src_row, j, 0), out, k);
    }
  }
}

// dst[:, idx[i, j], j] = src[:, i, j], converted to dst's dtype; an index
// outside [0, R) is skipped. Each thread owns the destination rows with
// (j * R + row) % nth == ith and applies their writes in order, so with
// repeated indices the last write wins, as if run serially.
void set_rows_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& src = *dst.src[1];
  const Tensor& idx = *dst.src[2];
  const int64_t k = dst.ne[0];
  const int64_t rows = dst.ne[1];
  ScratchK2 scratch(kc, dst);
  float* buf = src.nb[0] == sizeof(float) ? nullptr : scratch.take<float>(k);
  for (int64_t j = 0; j < src.ne[2]; ++j) {
    for (int64_t i = 0; i < src.ne[1]; ++i) {
      const int32_t r = index_at(idx, i, j);
      if (r < 0 || r >= rows || (j * rows + r) % kc.nth != kc.ith) continue;
      const uint8_t* p = row_ptr(src, i, j, 0);
      const float* x = reinterpret_cast<const float*>(p);
      if (buf != nullptr) {
        for (int64_t e = 0; e < k; ++e) buf[e] = *reinterpret_cast<const float*>(p + e * src.nb[0]);
        x = buf;
      }
      from_f32(dst.type, x, row_ptr(dst, r, j, 0), k);
    }
  }
}

size_t rows_scratch_bytes(const Tensor& node) {
  if (node.op != Op::set_rows || node.src[1]->nb[0] == sizeof(float)) return 0;
  return kScratchAlign + k2_pad(node.ne[0], sizeof(float));
}

}  // namespace weft::cpu
