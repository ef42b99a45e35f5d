// AVX2 activation quantizers of the quantized dot products (qdot.h): the
// same bytes as the scalar ones in qdot.cpp, for the AVX2 table
// (qdot_avx2.cpp) and as the baseline every level falls back to.
// _mm256_round_ps rounds half to even like nearbyint under the default
// rounding mode; maxima skip NaNs as std::max(amax, nan) does.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "qdot.h"

namespace weft::cpu {
namespace {

#define WEFT_INLINE [[gnu::always_inline]] inline

WEFT_INLINE __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// i32 sums of four products of unsigned bytes u and signed bytes s.
WEFT_INLINE __m256i dot_us(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

WEFT_INLINE float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// Lane-wise max of |v| over 8k floats at x; NaNs skipped (max_ps returns
// its second operand when either is NaN).
WEFT_INLINE __m256 abs_max(const float* x, int k) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < k; ++i) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), m);
  return m;
}

// Rounds the 32 floats at x times s to bytes at q: 0 outside [-127, 127]
// (NaN included), as the scalar quantizers.
WEFT_INLINE void round_to_bytes(const float* x, __m256 s, int8_t* q) {
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i v[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 r =
        _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 ok = _mm256_and_ps(_mm256_cmp_ps(r, lo, _CMP_GE_OQ), _mm256_cmp_ps(r, hi, _CMP_LE_OQ));
    v[k] = _mm256_cvtps_epi32(_mm256_and_ps(r, ok));
  }
  // The packs work within 128-bit lanes: 32-bit units come out as values
  // 0-3, 8-11, 16-19, 24-27, 4-7, ...; the permutation restores the order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The sums of each 16 quants of a q8_K block.
WEFT_INLINE void block_sums(BlockQ8K& y) {
  __m256i s[8];  // i32 sums of 4: lanes 0-3 of s[c] make group 2c, lanes 4-7 group 2c + 1
  for (int c = 0; c < 8; ++c) s[c] = dot_us(_mm256_set1_epi8(1), load32(y.qs + 32 * c));
  // [g0 g2 g4 g6 | g1 g3 g5 g7] and [g8 g10 g12 g14 | g9 ... g15], then interleaved.
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i c = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  const __m256i p = _mm256_packs_epi32(a, c);  // |sum| <= 16 * 127
  const __m128i even = _mm256_castsi256_si128(p), odd = _mm256_extracti128_si256(p, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.bsums), _mm_unpacklo_epi16(even, odd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.bsums + 8), _mm_unpackhi_epi16(even, odd));
}

}  // namespace

void quantize_q8_0_avx2(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    const float d = hmax(abs_max(x, 4)) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    round_to_bytes(x, _mm256_set1_ps(id), y[b].q);
  }
}

void quantize_q8_K_avx2(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ8K& blk = y[b];
    const float amax = hmax(abs_max(x, kSuperBlock / 8));
    if (amax == 0.0f || !std::isfinite(amax)) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    // The first value of largest magnitude, sign kept, as the scalar loop finds it.
    const __m256 target = _mm256_set1_ps(amax), sign = _mm256_set1_ps(-0.0f);
    float max = amax;
    for (int i = 0; i < kSuperBlock; i += 8) {
      const __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), target, _CMP_EQ_OQ);
      if (const int bits = _mm256_movemask_ps(eq); bits != 0) {
        max = x[i + __builtin_ctz(static_cast<unsigned>(bits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    for (int c = 0; c < kSuperBlock; c += 32) round_to_bytes(x + c, _mm256_set1_ps(iscale), blk.qs + c);
    block_sums(blk);
    blk.d = 1.0f / iscale;
  }
}

}  // namespace weft::cpu

#undef WEFT_INLINE
