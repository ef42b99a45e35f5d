// mxfp4: 32 E2M1 codes under one E8M0 scale byte (blocks.h). The quantizer
// is ggml's quantize_row_mxfp4_ref operation by operation: the exponent
// comes from log2f of the block's largest magnitude (glibc's, as ggml's
// build calls it: within an ulp below a power of two the rounded logarithm
// can reach the power, and the exponent then follows it), and each value takes
// the first of the codes nearest to it. Compiled with -ffp-contract=off
// (see search.cpp), although no product here is inexact.
#include <cmath>
#include <cstring>

#include "blocks.h"
#include "kernels.h"

namespace weft::quant {
namespace {

// 2^(e - 128): half of E8M0's 2^(e - 127), the factor kMxfp4Levels (twice
// E2M1) needs. e = 0 and 1 give the subnormals 2^-128 and 2^-127.
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// ggml computes (uint8_t)(floorf(log2f(amax)) - 2 + 127). Below 2^-125 the
// float is negative, which C leaves undefined; ggml's x86 builds convert
// through a 32-bit integer and keep its low byte, giving a huge scale under
// which every code is 0. weft does the same, defined: int, then modulo 256.
uint8_t scale_byte(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(amax)) - 2 + 127;
  return static_cast<uint8_t>(static_cast<int>(e));
}

// The first code whose level times d is nearest to x (ggml best_index_mxfp4):
// ties keep the lower code, so -0 (8) is never chosen over +0 (0).
int nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Levels[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Levels[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void quantize_mxfp4(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockMxfp4*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kLegacyBlock;
    float amax = 0.0f;
    for (int j = 0; j < kLegacyBlock; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    }
    y[i].e = scale_byte(amax);
    const float d = e8m0_half(y[i].e);
    for (int j = 0; j < 16; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest_code(x[j], d) | (nearest_code(x[j + 16], d) << 4));
  }
}

void dequantize_mxfp4(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockMxfp4*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = e8m0_half(x[i].e);
    float* y = out + i * kLegacyBlock;
    for (int j = 0; j < 16; ++j) {
      y[j] = kMxfp4Levels[x[i].qs[j] & 0xF] * d;
      y[j + 16] = kMxfp4Levels[x[i].qs[j] >> 4] * d;
    }
  }
}

}  // namespace weft::quant
