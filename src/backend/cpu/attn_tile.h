// The attention inner loops (attn_kernels.h) written once over a vector
// type S, for attn_avx2.cpp and attn_avx512.cpp only: each includes this
// with its own S, compiled for its level, so everything here is in an
// anonymous namespace (no symbol is shared between levels) and uses nothing
// inline from a shared header but the intrinsics.
//
// S provides: V (the vector), kWidth (floats per V), load(p),
// store(p, v), set1(x), add(a, b), mul(a, b), fmadd(a, b, c), fold(v) (the lanes' partial sums
// as 8 floats: v itself, or its two halves added), f16(p) (kWidth halves)
// and i8(p) (kWidth signed bytes) as floats, and transpose(r) (r[0..kWidth)
// as the rows of a square, in place).
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

// A K or V row of its cache type: kWidth values from element e (a multiple
// of kWidth; for q8_0 inside one 32-value block, as 32 is a multiple of
// every width), and one value.
template <class S>
struct RowF32 {
  static typename S::V load(const uint8_t* row, int64_t e) { return S::load(reinterpret_cast<const float*>(row) + e); }
  static float one(const uint8_t* row, int64_t e) {
    float x;
    std::memcpy(&x, row + e * 4, sizeof x);
    return x;
  }
};
template <class S>
struct RowF16 {
  static typename S::V load(const uint8_t* row, int64_t e) { return S::f16(reinterpret_cast<const uint16_t*>(row) + e); }
  static float one(const uint8_t* row, int64_t e) {
    uint16_t h;
    std::memcpy(&h, row + e * 2, sizeof h);
    return half1(h);
  }
};
template <class S>
struct RowQ8 {  // blocks of a 2-byte f16 scale and 32 signed bytes
  static const uint8_t* block(const uint8_t* row, int64_t e) { return row + e / 32 * 34; }
  static float scale(const uint8_t* b) {
    uint16_t d16;
    std::memcpy(&d16, b, sizeof d16);
    return half1(d16);
  }
  static typename S::V load(const uint8_t* row, int64_t e) {
    const uint8_t* b = block(row, e);
    return S::mul(S::set1(scale(b)), S::i8(reinterpret_cast<const int8_t*>(b + 2 + e % 32)));
  }
  static float one(const uint8_t* row, int64_t e) {
    const uint8_t* b = block(row, e);
    return scale(b) * static_cast<float>(static_cast<int8_t>(b[2 + e % 32]));
  }
};

// Rows converted on the way into the transpose: no f32 copy of the tile.
template <class S, class R>
void transpose_keys(const uint8_t* const* rows, int64_t d, float* kT) {
  constexpr int64_t W = S::kWidth;
  for (int64_t i0 = 0; i0 < d; i0 += W)
    for (int64_t p0 = 0; p0 < kAttnHeadsTile; p0 += W) {
      typename S::V r[W];
      for (int64_t p = 0; p < W; ++p) r[p] = R::load(rows[p0 + p], i0);
      S::transpose(r);
      for (int64_t t = 0; t < W; ++t) S::store(kT + (i0 + t) * kAttnHeadsTile + p0, r[t]);
    }
}

// Independent chains of FMAs over transposed key rows, each row loaded once
// for all NC heads; the q values are broadcast from memory. With few heads
// each head's sum is split over kChains chains (alternate key values), so
// that about eight FMAs are in flight to hide their latency.
template <class S, int NC>
void score_heads(const float* const* q, const float* kT, int64_t d, float* const* s) {
  constexpr int64_t W = S::kWidth;
  constexpr int64_t kChains = NC >= 5 ? 1 : NC >= 3 ? 2 : 8 / NC;  // d is a multiple of 16 >= kChains
  for (int64_t p0 = 0; p0 < kAttnHeadsTile; p0 += W) {
    typename S::V acc[kChains][NC];
    for (int64_t ch = 0; ch < kChains; ++ch) {
      const typename S::V k0 = S::load(kT + ch * kAttnHeadsTile + p0);
      for (int c = 0; c < NC; ++c) acc[ch][c] = S::mul(S::set1(q[c][ch]), k0);
    }
    for (int64_t i = kChains; i < d; i += kChains)
      for (int64_t ch = 0; ch < kChains; ++ch) {
        const typename S::V kv = S::load(kT + (i + ch) * kAttnHeadsTile + p0);
        for (int c = 0; c < NC; ++c) acc[ch][c] = S::fmadd(S::set1(q[c][i + ch]), kv, acc[ch][c]);
      }
    for (int c = 0; c < NC; ++c) {
      typename S::V sum = acc[0][c];
      for (int64_t ch = 1; ch < kChains; ++ch) sum = S::add(sum, acc[ch][c]);
      S::store(s[c] + p0, sum);
    }
  }
}

// Value rows read (and converted) where they are, once per vector of
// outputs for all NC heads.
template <class S, class R, int NC>
void accumulate_tile(float* const* p, const uint8_t* const* rows, const float* m, int64_t j0, int64_t n, int64_t dv,
                     float* const* acc) {
  constexpr int64_t W = S::kWidth;
  const int64_t dw = dv / W * W;
  for (int64_t e = 0; e < dw; e += W) {
    typename S::V a[NC];
    for (int c = 0; c < NC; ++c) a[c] = S::load(acc[c] + e);
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -__builtin_inff()) continue;
      const typename S::V v = R::load(rows[j], e);
      for (int c = 0; c < NC; ++c) a[c] = S::fmadd(S::set1(p[c][j0 + j]), v, a[c]);
    }
    for (int c = 0; c < NC; ++c) S::store(acc[c] + e, a[c]);
  }
  for (int64_t e = dw; e < dv; ++e)
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -__builtin_inff()) continue;
      const float v = R::one(rows[j], e);
      for (int c = 0; c < NC; ++c) acc[c][e] = fma1(p[c][j0 + j], v, acc[c][e]);
    }
}

// A row's n values as f32 (the rows score_tile reads), by the same loaders.
template <class S, class R>
void row_to_f32(const uint8_t* row, float* dst, int64_t n) {
  constexpr int64_t W = S::kWidth;
  int64_t e = 0;
  for (; e + W <= n; e += W) S::store(dst + e, R::load(row, e));
  for (; e < n; ++e) dst[e] = R::one(row, e);
}

template <class S, class R>
constexpr AttnKernels::Accumulate accumulate_for(int nc) {
  constexpr AttnKernels::Accumulate all[kAttnMaxHeads] = {
      accumulate_tile<S, R, 1>, accumulate_tile<S, R, 2>, accumulate_tile<S, R, 3>, accumulate_tile<S, R, 4>,
      accumulate_tile<S, R, 5>, accumulate_tile<S, R, 6>, accumulate_tile<S, R, 7>, accumulate_tile<S, R, 8>};
  return all[nc - 1];
}

template <class S, class R>
constexpr AttnKernels::ByRowType by_row_type() {
  AttnKernels::ByRowType t{row_to_f32<S, R>, transpose_keys<S, R>, {}};
  for (int nc = 1; nc <= kAttnMaxHeads; ++nc) t.accumulate[nc - 1] = accumulate_for<S, R>(nc);
  return t;
}

template <class S>
constexpr AttnKernels make_attn_table(const char* name) {
  return AttnKernels{score_tile<S>,
                     {score_heads<S, 1>, score_heads<S, 2>, score_heads<S, 3>, score_heads<S, 4>, score_heads<S, 5>,
                      score_heads<S, 6>, score_heads<S, 7>, score_heads<S, 8>},
                     {by_row_type<S, RowF32<S>>(), by_row_type<S, RowF16<S>>(), by_row_type<S, RowQ8<S>>()},
                     name};
}

}  // namespace
}  // namespace weft::cpu
