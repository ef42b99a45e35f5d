// q4_K, q5_K (8 groups of 32 values, 6-bit scales and mins) and q6_K (16
// groups of 16 values, 8-bit signed scales) in 256-value super-blocks.
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

constexpr int kGroups32 = kSuperBlock / 32;
constexpr int kGroups16 = kSuperBlock / 16;
constexpr float kGroupMaxEps = 1e-15f;  // ggml GROUP_MAX_EPS

// The shared front half of q4_K and q5_K: per group a scale and minimum by
// make_qkx2_quants (weights |x| + rms of the group), quantized to 6 bits
// under the super-block's d and dmin; then every value requantized against
// the scales as stored. Writes d, dmin and scales of the block; L gets the
// levels in [0, nmax].
template <typename Block>
void quantize_scales_and_levels(const float* x, int nmax, float rmin, float rdelta, int nstep, Block* y, uint8_t* L) {
  float weights[kSuperBlock];
  float mins[kGroups32];
  float scales[kGroups32];
  for (int j = 0; j < kGroups32; ++j) {
    const float* xg = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(xg[l]);
  }
  static_assert(kGroups32 == 8, "one group a lane");
  make_qkx2_quants_x8(32, nmax, x, weights, L, scales, mins, rmin, rdelta, nstep, false);
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kGroups32; ++j) {
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y->scales, 0, sizeof y->scales);
  for (int j = 0; j < kGroups32; ++j) {
    // uint8_t first, as ggml assigns the int to a uint8_t before clamping.
    const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    set_scale_min_k4(j, ls, lm, y->scales);
  }
  y->d = f32_to_f16(max_scale / 63.f);
  y->dmin = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < kGroups32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y->scales, &sc, &m);
    const float d = f16_to_f32(y->d) * sc;
    if (!d) continue;
    const float dm = f16_to_f32(y->dmin) * m;
    levels_with_min_x8(32, x + 32 * j, d, dm, nmax, L + 32 * j);
  }
}

void quantize_q6_K_block(const float* x, BlockQ6_K* y) {
  int8_t L[kSuperBlock];
  float scales[kGroups16];
  float max_scale = 0;  // the scale of largest magnitude, sign kept
  float max_abs_scale = 0;
  make_qx_quants_x8(16, 32, x, L, scales);  // groups 0..7, then 8..15
  make_qx_quants_x8(16, 32, x + 128, L + 128, scales + 8);
  for (int ib = 0; ib < kGroups16; ++ib) {
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, sizeof *y);
    return;
  }
  const float iscale = -128.f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < kGroups16; ++ib) {
    y->scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  }
  for (int j = 0; j < kGroups16; ++j) {
    const float d = f16_to_f32(y->d) * y->scales[j];
    if (!d) continue;
    levels_symmetric_x8(16, x + 16 * j, d, 32, L + 16 * j);
  }
  // Per 128-value half: ql byte l holds values l (low) and l + 64 (high),
  // byte l + 32 values l + 32 and l + 96; qh byte l their top two bits.
  for (int h = 0; h < 2; ++h) {
    const int8_t* Lh = L + 128 * h;
    uint8_t* ql = y->ql + 64 * h;
    uint8_t* qh = y->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                   ((Lh[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_q4_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ4_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t L[kSuperBlock];
    quantize_scales_and_levels(in + i * kSuperBlock, 15, -1.f, 0.1f, 20, &y[i], L);
    // Per 64 values: byte l holds value l (low nibble) and l + 32 (high).
    for (int j = 0; j < kSuperBlock; j += 64) {
      for (int l = 0; l < 32; ++l) y[i].qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void dequantize_q4_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ4_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    float* y = out + i * kSuperBlock;
    for (int j = 0; j < kGroups32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      const float dl = d * sc;
      const float ml = min * m;
      const uint8_t* q = x[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * ((q[l] >> shift) & 0xF) - ml;
    }
  }
}

void quantize_q5_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ5_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t L[kSuperBlock];
    quantize_scales_and_levels(in + i * kSuperBlock, 31, -0.5f, 0.1f, 15, &y[i], L);
    // As q4_K for the low four bits; the fifth bit of value v goes to bit
    // v / 32 of qh[v % 32].
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int v = 0; v < kSuperBlock; ++v) {
      if (L[v] > 15) y[i].qh[v % 32] |= static_cast<uint8_t>(1 << (v / 32));
    }
    for (int j = 0; j < kSuperBlock; j += 64) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 2 + l] = static_cast<uint8_t>((L[j + l] & 0xF) | ((L[j + l + 32] & 0xF) << 4));
      }
    }
  }
}

void dequantize_q5_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ5_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    float* y = out + i * kSuperBlock;
    for (int j = 0; j < kGroups32; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      const float dl = d * sc;
      const float ml = min * m;
      const uint8_t* ql = x[i].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int high = (x[i].qh[l] >> j) & 1;
        y[32 * j + l] = dl * (((ql[l] >> shift) & 0xF) + 16 * high) - ml;
      }
    }
  }
}

void quantize_q6_K(const float* in, void* blocks, int64_t nblocks) {
  auto* y = static_cast<BlockQ6_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) quantize_q6_K_block(in + i * kSuperBlock, &y[i]);
}

void dequantize_q6_K(const void* blocks, float* out, int64_t nblocks) {
  const auto* x = static_cast<const BlockQ6_K*>(blocks);
  for (int64_t i = 0; i < nblocks; ++i) {
    const float d = f16_to_f32(x[i].d);
    float* y = out + i * kSuperBlock;
    for (int v = 0; v < kSuperBlock; ++v) {
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;  // half, quarter, byte
      const int low = (x[i].ql[64 * h + l + 32 * (k & 1)] >> (4 * (k / 2))) & 0xF;
      const int high = (x[i].qh[32 * h + l] >> (2 * k)) & 3;
      const int q = (low | (high << 4)) - 32;
      y[v] = d * x[i].scales[v / 16] * q;
    }
  }
}

}  // namespace weft::quant
