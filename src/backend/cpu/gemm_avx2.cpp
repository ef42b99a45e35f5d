// gemm()'s register tile at the AVX2 + FMA baseline: 16 rows of A (two
// ymm) by 6 columns of B, 12 accumulators of the 16 ymm registers. Per k:
// two loads of A, six broadcasts of B, twelve FMAs.
#include <immintrin.h>

#include "gemm.h"

namespace weft::cpu {
namespace {

constexpr int kMr = 16;
constexpr int kNr = 6;
constexpr int kPrefetchA = 8;  // k steps ahead (one line of A per step)

// Asks for the line holding a[i], which may lie past the end of the panel
// (a prefetch never faults; the address is formed as an integer, since
// pointer arithmetic past the end of an array is undefined).
void prefetch(const float* a, int64_t i) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(a) + i * sizeof(float)), _MM_HINT_T0);
}

// Lane masks of the first r rows of an 8-row half (r clamped to [0, 8]).
__m256i half_mask(int r) {
  alignas(32) static constexpr int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  r = r < 0 ? 0 : r > 8 ? 8 : r;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - r));
}

// NV live columns (1 <= NV <= kNr): edge tiles skip the padding columns.
template <int NV>
void tile_cols(int64_t kc, const float* a, const float* b, float* const* c, int64_t m0, int mv, bool accumulate) {
  // 12 accumulators, 2 A vectors and a broadcast fill the 16 registers, so
  // the row masks are made again for the stores. Every loop over columns is
  // unrolled (the pragmas): accumulators indexed in a loop GCC left rolled
  // would live in memory.
  __m256 acc0[NV], acc1[NV];
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    acc0[j] = accumulate ? _mm256_maskload_ps(c[j] + m0, half_mask(mv)) : _mm256_setzero_ps();
    acc1[j] = accumulate ? _mm256_maskload_ps(c[j] + m0 + 8, half_mask(mv - 8)) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    prefetch(a, kPrefetchA * kMr);
    const __m256 a0 = _mm256_load_ps(a), a1 = _mm256_load_ps(a + 8);
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      const __m256 bj = _mm256_broadcast_ss(b + j);
      acc0[j] = _mm256_fmadd_ps(a0, bj, acc0[j]);
      acc1[j] = _mm256_fmadd_ps(a1, bj, acc1[j]);
    }
    a += kMr;
    b += kNr;
  }
  const __m256i mask0 = half_mask(mv), mask1 = half_mask(mv - 8);
#pragma GCC unroll 16
  for (int j = 0; j < NV; ++j) {
    _mm256_maskstore_ps(c[j] + m0, mask0, acc0[j]);
    _mm256_maskstore_ps(c[j] + m0 + 8, mask1, acc1[j]);
  }
}

void tile(int64_t kc, const float* a, const float* b, float* const* c, int64_t m0, int mv, int nv, bool accumulate) {
  switch (nv) {
    case 1: return tile_cols<1>(kc, a, b, c, m0, mv, accumulate);
    case 2: return tile_cols<2>(kc, a, b, c, m0, mv, accumulate);
    case 3: return tile_cols<3>(kc, a, b, c, m0, mv, accumulate);
    case 4: return tile_cols<4>(kc, a, b, c, m0, mv, accumulate);
    case 5: return tile_cols<5>(kc, a, b, c, m0, mv, accumulate);
    default: return tile_cols<kNr>(kc, a, b, c, m0, mv, accumulate);
  }
}

constinit const GemmKernel kAvx2{kMr, kNr, tile, "avx2"};

}  // namespace

const GemmKernel& avx2_gemm_kernel() {
  return kAvx2;
}

}  // namespace weft::cpu
