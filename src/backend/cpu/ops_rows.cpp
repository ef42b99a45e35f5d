// Row gather (get_rows) and scatter (set_rows).
#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"

namespace weft::cpu {
namespace {

int32_t index_at(const Tensor& idx, int64_t i, int64_t j) {
  return *reinterpret_cast<const int32_t*>(elem_ptr(idx, i, j, 0, 0));
}

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
      to_f32_row(a.type, row_ptr(a, src_row, j, 0), out, k);
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
  AlignedScratch scratch(kc, dst);
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
      from_f32_row(dst.type, x, row_ptr(dst, r, j, 0), k);
    }
  }
}

// out[:, t] = x[:, t] when some ids[e, t] is in [first, first + count),
// else zeros. Each thread owns a range of t.
void routed_rows_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& x = *dst.src[0];
  const Tensor& ids = *dst.src[1];
  const int64_t first = dst.op_params[0], end = first + int64_t{dst.op_params[1]};
  const size_t row_bytes = static_cast<size_t>(dst.ne[0]) * sizeof(float);
  const Range r = split_range(dst.ne[1], kc.ith, kc.nth);
  for (int64_t t = r.begin; t < r.end; ++t) {
    bool routed = false;
    for (int64_t e = 0; e < ids.ne[0] && !routed; ++e) {
      const int64_t id = index_at(ids, e, t);
      routed = id >= first && id < end;
    }
    uint8_t* out = row_ptr(dst, t, 0, 0);
    if (routed) {
      std::memcpy(out, row_ptr(x, t, 0, 0), row_bytes);
    } else {
      std::memset(out, 0, row_bytes);
    }
  }
}

// Rows of any dtype whose rows are packed blocks (to_f32 reads a whole row),
// i32 indices.
bool get_rows_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  return a && a->rows_contiguous() && is_i32(n.src[1]);
}

// Converts straight into the f32 result.
size_t get_rows_scratch_bytes(const Tensor&, int) { return 0; }

// A destination that is not i32, with packed rows (from_f32 writes a whole
// row); f32 source rows; i32 indices.
bool set_rows_supports(const Tensor& n) {
  return is_weight_type(n.type) && n.rows_contiguous() && is_f32(n.src[1]) && is_i32(n.src[2]);
}

// A packed copy of a source row, when the source's elements are strided.
size_t set_rows_scratch_bytes(const Tensor& n, int) {
  if (n.src[1]->nb[0] == sizeof(float)) return 0;
  return kScratchAlign + scratch_piece_bytes(n.ne[0], sizeof(float));
}

bool routed_rows_supports(const Tensor& n) {
  return n.type == DType::f32 && n.rows_contiguous() && is_f32(n.src[0]) && n.src[0]->rows_contiguous() &&
         is_i32(n.src[1]);
}

size_t no_scratch_bytes(const Tensor&, int) { return 0; }

}  // namespace

const OpFamily kRoutedRowsFamily{"routed_rows", routed_rows_supports, no_scratch_bytes, routed_rows_op};
const OpFamily kGetRowsFamily{"get_rows", get_rows_supports, get_rows_scratch_bytes, get_rows_op};
const OpFamily kSetRowsFamily{"set_rows", set_rows_supports, set_rows_scratch_bytes, set_rows_op};

}  // namespace weft::cpu
