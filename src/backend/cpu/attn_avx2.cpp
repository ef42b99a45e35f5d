// AVX2 attention loops (attn_tile.h over 8-float vectors) and the choice of
// level.
#include <immintrin.h>

#include "attn_tile.h"

namespace weft::cpu {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static __m256 fold(V v) { return v; }
  static V f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // 8 x 8: pairs of rows interleaved, then pairs of pairs (as doubles),
  // then the 128-bit halves of rows 0-3 and 4-7 exchanged.
  static void transpose(V* r) {
    V t[8];
    for (int k = 0; k < 4; ++k) {
      t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    V u[8];  // u[4g + k]: rows 4g..4g+3 at columns k (low half) and 4 + k (high half)
    for (int g = 0; g < 2; ++g) {
      u[4 * g] = pairs_lo(t[4 * g], t[4 * g + 2]);
      u[4 * g + 1] = pairs_hi(t[4 * g], t[4 * g + 2]);
      u[4 * g + 2] = pairs_lo(t[4 * g + 1], t[4 * g + 3]);
      u[4 * g + 3] = pairs_hi(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int k = 0; k < 4; ++k) {
      r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
      r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
    }
  }
  static V pairs_lo(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
  static V pairs_hi(V a, V b) {
    return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b)));
  }
};

constexpr AttnKernels kTable = make_attn_table<Avx2>("avx2");

}  // namespace

const AttnKernels& avx2_attn_table() { return kTable; }

const AttnKernels* attn_kernels_for(Level level) {
  if (dot_kernels_for(level) == nullptr) return nullptr;  // the same feature test
  return level == Level::avx512 ? &avx512_attn_table() : &avx2_attn_table();
}

const AttnKernels& attn_kernels() {
  // The level dot_kernels() chose, WEFT_CPU_SIMD included.
  static const AttnKernels* const chosen =
      &dot_kernels() == dot_kernels_for(Level::avx512) ? &avx512_attn_table() : &avx2_attn_table();
  return *chosen;
}

}  // namespace weft::cpu
