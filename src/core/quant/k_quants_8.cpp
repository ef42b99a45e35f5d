// q8_K: the activation type the K-quant dot products take as their other
// operand. Not stored in model files; a float scale, 8-bit quants and the
// sums of each group of 16 quants (which the dot products use for the mins).
// Compiled with -ffp-contract=off (bit-exactness with ggml, see search.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "blocks.h"
#include "kernels.h"
#include "search.h"

namespace weft::quant {

void quantize_q8_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ8_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kSuperBlock;
    float max = 0;  // the value of largest magnitude, sign kept
    float amax = 0;
    for (int j = 0; j < kSuperBlock; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (!amax) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // -127 rather than -128 keeps every quant in [-127, 127] (ggml: the AVX
    // iq2_xxs dot product relies on it).
    const float iscale = -127.f / max;
    for (int j = 0; j < kSuperBlock; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < kSuperBlock / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void dequantize_q8_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ8_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    for (int j = 0; j < kSuperBlock; ++j) out[i * kSuperBlock + j] = x[i].d * x[i].qs[j];
  }
}

}  // namespace weft::quant
