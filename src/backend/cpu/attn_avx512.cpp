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
  static __m256 fold(V v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
  static V f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

constexpr AttnKernels kTable = make_attn_table<Avx512>("avx512");

}  // namespace

const AttnKernels& avx512_attn_table() { return kTable; }

}  // namespace weft::cpu
