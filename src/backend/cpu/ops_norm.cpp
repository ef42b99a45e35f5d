// rms_norm and norm along rows (f32), with the vector kernels of vec.h.
// Sums are accumulated in double.
#include <cmath>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

// out = x / sqrt(mean(x^2) + eps)
void rms_norm_row(const VecKernels& k, const float* x, float* out, int64_t n, float eps) {
  const double mean = n > 0 ? k.sum_sq(x, n) / static_cast<double>(n) : 0.0;
  k.scale(x, static_cast<float>(1.0 / std::sqrt(mean + eps)), out, n);
}

// out = (x - mean) / sqrt(var + eps), var the population variance; the
// kernels take x - mean to about double accuracy (a float mean alone would
// lose the deviations of rows with a large mean).
void norm_row(const VecKernels& k, const float* x, float* out, int64_t n, float eps) {
  const double mean = n > 0 ? k.sum(x, n) / static_cast<double>(n) : 0.0;
  const double var = n > 0 ? k.sum_sq_dev(x, mean, n) / static_cast<double>(n) : 0.0;
  k.center_scale(x, mean, static_cast<float>(1.0 / std::sqrt(var + eps)), out, n);
}

void norm_op(const KernelContext& kc, Tensor& dst) {
  if (dst.op != Op::rms_norm && dst.op != Op::norm) {
    fail(ErrorKind::internal, "norm_op", std::string("not a norm op: ") + op_name(dst.op));
  }
  const Tensor& a = *dst.src[0];
  const int64_t ne0 = a.ne[0];
  const float eps = dst.param_f32(0);
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  const VecKernels& k = vec_kernels();
  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_d = scratch.take<float>(ne0);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    float* out = out_row_f32(dst, pd, buf_d);
    if (dst.op == Op::rms_norm) {
      rms_norm_row(k, x, out, ne0, eps);
    } else {
      norm_row(k, x, out, ne0, eps);
    }
    store_row_f32(dst, pd, out, ne0);
  });
}

bool norm_supports(const Tensor& n) { return is_f32(n.src[0]); }

// A source row and a result row.
size_t norm_scratch_bytes(const Tensor& n, int) { return 2 * scratch_piece_bytes(n.src[0]->ne[0], sizeof(float)); }

}  // namespace

bool fusable_rms_norm_mul(const Tensor& norm, const Tensor& mul) {
  const Tensor* w = mul.src[1];
  return norm.op == Op::rms_norm && norm.type == DType::f32 && is_f32(norm.src[0]) && norm.view_src == nullptr &&
         mul.op == Op::mul && mul.src[0] == &norm && mul.type == DType::f32 && mul.nb[0] == sizeof(float) &&
         w != nullptr && w->type == DType::f32 && w->nb[0] == sizeof(float) && w->ne[0] == norm.ne[0] &&
         w->ne[1] == 1 && w->ne[2] == 1 && w->ne[3] == 1;
}

// Each row: the sum of squares pass, x * s into the result row, then that
// row times w in place: the rounding of norm_op then binary_rows, one row
// read from memory instead of three. The result may be x's memory exactly
// (the planner's in-place form): a row is read whole before it is written.
void rms_norm_mul(const KernelContext& kc, Tensor& mul, const Tensor& norm) {
  const Tensor& a = *norm.src[0];
  const int64_t ne0 = a.ne[0];
  const float eps = norm.param_f32(0);
  const auto* w = static_cast<const float*>(mul.src[1]->data);
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  const VecKernels& k = vec_kernels();
  RowScratch scratch(kc, norm);
  float* buf_a = scratch.take<float>(ne0);
  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    auto* out = reinterpret_cast<float*>(row_ptr(mul, i1, i2, i3));
    rms_norm_row(k, x, out, ne0, eps);
    k.binary[static_cast<size_t>(BinaryOp::mul)](out, w, out, ne0);
  });
}

const OpFamily kNormFamily{"norm", norm_supports, norm_scratch_bytes, norm_op};

}  // namespace weft::cpu
