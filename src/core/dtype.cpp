// Scalar reference conversions between f32 and the storage dtypes. The CPU
// backend has its own SIMD paths for hot loops; these define the results.
#include "weft/core/dtype.h"

#include "weft/core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace weft {
namespace {

static_assert(traits(DType::q8_0).unit_bytes == sizeof(BlockQ8_0) && traits(DType::q4_0).unit_bytes == sizeof(BlockQ4_0));

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds mant >> shift to nearest, ties to even.
uint32_t shift_round_even(uint32_t mant, int shift) {
  const uint32_t kept = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (kept & 1))) ? kept + 1 : kept;
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kQuantBlock; ++i) y[b].q[i] = static_cast<int8_t>(std::lround(xb[i] * id));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  constexpr int kHalf = kQuantBlock / 2;
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float m = 0.0f;  // the value of largest magnitude, sign kept
    for (int i = 0; i < kQuantBlock; ++i) {
      if (std::fabs(xb[i]) > std::fabs(m)) m = xb[i];
    }
    const float d = m / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    // ggml: MIN(15, (int8_t)(x * id + 8.5f)). Where d is so small (f32
    // subnormal) that 1/d overflows, x * id is infinite or NaN, and that cast
    // gives 0 on x86-64 (cvttss2si's "integer indefinite" 0x80000000 has a
    // zero low byte): level 0 for +inf as for -inf and NaN.
    auto level = [&](float v) {
      float l = std::floor(v * id + 8.5f);
      if (!(l >= 0.0f) || std::isinf(l)) l = 0.0f;
      return static_cast<uint8_t>(std::min(l, 15.0f));
    };
    for (int j = 0; j < kHalf; ++j) {
      y[b].q[j] = static_cast<uint8_t>(level(xb[j]) | (level(xb[j + kHalf]) << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQuantBlock; ++i) y[b * kQuantBlock + i] = x[b].q[i] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  constexpr int kHalf = kQuantBlock / 2;
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    float* yb = y + b * kQuantBlock;
    for (int j = 0; j < kHalf; ++j) {
      yb[j] = ((x[b].q[j] & 0xF) - 8) * d;
      yb[j + kHalf] = ((x[b].q[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (kDTypeTraits[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_gguf_id(uint32_t id) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (kDTypeTraits[i].gguf_id == id) return static_cast<DType>(i);
  }
  return std::nullopt;
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {  // f16 subnormal (or zero): value = m * 2^-24
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    return static_cast<uint16_t>(sign | shift_round_even(mant, 14 - e));
  }
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  return static_cast<uint16_t>(sign | shift_round_even((static_cast<uint32_t>(e) << 23) | mant, 13));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void to_f32(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f32:  // memmove: a received graph may place dst over src
      std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::f16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::bf16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::i32: {
      const auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n); return;
    case DType::q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n); return;
    default: dequantize_row(traits(t).gguf_id, src, dst, n); return;  // the other block types
  }
}

void from_f32(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::f32:  // memmove: a received graph may place dst over src
      std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::i32: {
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];  // saturate: out-of-range float-to-int is undefined
        d[i] = !(v == v) ? 0 : v >= 2147483520.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : static_cast<int32_t>(v);
      }
      return;
    }
    case DType::q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n); return;
    case DType::q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n); return;
    default: quantize_row_reference(traits(t).gguf_id, src, dst, n); return;  // the other block types
  }
}

}  // namespace weft
