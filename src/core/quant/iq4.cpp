// iq4_nl and iq4_xs: 4-bit indices into the 16 non-linear levels kIq4Levels,
// per 32-value group scaled by an f16 (iq4_nl) or by a 6-bit scale under the
// super-block's f16 (iq4_xs). The quantizer is ggml's quantize_row_iq4_nl_impl
// without importance weights and with ntry = 7, as llama-quantize runs it for
// both types. Compiled with -ffp-contract=off (see search.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "blocks.h"
#include "kernels.h"
#include "search.h"
#include "weft/core/dtype.h"

namespace weft::quant {
namespace {

constexpr int kGroup = 32;
constexpr int kTries = 7;  // scales tried either side of the first guess
constexpr float kGroupMaxEps = 1e-15f;

int level_index(float x) {
  return best_index_int8(16, kIq4Levels, x);
}

// The least-squares scale of one group (weights x^2) for the best of the
// levels chosen at 2 * kTries + 2 candidate scales; 0 for an all-zero group.
float best_group_scale(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  // Sums of w * q * x and w * q * q with the levels chosen at inverse scale id.
  auto fit = [&](float id, float* sumqx, float* sumq2) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < kGroup; ++j) {
      const float q = kIq4Levels[level_index(id * x[j])];
      const float w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1 / (-max / kIq4Levels[0]), &sumqx, &sumq2);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    fit((itry + kIq4Levels[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Byte j of each 16-byte group holds the indices of values j (low nibble)
// and j + 16 (high nibble).
void pack_indices(const uint8_t* L, int nvalues, uint8_t* qs) {
  for (int g = 0; g < nvalues / kGroup; ++g) {
    for (int j = 0; j < 16; ++j) qs[16 * g + j] = static_cast<uint8_t>(L[32 * g + j] | (L[32 * g + 16 + j] << 4));
  }
}

void quantize_iq4_xs_block(const float* x, BlockIq4Xs* y) {
  constexpr int kGroups = kSuperBlock / kGroup;
  float scales[kGroups];
  float max_scale = 0, amax_scale = 0;  // the scale of largest magnitude, sign kept
  for (int ib = 0; ib < kGroups; ++ib) {
    scales[ib] = best_group_scale(x + kGroup * ib);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32;
  y->d = f32_to_f16(d);
  const float id = d ? 1 / d : 0.f;
  y->scales_h = 0;
  uint8_t L[kSuperBlock];
  for (int ib = 0; ib < kGroups; ++ib) {
    const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
    const float dl = d * l;  // the unrounded d, as ggml does
    const float idl = dl ? 1 / dl : 0.f;
    for (int j = 0; j < kGroup; ++j) L[kGroup * ib + j] = static_cast<uint8_t>(level_index(idl * x[kGroup * ib + j]));
    const int biased = l + 32;
    if (ib % 2 == 0) {
      y->scales_l[ib / 2] = static_cast<uint8_t>(biased & 0xF);
    } else {
      y->scales_l[ib / 2] |= static_cast<uint8_t>((biased & 0xF) << 4);
    }
    y->scales_h |= static_cast<uint16_t>((biased >> 4) << (2 * ib));
  }
  pack_indices(L, kSuperBlock, y->qs);
}

}  // namespace

void quantize_iq4_nl(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockIq4Nl*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float* x = in + i * kLegacyBlock;
    const float scale = best_group_scale(x);
    y[i].d = f32_to_f16(scale);
    const float id = scale ? 1 / scale : 0;  // the unrounded scale, as ggml does
    uint8_t L[kLegacyBlock];
    for (int j = 0; j < kLegacyBlock; ++j) L[j] = static_cast<uint8_t>(level_index(id * x[j]));
    pack_indices(L, kLegacyBlock, y[i].qs);
  }
}

void dequantize_iq4_nl(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockIq4Nl*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    float* y = out + i * kLegacyBlock;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4Levels[x[i].qs[j] & 0xF];
      y[j + 16] = d * kIq4Levels[x[i].qs[j] >> 4];
    }
  }
}

void quantize_iq4_xs(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockIq4Xs*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) quantize_iq4_xs_block(in + i * kSuperBlock, &y[i]);
}

void dequantize_iq4_xs(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockIq4Xs*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int ib = 0; ib < kSuperBlock / kGroup; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * (ls - 32);
      const uint8_t* qs = x[i].qs + 16 * ib;
      float* y = out + i * kSuperBlock + kGroup * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4Levels[qs[j] & 0xF];
        y[j + 16] = dl * kIq4Levels[qs[j] >> 4];
      }
    }
  }
}

}  // namespace weft::quant
