// soft_max: softmax(a * scale + mask) along rows. a and dst f32; the mask
// (optional) is f32 or f16, row i1 of it serves row i1 of a, and it
// broadcasts over dims 2 and 3. A row whose every logit is -inf becomes all
// zeros rather than NaN; NaN logits are passed over by the max (and so make
// the row NaN), as a scalar `v > max` loop would. With sinks (f32 [ne2]),
// row (i1, i2) divides by sum + e^(sinks[i2] - max), in double: a sink far
// above the row's logits gives (near) zeros, never inf / inf.
//
// Three passes over a row that stays in L1/L2: w = a * scale + mask with its
// max, e = exp(w - max) with its sum (double), e * (1 / sum). When dst is
// packed f32 the passes run in dst itself (in place over a included).
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

// The mask row as packed f32: the row itself, or converted into buf.
const float* mask_row(const Tensor& m, const uint8_t* row, int64_t n, float* buf) {
  if (m.type == DType::f32 && m.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(row);
  if (m.type == DType::f16 && m.nb[0] == sizeof(uint16_t)) {
    vec_kernels().f16_to_f32(reinterpret_cast<const uint16_t*>(row), buf, n);
    return buf;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = row + i * m.nb[0];
    if (m.type == DType::f16) {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      buf[i] = f16_to_f32(h);
    } else {
      std::memcpy(&buf[i], p, sizeof(float));
    }
  }
  return buf;
}

bool mask_needs_buffer(const Tensor* m) { return m != nullptr && !(m->type == DType::f32 && m->nb[0] == sizeof(float)); }

void soft_max_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor* mask = dst.src[1];
  const Tensor* sinks = dst.src[2];
  const int64_t ne0 = a.ne[0];
  const float scale = dst.param_f32(0);
  const ThreadRows rows(a, kc);
  if (rows.empty()) return;
  if (mask != nullptr && mask->type != DType::f32 && mask->type != DType::f16) {
    fail(ErrorKind::unsupported, "soft_max", std::string("mask dtype ") + std::string(dtype_name(mask->type)));
  }

  const VecKernels& k = vec_kernels();
  RowScratch scratch(kc, dst);
  float* w = scratch.take<float>(ne0);
  float* mbuf = mask_needs_buffer(mask) ? scratch.take<float>(ne0) : nullptr;

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, w);
    const float* m = nullptr;
    if (mask != nullptr) m = mask_row(*mask, row_ptr(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]), ne0, mbuf);
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    float* out = out_row_f32(dst, pd, w);
    const float max = k.scale_add_max(x, scale, m, out, ne0);
    if (max == -INFINITY) {
      for (int64_t i = 0; i < ne0; ++i) out[i] = 0.0f;
    } else {
      double sum = k.exp_sum(out, max, out, ne0);
      if (sinks != nullptr) sum += std::exp(static_cast<double>(static_cast<const float*>(sinks->data)[i2]) - max);
      k.scale(out, static_cast<float>(1.0 / sum), out, ne0);
    }
    store_row_f32(dst, pd, out, ne0);
  });
}

// f32 logits; the mask, when given, f32 or f16; sinks f32.
bool soft_max_supports(const Tensor& n) {
  const Tensor* mask = n.src[1];
  return is_f32(n.src[0]) && (mask == nullptr || mask->type == DType::f32 || mask->type == DType::f16) &&
         (n.src[2] == nullptr || is_f32(n.src[2]));
}

// A row for the scaled, masked logits and then (unless dst is packed f32)
// the result; a second for the mask when it is not packed f32.
size_t soft_max_scratch_bytes(const Tensor& n, int) {
  const size_t row = scratch_piece_bytes(n.src[0]->ne[0], sizeof(float));
  return mask_needs_buffer(n.src[1]) ? 2 * row : row;
}

}  // namespace

const OpFamily kSoftMaxFamily{"soft_max", soft_max_supports, soft_max_scratch_bytes, soft_max_op};

}  // namespace weft::cpu
