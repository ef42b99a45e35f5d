// gemm()'s register tile at the AVX-512 level: 32 rows of A (two zmm) by 12
// columns of B, 24 accumulators of the 32 zmm registers. Per k: two loads of
// A, twelve broadcasts of B, 24 FMAs. This file alone is compiled with
// -mavx512f (as simd_avx512.cpp, whose ODR rules it follows: everything in
// an anonymous namespace, a constant-initialized table), so nothing in it
// runs unless gemm_kernel_for(Level::avx512) found the features.
//
// AVX512_BF16 and AVX512_FP16 are not used: VDPBF16PS would round the
// activations to bf16, and the weights are converted exactly while packing.
#include <immintrin.h>

#include "avx512_diagnostics.h"
#include "gemm.h"

namespace weft::cpu {
namespace {

constexpr int kMr = 32;
constexpr int kNr = 12;
// The A panel streams from L2: each k step asks for the lines kPrefetchA
// steps ahead (without it the tile runs at ~75% of its L1 speed).
constexpr int kPrefetchA = 8;

// Asks for the line holding a[i], which may lie past the end of the panel
// (a prefetch never faults; the address is formed as an integer, since
// pointer arithmetic past the end of an array is undefined).
void prefetch(const float* a, int64_t i) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(a) + i * sizeof(float)), _MM_HINT_T0);
}

__mmask16 rows_mask(int r) {
  r = r < 0 ? 0 : r > 16 ? 16 : r;
  return static_cast<__mmask16>((1u << r) - 1u);
}

// NV live columns (1 <= NV <= kNr): a tile at the right edge of C skips the
// padding columns' FMAs instead of computing and dropping them.
template <int NV>
void tile_cols(int64_t kc, const float* a, const float* b, float* const* c, int64_t m0, int mv, bool accumulate) {
  __m512 acc0[NV], acc1[NV];
  const __mmask16 mask0 = rows_mask(mv), mask1 = rows_mask(mv - 16);
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    acc0[j] = accumulate ? _mm512_maskz_loadu_ps(mask0, c[j] + m0) : _mm512_setzero_ps();
    acc1[j] = accumulate ? _mm512_maskz_loadu_ps(mask1, c[j] + m0 + 16) : _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    prefetch(a, kPrefetchA * kMr);
    prefetch(a, kPrefetchA * kMr + 16);
    const __m512 a0 = _mm512_load_ps(a), a1 = _mm512_load_ps(a + 16);
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      const __m512 bj = _mm512_set1_ps(b[j]);
      acc0[j] = _mm512_fmadd_ps(a0, bj, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(a1, bj, acc1[j]);
    }
    a += kMr;
    b += kNr;
  }
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    _mm512_mask_storeu_ps(c[j] + m0, mask0, acc0[j]);
    _mm512_mask_storeu_ps(c[j] + m0 + 16, mask1, acc1[j]);
  }
}

void tile(int64_t kc, const float* a, const float* b, float* const* c, int64_t m0, int mv, int nv, bool accumulate) {
  switch (nv) {
    case 1: return tile_cols<1>(kc, a, b, c, m0, mv, accumulate);
    case 2: return tile_cols<2>(kc, a, b, c, m0, mv, accumulate);
    case 3: return tile_cols<3>(kc, a, b, c, m0, mv, accumulate);
    case 4: return tile_cols<4>(kc, a, b, c, m0, mv, accumulate);
    case 5: return tile_cols<5>(kc, a, b, c, m0, mv, accumulate);
    case 6: return tile_cols<6>(kc, a, b, c, m0, mv, accumulate);
    case 7: return tile_cols<7>(kc, a, b, c, m0, mv, accumulate);
    case 8: return tile_cols<8>(kc, a, b, c, m0, mv, accumulate);
    case 9: return tile_cols<9>(kc, a, b, c, m0, mv, accumulate);
    case 10: return tile_cols<10>(kc, a, b, c, m0, mv, accumulate);
    case 11: return tile_cols<11>(kc, a, b, c, m0, mv, accumulate);
    default: return tile_cols<kNr>(kc, a, b, c, m0, mv, accumulate);
  }
}

constinit const GemmKernel kAvx512{kMr, kNr, tile, "avx512"};

}  // namespace

const GemmKernel& avx512_gemm_kernel() {
  return kAvx512;
}

}  // namespace weft::cpu
