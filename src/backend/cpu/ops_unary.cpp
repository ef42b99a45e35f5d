// scale sqr sqrt silu gelu gelu_erf sigmoid softcap, and swiglu (silu(a) * b
// with b the same shape). Scalar f32 math (libm), rows split across threads.
#include <cmath>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

inline float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// 0.5 x (1 + erf(x / sqrt 2)) written with erfc, which keeps its relative
// accuracy where 1 + erf cancels (large negative x).
inline float gelu_erf(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  return 0.5f * x * std::erfc(-x * kInvSqrt2);
}

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// f(x) per element of a; dst may alias a.
template <class F>
void unary_rows(const KernelContext& kc, Tensor& dst, F f) {
  const Tensor& a = *dst.src[0];
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_d = scratch.take<float>(ne0);

  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    float* out = out_row_f32(dst, pd, buf_d);
    for (int64_t i = 0; i < ne0; ++i) out[i] = f(x[i]);
    store_row_f32(dst, pd, out, ne0);
  }
}

void swiglu_rows(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_b = scratch.take<float>(ne0);
  float* buf_d = scratch.take<float>(ne0);

  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, buf_a);
    const float* y = load_row_f32(b, row_ptr(b, i1, i2, i3), ne0, buf_b);
    float* out = out_row_f32(dst, pd, buf_d);
    for (int64_t i = 0; i < ne0; ++i) out[i] = silu(x[i]) * y[i];
    store_row_f32(dst, pd, out, ne0);
  }
}

void unary_op(const KernelContext& kc, Tensor& dst) {
  switch (dst.op) {
    case Op::scale: {
      const float s = dst.param_f32(0);
      return unary_rows(kc, dst, [s](float x) { return x * s; });
    }
    case Op::sqr: return unary_rows(kc, dst, [](float x) { return x * x; });
    case Op::sqrt: return unary_rows(kc, dst, [](float x) { return std::sqrt(x); });
    case Op::silu: return unary_rows(kc, dst, [](float x) { return silu(x); });
    case Op::gelu: return unary_rows(kc, dst, [](float x) { return gelu(x); });
    case Op::gelu_erf: return unary_rows(kc, dst, [](float x) { return gelu_erf(x); });
    case Op::sigmoid: return unary_rows(kc, dst, [](float x) { return sigmoid(x); });
    case Op::softcap: {
      const float cap = dst.param_f32(0);  // finite and > 0 (the constructor's rule)
      const float inv = 1.0f / cap;
      return unary_rows(kc, dst, [cap, inv](float x) { return cap * std::tanh(x * inv); });
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

}  // namespace weft::cpu
