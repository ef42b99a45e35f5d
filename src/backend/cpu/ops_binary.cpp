// add sub mul div: dst = a (op) b, b broadcast over a by index modulo b.ne.
#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

struct Add {
  float operator()(float x, float y) const { return x + y; }
};
struct Sub {
  float operator()(float x, float y) const { return x - y; }
};
struct Mul {
  float operator()(float x, float y) const { return x * y; }
};
struct Div {
  float operator()(float x, float y) const { return x / y; }
};

// out[i] = f(x[i], y[i % ny]) for i < n; ny divides n.
template <class F>
void apply_row(F f, const float* x, const float* y, int64_t ny, float* out, int64_t n) {
  if (ny == n) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
  } else if (ny == 1) {
    const float y0 = y[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y0);
  } else {
    for (int64_t j = 0; j < n; j += ny) {
      for (int64_t i = 0; i < ny; ++i) out[j + i] = f(x[j + i], y[i]);
    }
  }
}

template <class F>
void binary_rows(const KernelContext& kc, Tensor& dst, F f) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end || dst.nelements() == 0) return;  // an empty result reads nothing

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_b = scratch.take<float>(b.ne[0]);  // b's row is what is read into it
  float* buf_d = scratch.take<float>(ne0);

  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    const uint8_t* pa = row_ptr(a, i1, i2, i3);
    const uint8_t* pb = row_ptr(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, pa, ne0, buf_a);
    const float* y = load_row_f32(b, pb, b.ne[0], buf_b);
    float* out = out_row_f32(dst, pd, buf_d);
    apply_row(f, x, y, b.ne[0], out, ne0);
    store_row_f32(dst, pd, out, ne0);
  }
}

void binary_op(const KernelContext& kc, Tensor& dst) {
  switch (dst.op) {
    case Op::add: return binary_rows(kc, dst, Add{});
    case Op::sub: return binary_rows(kc, dst, Sub{});
    case Op::mul: return binary_rows(kc, dst, Mul{});
    case Op::div: return binary_rows(kc, dst, Div{});
    default: fail(ErrorKind::internal, "binary_op", std::string("not a binary op: ") + op_name(dst.op));
  }
}

// Any mix of f32, f16 and bf16; the result has a's dtype.
bool binary_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  return a && b && is_float_type(a->type) && is_float_type(b->type) && n.type == a->type;
}

// A row of a, a row of b (b.ne[0] elements, never more than a's), a result row.
size_t binary_scratch_bytes(const Tensor& n, int) {
  return scratch_piece_bytes(n.src[0]->ne[0], sizeof(float)) + scratch_piece_bytes(n.src[1]->ne[0], sizeof(float)) +
         scratch_piece_bytes(n.ne[0], sizeof(float));
}

}  // namespace

const OpFamily kBinaryFamily{"binary", binary_supports, binary_scratch_bytes, binary_op};

}  // namespace weft::cpu
