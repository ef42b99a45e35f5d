// The register tile of qgemm.h written once over a level's block sums, for
// qgemm_avx2.cpp and qgemm_avx512.cpp only: each includes this with its own
// policies, compiled for its level, so everything here is in an anonymous
// namespace (no symbol is shared between levels).
//
// A policy P provides P::kMin (the type has a minimum term) and
//   template <int NV> static void sums(const QPanelBlock& w, const QActCol* x, int64_t b, __m256i (&isum)[NV]);
// the exact integer dot products sum(v * x_q) of block b, one lane per row.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "qgemm.h"

namespace weft::cpu {
namespace {

// 4 activation bytes broadcast to every 32-bit lane (a load-port broadcast).
inline __m256i broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Each output is one chain over the blocks in order: acc = fma(sum, d_w *
// d_x, acc), then (minimum types) acc = fma(m_w, d_x * sum(x_q), acc).
template <class P, int NV>
void qgemm_tile(const QPanelBlock* panel, int64_t nb, const QActCol* x, float* const* c, int64_t m0, int mv) {
  __m256 acc[NV];
  for (int j = 0; j < NV; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const QPanelBlock& w = panel[b];
    __m256i isum[NV];
    P::template sums<NV>(w, x, b, isum);
    const __m256 dw = _mm256_load_ps(w.d);
    for (int j = 0; j < NV; ++j)
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dw, _mm256_set1_ps(x[j].d[b])), acc[j]);
    if constexpr (P::kMin) {
      const __m256 mw = _mm256_load_ps(w.m);
      for (int j = 0; j < NV; ++j) acc[j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[j].fsum[b]), acc[j]);
    }
  }
  for (int j = 0; j < NV; ++j) {
    if (mv == kQPanelRows) {
      _mm256_storeu_ps(c[j] + m0, acc[j]);
    } else {
      alignas(32) float out[kQPanelRows];
      _mm256_store_ps(out, acc[j]);
      std::memcpy(c[j] + m0, out, sizeof(float) * static_cast<size_t>(mv));
    }
  }
}

// A QGemmTileFn: the tile for nv columns.
template <class P>
void qgemm_tile_any(const QPanelBlock* panel, int64_t nb, const QActCol* x, int nv, float* const* c, int64_t m0,
                    int mv) {
  switch (nv) {
    case 4: qgemm_tile<P, 4>(panel, nb, x, c, m0, mv); break;
    case 3: qgemm_tile<P, 3>(panel, nb, x, c, m0, mv); break;
    case 2: qgemm_tile<P, 2>(panel, nb, x, c, m0, mv); break;
    default: qgemm_tile<P, 1>(panel, nb, x, c, m0, mv); break;
  }
}

}  // namespace
}  // namespace weft::cpu
