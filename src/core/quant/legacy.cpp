// q4_1, q5_0 and q5_1: 32 values per block, one scale (and for _1 a minimum).
// Compiled with -ffp-contract=off: `q * d + m` must round twice, as in ggml.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "blocks.h"
#include "kernels.h"
#include "weft/core/dtype.h"

namespace weft::quant {
namespace {

constexpr int kHalf = kLegacyBlock / 2;

struct MinMax {
  float min = FLT_MAX;
  float max = -FLT_MAX;
};

MinMax min_max(const float* x) {
  MinMax r;
  for (int j = 0; j < kLegacyBlock; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// The value of largest magnitude, sign kept (the first one on ties).
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kLegacyBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof v);
  return v;
}

// Low four bits of 5-bit quants a (value j) and b (value j + 16) in one
// byte; their fifth bits go to bits j and j + 16 of *qh.
uint8_t pack5(int j, uint8_t a, uint8_t b, uint32_t* qh) {
  *qh |= ((a & 0x10u) >> 4) << j;
  *qh |= ((b & 0x10u) >> 4) << (j + kHalf);
  return static_cast<uint8_t>((a & 0x0F) | ((b & 0x0F) << 4));
}

// The 5-bit quants of values j and j + 16.
int low5(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
}
int high5(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
}

}  // namespace

void quantize_q4_1(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ4_1*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kLegacyBlock;
    const MinMax mm = min_max(x);
    const float d = (mm.max - mm.min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mm.min);
    for (int j = 0; j < kHalf; ++j) {
      const float x0 = (x[j] - mm.min) * id;
      const float x1 = (x[j + kHalf] - mm.min) * id;
      const int q0 = std::min(15, static_cast<int>(x0 + 0.5f));  // truncation, as ggml's (int8_t) cast
      const int q1 = std::min(15, static_cast<int>(x1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_q4_1(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ4_1*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    float* y = out + i * kLegacyBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = (x[i].qs[j] & 0x0F) * d + m;
      y[j + kHalf] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

void quantize_q5_0(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ5_0*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kLegacyBlock;
    const float d = signed_absmax(x) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kHalf] * id;
      const auto q0 = static_cast<uint8_t>(std::min(31, static_cast<int>(x0 + 16.5f)));
      const auto q1 = static_cast<uint8_t>(std::min(31, static_cast<int>(x1 + 16.5f)));
      y[i].qs[j] = pack5(j, q0, q1, &qh);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void dequantize_q5_0(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ5_0*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    float* y = out + i * kLegacyBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = (low5(x[i].qs, qh, j) - 16) * d;
      y[j + kHalf] = (high5(x[i].qs, qh, j) - 16) * d;
    }
  }
}

void quantize_q5_1(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ5_1*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kLegacyBlock;
    const MinMax mm = min_max(x);
    const float d = (mm.max - mm.min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mm.min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const float x0 = (x[j] - mm.min) * id;
      const float x1 = (x[j + kHalf] - mm.min) * id;
      const auto q0 = static_cast<uint8_t>(x0 + 0.5f);  // at most 31: no clamp in ggml either
      const auto q1 = static_cast<uint8_t>(x1 + 0.5f);
      y[i].qs[j] = pack5(j, q0, q1, &qh);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void dequantize_q5_1(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ5_1*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float m = f16_to_f32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    float* y = out + i * kLegacyBlock;
    for (int j = 0; j < kHalf; ++j) {
      y[j] = low5(x[i].qs, qh, j) * d + m;
      y[j + kHalf] = high5(x[i].qs, qh, j) * d + m;
    }
  }
}

}  // namespace weft::quant
