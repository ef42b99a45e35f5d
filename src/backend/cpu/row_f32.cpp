// f32 row staging (row_f32.h).
#include "row_f32.h"

#include <cstring>

#include "vec.h"
#include "weft/core/dtype.h"

namespace weft::cpu {

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

void to_f32_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f16: return vec_kernels().f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
    case DType::bf16: return vec_kernels().bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
    default: return to_f32(t, src, dst, n);
  }
}

void from_f32_row(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::f16: return vec_kernels().f32_to_f16(src, static_cast<uint16_t*>(dst), n);
    case DType::bf16: return vec_kernels().f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
    default: return from_f32(t, src, dst, n);
  }
}

const float* load_row_f32(const Tensor& t, const uint8_t* p, int64_t n, float* buf) {
  const size_t unit = traits(t.type).unit_bytes;
  if (t.nb[0] == unit) {
    if (t.type == DType::f32) return reinterpret_cast<const float*>(p);
    to_f32_row(t.type, p, buf, n);
    return buf;
  }
  for (int64_t i = 0; i < n; ++i) buf[i] = load_elem(t.type, p + i * t.nb[0]);
  return buf;
}

void store_row_f32(const Tensor& t, uint8_t* p, const float* v, int64_t n) {
  if (reinterpret_cast<const uint8_t*>(v) == p) return;
  if (t.nb[0] == traits(t.type).unit_bytes) {
    from_f32_row(t.type, v, p, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store_elem(t.type, p + i * t.nb[0], v[i]);
}

}  // namespace weft::cpu
