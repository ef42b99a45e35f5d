// AVX2 kernels of qgemm.h: 8 weight rows (one per 32-bit lane) against up
// to 4 activation rows, each block of 32 values as 8 registers of weights
// times 4 activation bytes broadcast to every lane (qgemm_tile.h).
//
// maddubs multiplies unsigned by signed bytes into i16 pair sums that
// saturate past 32767, so the forms differ:
//   offset / min: weights 0..31 unsigned, activations signed (|x| <= 127):
//     four registers' pair sums stay under 4 * 2 * 31 * 128 = 31744, so
//     they add up in i16 before one madd to i32 (two per block);
//   sign8: weights any int8: |w| times sign(x, w), each register's pair
//     sums (up to 2 * 128 * 127) taken to i32 apart.
#include <immintrin.h>

#include "qgemm_tile.h"

namespace weft::cpu {
namespace {

inline __m256i load32(const void* p) {
  return _mm256_load_si256(static_cast<const __m256i*>(p));
}

struct Sign8 {
  static constexpr bool kMin = false;
  template <int NV>
  static void sums(const QPanelBlock& w, const QActCol* x, int64_t b, __m256i (&isum)[NV]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < NV; ++j) isum[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i wv = load32(w.q + 32 * k);
      const __m256i aw = _mm256_sign_epi8(wv, wv);
      for (int j = 0; j < NV; ++j) {
        const __m256i xs = _mm256_sign_epi8(broadcast4(x[j].q + 32 * b + 4 * k), wv);
        isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
      }
    }
  }
};

// Unsigned weights u = v + offset: sum(u * x) - offset * sum(x) (isum of
// the activations; 0 for the minimum types, whose u is v).
template <bool kMinTerm>
struct Unsigned5 {
  static constexpr bool kMin = kMinTerm;
  template <int NV>
  static void sums(const QPanelBlock& w, const QActCol* x, int64_t b, __m256i (&isum)[NV]) {
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i s16[NV];
      for (int j = 0; j < NV; ++j) s16[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int k = 4 * h; k < 4 * h + 4; ++k) {
        const __m256i wv = load32(w.q + 32 * k);
        for (int j = 0; j < NV; ++j)
          s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(wv, broadcast4(x[j].q + 32 * b + 4 * k)));
      }
      for (int j = 0; j < NV; ++j) {
        const __m256i s32 = _mm256_madd_epi16(s16[j], ones);
        isum[j] = h == 0 ? s32 : _mm256_add_epi32(isum[j], s32);
      }
    }
    if constexpr (!kMinTerm)
      for (int j = 0; j < NV; ++j) isum[j] = _mm256_sub_epi32(isum[j], _mm256_set1_epi32(x[j].isum[b]));
  }
};

constexpr QGemmKernel kAvx2{
    {qgemm_tile_any<Sign8>, qgemm_tile_any<Unsigned5<false>>, qgemm_tile_any<Unsigned5<true>>}, false, "avx2"};

}  // namespace

const QGemmKernel& avx2_qgemm_kernel() { return kAvx2; }

}  // namespace weft::cpu
