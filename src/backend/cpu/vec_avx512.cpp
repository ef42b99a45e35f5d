// The AVX-512 (F, BW, VL, DQ) vector kernels of vec.h: the 16-lane wrapper
// over which vec_math.h is written, and the table. This file alone is
// compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq; nothing in it
// runs unless vec_kernels_for(Level::avx512) found those features. As in
// simd_avx512.cpp, everything is internal (vec_math.h is an anonymous
// namespace) and the table is constant-initialized.
#include <immintrin.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include "avx512_diagnostics.h"
#include "vec.h"

namespace weft::cpu {
namespace {

struct Avx512 {
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  using D = __m512d;
  using MD = __mmask8;
  static constexpr int N = 16;
  static constexpr int kNewtonSteps = 1;  // after rcp_estimate_d

  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static I set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  static F round(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static I cvt_i(F a) { return _mm512_cvtps_epi32(a); }
  static F as_f(I a) { return _mm512_castsi512_ps(a); }
  static I as_i(F a) { return _mm512_castps_si512(a); }
  static I addi(I a, I b) { return _mm512_add_epi32(a, b); }
  static I subi(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int k>
  static I srai(I a) {
    return _mm512_srai_epi32(a, k);
  }
  template <int k>
  static I srli(I a) {
    return _mm512_srli_epi32(a, k);
  }
  template <int k>
  static I slli(I a) {
    return _mm512_slli_epi32(a, k);
  }
  static F and_(F a, F b) { return _mm512_and_ps(a, b); }
  static F or_(F a, F b) { return _mm512_or_ps(a, b); }
  static F xor_(F a, F b) { return _mm512_xor_ps(a, b); }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static F select(M m, F t, F f) { return _mm512_mask_blend_ps(m, f, t); }
  static bool any(M m) { return m != 0; }
  // 1/a to 2^-14.
  static F rcp_estimate(F a) { return _mm512_rcp14_ps(a); }
  // Both halves hold the table, so any index (its low 4 bits) is defined.
  static F table8(const float* t) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(t)); }
  static F lookup8(F table, I idx) { return _mm512_permutexvar_ps(idx, table); }
  static F swap_pairs(F v) { return _mm512_permute_ps(v, 0xB1); }
  static I alternate_sign() { return _mm512_set1_epi64(static_cast<long long>(0x0000000080000000ULL)); }

  static void widen(F v, D& lo, D& hi) {
    lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
  }
  static F narrow(D lo, D hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
  }
  static D setd(double v) { return _mm512_set1_pd(v); }
  static D addd(D a, D b) { return _mm512_add_pd(a, b); }
  static D subd(D a, D b) { return _mm512_sub_pd(a, b); }
  static D muld(D a, D b) { return _mm512_mul_pd(a, b); }
  static D fmad(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static D mind(D a, D b) { return _mm512_min_pd(a, b); }
  static D maxd(D a, D b) { return _mm512_max_pd(a, b); }
  static D fnmad(D a, D b, D c) { return _mm512_fnmadd_pd(a, b, c); }
  static D roundd(D a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static D ord(D a, D b) { return _mm512_or_pd(a, b); }
  static D andnotd(D a, D b) { return _mm512_andnot_pd(a, b); }
  static MD ltd(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static D selectd(MD m, D t, D f) { return _mm512_mask_blend_pd(m, f, t); }
  static D shl52(D a) { return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(a), 52)); }
  // 1/d to 2^-14.
  static D rcp_estimate_d(D d) { return _mm512_rcp14_pd(d); }
  static double hsumd(D v) {
    const __m256d s = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    const __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
  }

  // vcvtph2ps quiets a signalling NaN; f16_to_f32 keeps it: clear the quiet
  // bit again where the input was one, so both give the same bits.
  static F load_f16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __mmask16 snan =
        _mm256_cmpgt_epu16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00)) &
        _mm256_testn_epi16_mask(h, _mm256_set1_epi16(0x0200));
    const F f = _mm512_cvtph_ps(h);
    return _mm512_mask_xor_ps(f, snan, f, _mm512_set1_ps(from_bits_zero_quiet()));
  }
  static float from_bits_zero_quiet() {
    const uint32_t b = 0x00400000u;
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  static void store_f16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static F load_bf16(const uint16_t* p) {
    return as_f(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  // As f32_to_bf16: (x + 0x7FFF + lsb) >> 16, NaN -> its top half with the quiet bit.
  static void store_bf16(uint16_t* p, F v) {
    const I x = as_i(v);
    const I lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), set1i(1));
    const I rounded = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(set1i(0x7FFF), lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, set1i(0x7FFFFFFF)), set1i(0x7F800000));
    const I quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), set1i(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet)));
  }
};

}  // namespace
}  // namespace weft::cpu

#include "vec_math.h"

namespace weft::cpu {
namespace {

constinit const VecKernels kAvx512 = Kernels<Avx512>::table("avx512");

}  // namespace

const VecKernels& avx512_vec_table() {
  return kAvx512;
}

}  // namespace weft::cpu
