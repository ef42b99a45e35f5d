// The attention inner loops (attn_kernels.h) written once over a vector
// type S, for attn_avx2.cpp and attn_avx512.cpp only: each includes this
// with its own S, compiled for its level, so everything here is in an
// anonymous namespace (no symbol is shared between levels) and uses nothing
// inline from a shared header but the intrinsics.
//
// S provides: V (the vector), kWidth (floats per V), load(p),
// store(p, v), set1(x), mul(a, b), fmadd(a, b, c), fold(v) (the lanes' partial sums
// as 8 floats: v itself, or its two halves added), f16(p) (kWidth halves)
// and i8(p) (kWidth signed bytes) as floats.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "attn_kernels.h"

namespace weft::cpu {
namespace {

// The eight sums of a[0..7] as one vector (lane p = sum of a[p]'s lanes).
inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// A scalar fused multiply-add without <cmath> (whose inline std::fma a
// sanitized build may emit out of line, shared between levels).
inline float fma1(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// f16 to f32 of one value by F16C (every level here has it).
inline float half1(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

template <class S>
void score_tile(const float* q, const float* const* kt, int64_t d, float* out) {
  constexpr int64_t W = S::kWidth;
  const int64_t dw = d / W * W;
  if (dw == 0) {
    for (int64_t p = 0; p < kAttnKeyTile; ++p) out[p] = 0.0f;
  } else {
    // The first products start the sums: a zeroed array of accumulators
    // became a memset through the stack (rep stos) that cost more than the
    // products of a 64-value head.
    const typename S::V q0 = S::load(q);
    typename S::V acc[kAttnKeyTile];
    for (int64_t p = 0; p < kAttnKeyTile; ++p) acc[p] = S::mul(q0, S::load(kt[p]));
    for (int64_t i = W; i < dw; i += W) {
      const typename S::V qv = S::load(q + i);
      for (int64_t p = 0; p < kAttnKeyTile; ++p) acc[p] = S::fmadd(qv, S::load(kt[p] + i), acc[p]);
    }
    __m256 folded[kAttnKeyTile];
    for (int64_t p = 0; p < kAttnKeyTile; ++p) folded[p] = S::fold(acc[p]);
    _mm256_storeu_ps(out, reduce8(folded));
  }
  for (int64_t i = dw; i < d; ++i)
    for (int64_t p = 0; p < kAttnKeyTile; ++p) out[p] = fma1(q[i], kt[p][i], out[p]);
}

template <class S, int NC>
void accumulate_tile(float* const* p, const float* const* vt, const float* m, int64_t j0, int64_t n, int64_t dv,
                     float* const* acc) {
  constexpr int64_t W = S::kWidth;
  const int64_t dw = dv / W * W;
  for (int64_t e = 0; e < dw; e += W) {
    typename S::V a[NC];
    for (int c = 0; c < NC; ++c) a[c] = S::load(acc[c] + e);
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -__builtin_inff()) continue;
      const typename S::V v = S::load(vt[j] + e);
      for (int c = 0; c < NC; ++c) a[c] = S::fmadd(S::set1(p[c][j0 + j]), v, a[c]);
    }
    for (int c = 0; c < NC; ++c) S::store(acc[c] + e, a[c]);
  }
  for (int64_t e = dw; e < dv; ++e)
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -__builtin_inff()) continue;
      for (int c = 0; c < NC; ++c) acc[c][e] = fma1(p[c][j0 + j], vt[j][e], acc[c][e]);
    }
}

template <class S>
void f16_row(const uint16_t* src, float* dst, int64_t n) {
  constexpr int64_t W = S::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(dst + i, S::f16(src + i));
  for (; i < n; ++i) dst[i] = half1(src[i]);
}

// q8_0 blocks: a 2-byte f16 scale, then 32 signed bytes.
template <class S>
void q8_0_row(const uint8_t* src, float* dst, int64_t n) {
  constexpr int64_t W = S::kWidth;
  constexpr int64_t kBlock = 32, kBlockBytes = 34;
  for (int64_t b = 0; b < n / kBlock; ++b, src += kBlockBytes) {
    uint16_t d16;
    std::memcpy(&d16, src, sizeof d16);
    const typename S::V d = S::set1(half1(d16));
    for (int64_t e = 0; e < kBlock; e += W)
      S::store(dst + b * kBlock + e, S::mul(d, S::i8(reinterpret_cast<const int8_t*>(src + 2 + e))));
  }
}

template <class S>
constexpr AttnKernels make_attn_table(const char* name) {
  return AttnKernels{score_tile<S>,
                     {accumulate_tile<S, 1>, accumulate_tile<S, 2>, accumulate_tile<S, 3>, accumulate_tile<S, 4>,
                      accumulate_tile<S, 5>, accumulate_tile<S, 6>, accumulate_tile<S, 7>, accumulate_tile<S, 8>},
                     f16_row<S>,
                     q8_0_row<S>,
                     name};
}

}  // namespace
}  // namespace weft::cpu
