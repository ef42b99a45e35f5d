// soft_max: softmax(a * scale + mask) along rows. a and dst f32; the mask
// (optional) is f32 or f16, row i1 of it serves row i1 of a, and it
// broadcasts over dims 2 and 3. A row whose every logit is -inf becomes all
// zeros rather than NaN.
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

float mask_value(const Tensor& m, const uint8_t* row, int64_t i) {
  const uint8_t* p = row + i * m.nb[0];
  if (m.type == DType::f16) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
  }
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

void soft_max_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor* mask = dst.src[1];
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  const float scale = dst.param_f32(0);
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  if (r.begin >= r.end) return;
  if (mask != nullptr && mask->type != DType::f32 && mask->type != DType::f16) {
    fail(ErrorKind::unsupported, "soft_max", std::string("mask dtype ") + std::string(dtype_name(mask->type)));
  }

  RowScratch scratch(kc, dst);
  float* w = scratch.take<float>(ne0);

  for (int64_t ir = r.begin; ir < r.end; ++ir) {
    const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
    const float* x = load_row_f32(a, row_ptr(a, i1, i2, i3), ne0, w);
    for (int64_t i = 0; i < ne0; ++i) w[i] = x[i] * scale;
    if (mask != nullptr) {
      const uint8_t* pm = row_ptr(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
      if (mask->type == DType::f32 && mask->nb[0] == sizeof(float)) {
        const float* m = reinterpret_cast<const float*>(pm);
        for (int64_t i = 0; i < ne0; ++i) w[i] += m[i];
      } else {
        for (int64_t i = 0; i < ne0; ++i) w[i] += mask_value(*mask, pm, i);
      }
    }

    float max = -INFINITY;
    for (int64_t i = 0; i < ne0; ++i) max = w[i] > max ? w[i] : max;
    uint8_t* pd = row_ptr(dst, i1, i2, i3);
    float* out = out_row_f32(dst, pd, w);
    if (max == -INFINITY) {
      for (int64_t i = 0; i < ne0; ++i) out[i] = 0.0f;
    } else {
      double sum = 0.0;
      for (int64_t i = 0; i < ne0; ++i) {
        out[i] = std::exp(w[i] - max);
        sum += out[i];
      }
      const double inv = 1.0 / sum;
      for (int64_t i = 0; i < ne0; ++i) out[i] = static_cast<float>(out[i] * inv);
    }
    store_row_f32(dst, pd, out, ne0);
  }
}

// f32 logits; the mask, when given, f32 or f16.
bool soft_max_supports(const Tensor& n) {
  const Tensor* mask = n.src[1];
  return is_f32(n.src[0]) && (mask == nullptr || mask->type == DType::f32 || mask->type == DType::f16);
}

// One row: the scaled, masked logits, then (unless dst is packed f32) the result.
size_t soft_max_scratch_bytes(const Tensor& n, int) { return scratch_piece_bytes(n.src[0]->ne[0], sizeof(float)); }

}  // namespace

const OpFamily kSoftMaxFamily{"soft_max", soft_max_supports, soft_max_scratch_bytes, soft_max_op};

}  // namespace weft::cpu
