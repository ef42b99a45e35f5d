// add sub mul div: dst = a (op) b, b broadcast over a by index modulo b.ne,
// with the vector kernels of vec.h. Fast paths: contiguous f32 operands of
// the same shape, or a single-element b, are one flat row split across
// threads; otherwise each row of a meets its row of b, which is the same
// length, one element, or repeated along the row.
#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

bool flat_f32(const Tensor& t) {
  return t.type == DType::f32 && t.is_contiguous();
}

// out[i] = x[i] op y[i % ny] for i < n; ny divides n.
void apply_row(const VecKernels& k, BinaryOp op, const float* x, const float* y, int64_t ny, float* out, int64_t n) {
  const auto o = static_cast<size_t>(op);
  if (ny == n) {
    k.binary[o](x, y, out, n);
  } else if (ny == 1) {
    k.binary_scalar[o](x, y[0], out, n);
  } else {
    for (int64_t j = 0; j < n; j += ny) k.binary[o](x + j, y, out + j, ny);
  }
}

void binary_rows(const KernelContext& kc, Tensor& dst, BinaryOp op) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const VecKernels& k = vec_kernels();
  if (dst.nelements() == 0) return;  // an empty result reads nothing

  if (flat_f32(a) && flat_f32(dst) && b.type == DType::f32 &&
      (b.nelements() == 1 || (flat_f32(b) && same_shape(a, b)))) {
    const Range r = flat_range(a.nelements(), kc.ith, kc.nth);
    if (r.begin >= r.end) return;
    const float* x = static_cast<const float*>(a.data) + r.begin;
    float* out = static_cast<float*>(dst.data) + r.begin;
    if (b.nelements() == 1) {
      k.binary_scalar[static_cast<size_t>(op)](x, *static_cast<const float*>(b.data), out, r.end - r.begin);
    } else {
      k.binary[static_cast<size_t>(op)](x, static_cast<const float*>(b.data) + r.begin, out, r.end - r.begin);
    }
    return;
  }

  const int64_t ne0 = a.ne[0];
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;

  RowScratch scratch(kc, dst);
  float* buf_a = scratch.take<float>(ne0);
  float* buf_b = scratch.take<float>(b.ne[0]);  // b's row is what is read into it
  float* buf_d = scratch.take<float>(ne0);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const uint8_t* pa = row_ptr(a, i1, i2, i3);
    const uint8_t* pb = row_ptr(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    const float* x = load_row_f32(a, pa, ne0, buf_a);
    const float* y = load_row_f32(b, pb, b.ne[0], buf_b);
    float* out = out_row_f32(dst, pd, buf_d);
    apply_row(k, op, x, y, b.ne[0], out, ne0);
    store_row_f32(dst, pd, out, ne0);
  });
}

void binary_op(const KernelContext& kc, Tensor& dst) {
  switch (dst.op) {
    case Op::add: return binary_rows(kc, dst, BinaryOp::add);
    case Op::sub: return binary_rows(kc, dst, BinaryOp::sub);
    case Op::mul: return binary_rows(kc, dst, BinaryOp::mul);
    case Op::div: return binary_rows(kc, dst, BinaryOp::div);
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
