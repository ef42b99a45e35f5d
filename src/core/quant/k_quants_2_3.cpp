// q2_K and q3_K: 256-value super-blocks of 16 groups of 16 values.
// Compiled with -ffp-contract=off (bit-exactness with ggml, see search.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "blocks.h"
#include "kernels.h"
#include "search.h"
#include "search_x8.h"
#include "weft/core/dtype.h"

namespace weft::quant {
namespace {

constexpr int kGroups = kSuperBlock / 16;

// Four 2-bit fields per byte: byte l of each 32-byte half holds values l,
// l + 32, l + 64 and l + 96 of that 128-value half, lowest bits first.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kSuperBlock; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// The signed 6-bit scale of group j of a q3_K block: low four bits in
// scales[0..7] (nibble j / 8), high two bits in scales[8 + j % 4].
int q3_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return (low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

void set_q3_scale(uint8_t* scales, int j, int biased) {  // biased = scale + 32, in [0, 63]
  if (j < 8) {
    scales[j] = static_cast<uint8_t>(biased & 0xF);
  } else {
    scales[j - 8] |= static_cast<uint8_t>((biased & 0xF) << 4);
  }
  scales[j % 4 + 8] |= static_cast<uint8_t>((biased >> 4) << (2 * (j / 4)));
}

void quantize_q2_K_block(const float* x, BlockQ2_K* y) {
  uint8_t L[kSuperBlock];
  float weights[kSuperBlock];
  float mins[kGroups];
  float scales[kGroups];
  constexpr float kMaxScale = 15.f;  // 4-bit scales and mins

  for (int v = 0; v < kSuperBlock; ++v) weights[v] = std::fabs(x[v]);
  static_assert(kGroups == 16, "two sets of eight lanes");
  for (int half = 0; half < 2; ++half)
    make_qkx2_quants_x8(16, 3, x + 128 * half, weights + 128 * half, L + 128 * half, scales + 8 * half,
                        mins + 8 * half, -0.5f, 0.1f, 15, true);
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kGroups; ++j) {
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  std::fill(y->scales, y->scales + kGroups, uint8_t{0});
  y->d = f32_to_f16(0.f);
  y->dmin = f32_to_f16(0.f);
  if (max_scale > 0) {
    const float iscale = kMaxScale / max_scale;
    for (int j = 0; j < kGroups; ++j) y->scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y->d = f32_to_f16(max_scale / kMaxScale);
  }
  if (max_min > 0) {
    const float iscale = kMaxScale / max_min;
    for (int j = 0; j < kGroups; ++j) y->scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
    y->dmin = f32_to_f16(max_min / kMaxScale);
  }
  // Requantize against the scales as stored.
  for (int j = 0; j < kGroups; ++j) {
    const float d = f16_to_f32(y->d) * (y->scales[j] & 0xF);
    if (!d) continue;
    const float dm = f16_to_f32(y->dmin) * (y->scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
    }
  }
  pack_2bit(L, y->qs);
}

void quantize_q3_K_block(const float* x, BlockQ3_K* y) {
  int8_t L[kSuperBlock];
  float scales[kGroups];

  float max_scale = 0;  // the scale of largest magnitude, sign kept
  float amax = 0;
  for (int j = 0; j < kGroups; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(y->scales, 0, sizeof y->scales);
  if (max_scale) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < kGroups; ++j) {
      const int l = std::clamp(nearest_int(iscale * scales[j]), -32, 31);
      set_q3_scale(y->scales, j, l + 32);
    }
    y->d = f32_to_f16(1 / iscale);
  } else {
    y->d = f32_to_f16(0.f);
  }
  // Requantize against the scales as stored; L becomes unsigned 3-bit.
  for (int j = 0; j < kGroups; ++j) {
    const float d = f16_to_f32(y->d) * q3_scale(y->scales, j);
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
  }
  // High bit of value j goes to bit j / 32 of hmask[j % 32].
  std::memset(y->hmask, 0, sizeof y->hmask);
  uint8_t low[kSuperBlock];
  for (int j = 0; j < kSuperBlock; ++j) {
    if (L[j] > 3) y->hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
    low[j] = static_cast<uint8_t>(L[j] > 3 ? L[j] - 4 : L[j]);
  }
  pack_2bit(low, y->qs);
}

}  // namespace

void quantize_q2_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ2_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) quantize_q2_K_block(in + i * kSuperBlock, &y[i]);
}

void dequantize_q2_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ2_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    float* y = out + i * kSuperBlock;
    // Value v: half h = v / 128, shift 2 * ((v % 128) / 32), byte (v % 32) of that half.
    for (int v = 0; v < kSuperBlock; ++v) {
      const uint8_t sc = x[i].scales[v / 16];
      const float dl = d * (sc & 0xF);
      const float ml = min * (sc >> 4);
      const int q = (x[i].qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
      y[v] = dl * q - ml;
    }
  }
}

void quantize_q3_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ3_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) quantize_q3_K_block(in + i * kSuperBlock, &y[i]);
}

void dequantize_q3_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ3_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d_all = f16_to_f32(x[i].d);
    float* y = out + i * kSuperBlock;
    for (int v = 0; v < kSuperBlock; ++v) {
      const float dl = d_all * q3_scale(x[i].scales, v / 16);
      const int low = (x[i].qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
      const bool high = x[i].hmask[v % 32] & (1 << (v / 32));
      y[v] = dl * (low - (high ? 0 : 4));
    }
  }
}

}  // namespace weft::quant
