// AVX-512 (F, BW, VL, DQ) attention loops: attn_tile.h over 16-float
// vectors. This file alone is compiled with those flags, so nothing in it
// may run unless attn_kernels_for(Level::avx512) found the features; as in
// simd_avx512.cpp everything is internal and the table constant-initialized.
#include <immintrin.h>

#include "avx512_diagnostics.h"
#include "attn_tile.h"

namespace weft::cpu {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static __m256 fold(V v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
  static V f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // 16 x 16: pairs of rows interleaved and pairs of pairs (as doubles)
  // within 128-bit lanes, as the AVX2 transpose; then each column's four
  // lanes (one per group of four rows) gathered by two rounds of lane
  // shuffles.
  static void transpose(V* r) {
    V t[16];
    for (int k = 0; k < 8; ++k) {
      t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    V u[16];  // u[4g + k]: rows 4g..4g+3, lane L holding column 4L + k
    for (int g = 0; g < 4; ++g) {
      u[4 * g] = pairs_lo(t[4 * g], t[4 * g + 2]);
      u[4 * g + 1] = pairs_hi(t[4 * g], t[4 * g + 2]);
      u[4 * g + 2] = pairs_lo(t[4 * g + 1], t[4 * g + 3]);
      u[4 * g + 3] = pairs_hi(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int k = 0; k < 4; ++k) {
      const V ab_even = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), ab_odd = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
      const V cd_even = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
      const V cd_odd = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
      r[k] = _mm512_shuffle_f32x4(ab_even, cd_even, 0x88);       // lane 0: column k
      r[8 + k] = _mm512_shuffle_f32x4(ab_even, cd_even, 0xDD);   // lane 2: column 8 + k
      r[4 + k] = _mm512_shuffle_f32x4(ab_odd, cd_odd, 0x88);     // lane 1: column 4 + k
      r[12 + k] = _mm512_shuffle_f32x4(ab_odd, cd_odd, 0xDD);    // lane 3: column 12 + k
    }
  }
  static V pairs_lo(V a, V b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
  static V pairs_hi(V a, V b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  }
};

constexpr AttnKernels kTable = make_attn_table<Avx512>("avx512");

}  // namespace

const AttnKernels& avx512_attn_table() { return kTable; }

}  // namespace weft::cpu
