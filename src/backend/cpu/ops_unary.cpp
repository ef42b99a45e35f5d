// scale sqr sqrt silu gelu gelu_erf sigmoid softcap, and swiglu (silu(a) * b
// with b the same shape) and swiglu_oai (its clamped form), with the vector
// kernels of vec.h. Contiguous f32
// operands are one flat row split across threads; anything else goes row by
// row through f32 staging (row_f32.h).
#include <algorithm>
#include <cmath>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

bool flat_f32(const Tensor& t) { return t.type == DType::f32 && t.is_contiguous(); }

// f(x, out, n) over every row of a; dst may alias a.
template <class RowFn>
void unary_rows(const KernelContext& kc, Tensor& dst, RowFn f) {
  const Tensor& a = *dst.src[0];
  if (flat_f32(a) && flat_f32(dst)) {
    const Range r = flat_range(a.nelements(), kc.ith, kc.nth);
    if (r.begin < r.end)
      f(static_cast<const float*>(a.data) + r.begin, static_cast<float*>(dst.data) + r.begin, r.end - r.begin);
    return;
  }
  const int64_t ne0 = a.ne[0];
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_d = scratch.take<float>(ne0);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    float* out = out_row_f32(dst, pd, buf_d);
    f(x, out, ne0);
    store_row_f32(dst, pd, out, ne0);
  });
}

// f(x, y, out, n) over every row pair of a and b (same shapes); dst may
// alias a.
template <class RowFn>
void binary_rows(const KernelContext& kc, Tensor& dst, RowFn f) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  if (flat_f32(a) && flat_f32(b) && flat_f32(dst)) {
    const Range r = flat_range(a.nelements(), kc.ith, kc.nth);
    if (r.begin < r.end)
      f(static_cast<const float*>(a.data) + r.begin, static_cast<const float*>(b.data) + r.begin,
        static_cast<float*>(dst.data) + r.begin, r.end - r.begin);
    return;
  }
  const int64_t ne0 = a.ne[0];
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_b = scratch.take<float>(ne0);
  float* buf_d = scratch.take<float>(ne0);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    const float* y = load_row_f32(b, row_ptr(b, i1, i2, i3), ne0, buf_b);
    float* out = out_row_f32(dst, pd, buf_d);
    f(x, y, out, ne0);
    store_row_f32(dst, pd, out, ne0);
  });
}

void swiglu_rows(const KernelContext& kc, Tensor& dst) {
  const VecKernels& k = vec_kernels();
  binary_rows(kc, dst, [&k](const float* x, const float* y, float* out, int64_t n) { k.swiglu(x, y, out, n); });
}

// gpt-oss's clamped SwiGLU, scalar: the experts' activations are a small
// share of a layer's time beside the products that make them. std::min
// keeps a NaN gate (as ggml's kernel does).
void swiglu_oai_rows(const KernelContext& kc, Tensor& dst) {
  const float alpha = dst.param_f32(0), limit = dst.param_f32(1);
  binary_rows(kc, dst, [alpha, limit](const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const float x = std::min(gate[i], limit);
      const float y = std::clamp(up[i], -limit, limit);
      out[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
    }
  });
}

void unary_op(const KernelContext& kc, Tensor& dst) {
  const VecKernels& k = vec_kernels();
  auto run = [&](UnaryRowFn f) { unary_rows(kc, dst, f); };
  switch (dst.op) {
    case Op::scale: {
      const float s = dst.param_f32(0);
      return unary_rows(kc, dst, [&k, s](const float* x, float* out, int64_t n) { k.scale(x, s, out, n); });
    }
    case Op::sqr: return run(k.sqr);
    case Op::sqrt: return run(k.sqrt);
    case Op::silu: return run(k.silu);
    case Op::gelu: return run(k.gelu);
    case Op::gelu_erf: return run(k.gelu_erf);
    case Op::sigmoid: return run(k.sigmoid);
    case Op::softcap: {
      const float cap = dst.param_f32(0);  // finite and > 0 (the constructor's rule)
      return unary_rows(kc, dst, [&k, cap](const float* x, float* out, int64_t n) { k.softcap(x, cap, out, n); });
    }
    default: fail(ErrorKind::internal, "unary_op", std::string("not a unary op: ") + op_name(dst.op));
  }
}

// f32, f16 or bf16, the result in a's dtype.
bool unary_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  return a && is_float_type(a->type) && n.type == a->type;
}

// A row of a and a result row.
size_t unary_scratch_bytes(const Tensor& n, int) { return 2 * scratch_piece_bytes(n.src[0]->ne[0], sizeof(float)); }

// a and b in any mix of f32, f16 and bf16; the result in a's dtype.
bool swiglu_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  return a && b && is_float_type(a->type) && is_float_type(b->type) && n.type == a->type;
}

// A row of a, a row of b (the same length) and a result row.
size_t swiglu_scratch_bytes(const Tensor& n, int) { return 3 * scratch_piece_bytes(n.src[0]->ne[0], sizeof(float)); }

}  // namespace

const OpFamily kUnaryFamily{"unary", unary_supports, unary_scratch_bytes, unary_op};
const OpFamily kSwigluFamily{"swiglu", swiglu_supports, swiglu_scratch_bytes, swiglu_rows};
const OpFamily kSwigluOaiFamily{"swiglu_oai", swiglu_supports, swiglu_scratch_bytes, swiglu_oai_rows};

}  // namespace weft::cpu
