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

inline constexpr int64_t kAttnKeyTile = 8;     // keys score_tile scores together: one vector of scores
inline constexpr int64_t kAttnHeadsTile = 16;  // keys score_heads scores together
inline constexpr int kAttnMaxHeads = 8;        // query heads scored and accumulated together

// The cache types of K and V rows, indexing AttnKernels::rows.
enum class AttnRow { f32, f16, q8_0 };
inline constexpr int kAttnRowTypes = 3;

struct AttnKernels {
  // out[p] = q . kt[p] for p < kAttnKeyTile, over d floats of each.
  void (*score_tile)(const float* q, const float* const* kt, int64_t d, float* out);
  // The same for several heads at once without sums across lanes: kT is
  // kAttnHeadsTile keys transposed (kT[i * kAttnHeadsTile + p] = k_p[i], by
  // ByRowType::transpose_keys), and for NC = index + 1 heads c,
  // s[c][p] = q[c] . k_p for p < kAttnHeadsTile. d a multiple of 16.
  void (*score_heads[kAttnMaxHeads])(const float* const* q, const float* kT, int64_t d, float* const* s);

  // For NC = index + 1 heads c: acc[c][e] += p[c][j0 + j] * v_j[e] over
  // e < dv and the rows j < n whose mask m[j0 + j] is not -inf (m may be
  // nullptr: every row); v_j is rows[j] in its cache type.
  using Accumulate = void (*)(float* const* p, const uint8_t* const* rows, const float* m, int64_t j0, int64_t n,
                              int64_t dv, float* const* acc);
  // The loops that read cache rows where they are, per cache type.
  struct ByRowType {
    // A row's n values as f32 (n a multiple of 32 for q8_0: d * q, exact):
    // the rows score_tile reads.
    void (*to_f32)(const uint8_t* row, float* dst, int64_t n);
    // kT as score_heads reads it from kAttnHeadsTile key rows of d values.
    void (*transpose_keys)(const uint8_t* const* rows, int64_t d, float* kT);
    Accumulate accumulate[kAttnMaxHeads];
  };
  ByRowType rows[kAttnRowTypes];  // indexed by AttnRow

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
