// argsort and top_k over f32 rows, writing i32 indices. Equal values keep the
// lower index first; NaN orders above every number (last ascending, first
// descending) so the comparison stays a strict weak order.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

// x < y with NaN greater than everything (and equal to itself).
inline bool less_nan_last(float x, float y) {
  if (std::isnan(y)) return !std::isnan(x);
  return x < y;
}

void sort_op(const KernelContext& kc, Tensor& dst) {
  if (dst.op != Op::argsort && dst.op != Op::top_k) {
    fail(ErrorKind::internal, "sort_op", std::string("not a sort op: ") + op_name(dst.op));
  }
  const Tensor& a = *dst.src[0];
  const int64_t ne0 = a.ne[0];
  const bool top_k = dst.op == Op::top_k;
  const bool descending = top_k || dst.param_i32(0) == static_cast<int32_t>(SortOrder::descending);
  const int64_t n_out = top_k ? std::min<int64_t>(dst.param_i32(0), ne0) : ne0;
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  RowScratch scratch(kc, dst);
  int32_t* idx = scratch.take<int32_t>(ne0);
  float* buf = scratch.take<float>(ne0);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const float* v = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf);
    for (int64_t i = 0; i < ne0; ++i) idx[i] = static_cast<int32_t>(i);
    auto before = [v, descending](int32_t x, int32_t y) {
      const bool ordered = descending ? less_nan_last(v[y], v[x]) : less_nan_last(v[x], v[y]);
      if (ordered) return true;
      const bool reversed = descending ? less_nan_last(v[x], v[y]) : less_nan_last(v[y], v[x]);
      return !reversed && x < y;
    };
    if (n_out < ne0) {
      std::partial_sort(idx, idx + n_out, idx + ne0, before);
    } else {
      std::sort(idx, idx + ne0, before);
    }
    uint8_t* out = row_ptr(dst, i1, i2, i3);
    for (int64_t i = 0; i < n_out; ++i) std::memcpy(out + i * dst.nb[0], &idx[i], sizeof(int32_t));
  });
}

bool sort_supports(const Tensor& n) { return is_f32(n.src[0]); }

// An index and a value per element of a row.
size_t sort_scratch_bytes(const Tensor& n, int) {
  const int64_t ne0 = n.src[0]->ne[0];
  return scratch_piece_bytes(ne0, sizeof(int32_t)) + scratch_piece_bytes(ne0, sizeof(float));
}

}  // namespace

const OpFamily kSortFamily{"sort", sort_supports, sort_scratch_bytes, sort_op};

}  // namespace weft::cpu
