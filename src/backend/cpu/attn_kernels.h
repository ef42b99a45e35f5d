// The inner loops of flash_attn (ops_attention.cpp), one table per
// instruction-set level, chosen once at run time with the same rule as the
// dot products (simd.h: AVX-512 when the CPU has it, unless
// WEFT_CPU_SIMD=avx2). The op's driver deals out the work, keeps the scores
// and runs the softmax; these score key tiles, accumulate value tiles and
// turn cache rows into f32. Results differ between levels by rounding only
// (the order of f32 sums).
#pragma once

#include <cstdint>

#include "simd.h"

namespace weft::cpu {

inline constexpr int64_t kAttnKeyTile = 8;  // keys scored together: one vector of scores
inline constexpr int kAttnMaxHeads = 8;     // query heads accumulated together

struct AttnKernels {
  // out[p] = q . kt[p] for p < kAttnKeyTile, over d floats of each.
  void (*score_tile)(const float* q, const float* const* kt, int64_t d, float* out);
  // For NC = index + 1 heads c: acc[c][e] += p[c][j0 + j] * vt[j][e] over
  // e < dv and the rows j < n whose mask m[j0 + j] is not -inf (m may be
  // nullptr: every row).
  void (*accumulate[kAttnMaxHeads])(float* const* p, const float* const* vt, const float* m, int64_t j0, int64_t n,
                                     int64_t dv, float* const* acc);
  // n values of an f16 row, or of a q8_0 row (n a multiple of 32: d * q,
  // exact in f32), as f32 at dst.
  void (*f16_row)(const uint16_t* src, float* dst, int64_t n);
  void (*q8_0_row)(const uint8_t* src, float* dst, int64_t n);
  const char* name;  // "avx2", "avx512"
};

// The table at the level dot_kernels() uses (WEFT_CPU_SIMD included).
const AttnKernels& attn_kernels();
// The table of one level, or nullptr when this CPU cannot run it.
const AttnKernels* attn_kernels_for(Level level);

// Per-level tables (attn_avx2.cpp, attn_avx512.cpp).
const AttnKernels& avx2_attn_table();
const AttnKernels& avx512_attn_table();

}  // namespace weft::cpu
