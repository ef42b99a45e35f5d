// Scratch sizing and f32 row staging shared by the k1 kernel files.
#include <cstring>

#include "scratch_k1.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"

namespace weft::cpu {

size_t k1_scratch_bytes(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a == nullptr) return 0;
  const int64_t ne0 = a->ne[0];
  switch (node.op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: {  // a row of a, a row of b (b.ne[0] elements, never more than a's), a result row
      const Tensor* b = node.src[1];
      return k1_pad(ne0, sizeof(float)) + k1_pad(b != nullptr ? b->ne[0] : 0, sizeof(float)) +
             k1_pad(node.ne[0], sizeof(float));
    }
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu:
    case Op::swiglu: return 3 * k1_pad(ne0, sizeof(float));  // a row, b row, result row
    case Op::rms_norm:
    case Op::norm: return 2 * k1_pad(ne0, sizeof(float));  // source row, result row
    case Op::soft_max: return k1_pad(ne0, sizeof(float));
    case Op::rope: return 2 * k1_pad(ne0, sizeof(double));  // cos and sin per pair
    case Op::argsort:
    case Op::top_k: return k1_pad(ne0, sizeof(int32_t)) + k1_pad(ne0, sizeof(float));
    default: return 0;
  }
}

void scratch_overflow(size_t wanted, size_t left) {
  fail(ErrorKind::internal, "cpu kernel scratch",
       "a kernel asked for " + std::to_string(wanted) + " bytes with " + std::to_string(left) +
           " left: scratch_bytes() undersized it");
}

namespace {

float load_elem(DType t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case DType::f16: std::memcpy(&h, p, sizeof h); return f16_to_f32(h);
    case DType::bf16: std::memcpy(&h, p, sizeof h); return bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
  }
}

void store_elem(DType t, uint8_t* p, float v) {
  uint16_t h;
  switch (t) {
    case DType::f16:
      h = f32_to_f16(v);
      std::memcpy(p, &h, sizeof h);
      break;
    case DType::bf16:
      h = f32_to_bf16(v);
      std::memcpy(p, &h, sizeof h);
      break;
    default: std::memcpy(p, &v, sizeof v); break;
  }
}

}  // namespace

const float* load_row_f32(const Tensor& t, const uint8_t* p, int64_t n, float* buf) {
  const size_t unit = traits(t.type).unit_bytes;
  if (t.nb[0] == unit) {
    if (t.type == DType::f32) return reinterpret_cast<const float*>(p);
    to_f32(t.type, p, buf, n);
    return buf;
  }
  for (int64_t i = 0; i < n; ++i) buf[i] = load_elem(t.type, p + i * t.nb[0]);
  return buf;
}

void store_row_f32(const Tensor& t, uint8_t* p, const float* v, int64_t n) {
  if (reinterpret_cast<const uint8_t*>(v) == p) return;
  if (t.nb[0] == traits(t.type).unit_bytes) {
    from_f32(t.type, v, p, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store_elem(t.type, p + i * t.nb[0], v[i]);
}

}  // namespace weft::cpu
