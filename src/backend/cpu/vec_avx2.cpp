// The AVX2 (+FMA, F16C) vector kernels of vec.h: the 8-lane wrapper over
// which vec_math.h is written, the table, and the choice of level.
#include <immintrin.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "vec.h"

namespace weft::cpu {
namespace {

struct Avx2 {
  using F = __m256;
  using I = __m256i;
  using M = __m256;  // all-ones lanes
  using D = __m256d;
  using MD = __m256d;
  static constexpr int N = 8;
  static constexpr int kNewtonSteps = 2;  // after rcp_estimate_d

  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static I set1i(int32_t v) { return _mm256_set1_epi32(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  static F round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I cvt_i(F a) { return _mm256_cvtps_epi32(a); }
  static F as_f(I a) { return _mm256_castsi256_ps(a); }
  static I as_i(F a) { return _mm256_castps_si256(a); }
  static I addi(I a, I b) { return _mm256_add_epi32(a, b); }
  static I subi(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int k>
  static I srai(I a) {
    return _mm256_srai_epi32(a, k);
  }
  template <int k>
  static I srli(I a) {
    return _mm256_srli_epi32(a, k);
  }
  template <int k>
  static I slli(I a) {
    return _mm256_slli_epi32(a, k);
  }
  static F and_(F a, F b) { return _mm256_and_ps(a, b); }
  static F or_(F a, F b) { return _mm256_or_ps(a, b); }
  static F xor_(F a, F b) { return _mm256_xor_ps(a, b); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F select(M m, F t, F f) { return _mm256_blendv_ps(f, t, m); }
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  // 1/a to 1.5 * 2^-12 (0 beyond 2^126).
  static F rcp_estimate(F a) { return _mm256_rcp_ps(a); }
  static F table8(const float* t) { return _mm256_loadu_ps(t); }
  static F lookup8(F table, I idx) { return _mm256_permutevar8x32_ps(table, idx); }
  static F swap_pairs(F v) { return _mm256_permute_ps(v, 0xB1); }
  static I alternate_sign() { return _mm256_setr_epi32(INT_MIN, 0, INT_MIN, 0, INT_MIN, 0, INT_MIN, 0); }

  static void widen(F v, D& lo, D& hi) {
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  }
  static F narrow(D lo, D hi) { return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)); }
  static D setd(double v) { return _mm256_set1_pd(v); }
  static D addd(D a, D b) { return _mm256_add_pd(a, b); }
  static D subd(D a, D b) { return _mm256_sub_pd(a, b); }
  static D muld(D a, D b) { return _mm256_mul_pd(a, b); }
  static D fmad(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  static D mind(D a, D b) { return _mm256_min_pd(a, b); }
  static D maxd(D a, D b) { return _mm256_max_pd(a, b); }
  static D fnmad(D a, D b, D c) { return _mm256_fnmadd_pd(a, b, c); }
  static D roundd(D a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static D ord(D a, D b) { return _mm256_or_pd(a, b); }
  static D andnotd(D a, D b) { return _mm256_andnot_pd(a, b); }
  static MD ltd(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static D selectd(MD m, D t, D f) { return _mm256_blendv_pd(f, t, m); }
  static D shl52(D a) { return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(a), 52)); }
  // 1/d to 1.5 * 2^-12 (d a normal float's range).
  static D rcp_estimate_d(D d) { return _mm256_cvtps_pd(_mm_rcp_ps(_mm256_cvtpd_ps(d))); }
  static double hsumd(D v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }

  // vcvtph2ps quiets a signalling NaN; f16_to_f32 keeps it: clear the quiet
  // bit again where the input was one, so both give the same bits.
  static F load_f16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const I w = _mm256_cvtepu16_epi32(h);
    const I nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, set1i(0x7FFF)), set1i(0x7C00));
    const I quiet = _mm256_and_si256(w, set1i(0x0200));
    const I snan = _mm256_andnot_si256(_mm256_cmpeq_epi32(quiet, set1i(0x0200)), nan);
    return _mm256_andnot_ps(as_f(_mm256_and_si256(snan, set1i(0x00400000))), _mm256_cvtph_ps(h));
  }
  static void store_f16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static F load_bf16(const uint16_t* p) {
    return as_f(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  // As f32_to_bf16: (x + 0x7FFF + lsb) >> 16, NaN -> its top half with the quiet bit.
  static void store_bf16(uint16_t* p, F v) {
    const I x = as_i(v);
    const I lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), set1i(1));
    const I rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(set1i(0x7FFF), lsb)), 16);
    const I nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, set1i(0x7FFFFFFF)), set1i(0x7F800000));
    const I quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), set1i(0x40));
    const I r = _mm256_blendv_epi8(rounded, quiet, nan);
    const I packed = _mm256_packus_epi32(r, r);  // per 128-bit lane: r0-3 r0-3 | r4-7 r4-7
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
  }
};

}  // namespace
}  // namespace weft::cpu

#include "vec_math.h"

namespace weft::cpu {
namespace {

constinit const VecKernels kAvx2 = Kernels<Avx2>::table("avx2");

}  // namespace

const VecKernels& avx2_vec_table() {
  return kAvx2;
}

const VecKernels* vec_kernels_for(Level level) {
  if (dot_kernels_for(level) == nullptr) return nullptr;  // the same feature test
  return level == Level::avx512 ? &avx512_vec_table() : &avx2_vec_table();
}

const VecKernels& vec_kernels() {
  // The level dot_kernels() chose, WEFT_CPU_SIMD included.
  static const VecKernels* const chosen =
      &dot_kernels() == dot_kernels_for(Level::avx512) ? &avx512_vec_table() : &avx2_vec_table();
  return *chosen;
}

}  // namespace weft::cpu
