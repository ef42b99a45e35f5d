// AVX-512 (F, BW, VL, DQ) dot kernels. This file alone is compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq, so nothing in it may run unless
// dot_kernels_for(Level::avx512) found those features. To keep AVX-512 code
// out of symbols other files share (ODR), everything here is in an anonymous
// namespace, no inline function or template from a shared header is used,
// and the table is constant-initialized (no start-up code runs from here).
//
// VNNI and AVX512_BF16 are not used: activations stay f32, while VNNI needs
// int8 activations and VDPBF16PS would round x to bf16.
#include <immintrin.h>

#include "avx512_diagnostics.h"
#include "simd.h"

namespace weft::cpu {
namespace {

__mmask16 tail_mask(int64_t r) {
  return static_cast<__mmask16>((1u << r) - 1u);
}

// Decode reads each weight once, in order: asked for at least 16 KiB ahead
// into L2, as simd_avx2.cpp and the quantized kernels do, a whole number of
// the tile's rows ahead (decode_ahead): the same place in the rows of a
// later tile. (16 KiB itself was two rows of 4096 f16 values: half of a
// 4-row tile's prefetches named rows the tile was reading already, and one
// core streamed f16 at 0.7 of the bandwidth.) The address is formed as an
// integer: it may lie past the tensor (a prefetch never faults).
constexpr uintptr_t kDecodePrefetchBytes = 16384;
uintptr_t decode_ahead(size_t tile_bytes) {
  return tile_bytes == 0 ? kDecodePrefetchBytes : (kDecodePrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
}
void prefetch_decode(const void* p, uintptr_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + ahead), _MM_HINT_T1);
}

// Weight loaders: 16 values, or the first r (< 16) with the rest zero.
struct F32 {
  using W = float;
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16 {
  using W = uint16_t;
  static __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16 {
  using W = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load16(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// Unquantized weights, NW rows by NX columns (up to 4 x 4: 16 accumulators
// of 32 registers). U accumulators per product keep enough FMA chains in
// flight when the tile is small.
template <class L>
struct Plain {
  template <int NW, int NX>
  static void run(const uint8_t* wp, size_t stride, const float* const* x, int64_t n, float* out) {
    constexpr int U = NW * NX >= 4 ? 1 : 4 / (NW * NX);
    const typename L::W* w[NW];
    for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const typename L::W*>(wp + r * stride);
    __m512 acc[NW][NX][U];
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j)
        for (int u = 0; u < U; ++u) acc[r][j][u] = _mm512_setzero_ps();
    const uintptr_t ahead = decode_ahead(NW * stride);
    int64_t i = 0;
    for (; i + 16 * U <= n; i += 16 * U) {
      if constexpr (NX == 1)  // decode: stream the weights (prefetch_decode)
        for (int r = 0; r < NW; ++r) prefetch_decode(w[r] + i, ahead);
      for (int u = 0; u < U; ++u) {
        __m512 wk[NW];
        for (int r = 0; r < NW; ++r) wk[r] = L::load16(w[r] + i + 16 * u);
        for (int j = 0; j < NX; ++j) {
          const __m512 xv = _mm512_loadu_ps(x[j] + i + 16 * u);
          for (int r = 0; r < NW; ++r) acc[r][j][u] = _mm512_fmadd_ps(wk[r], xv, acc[r][j][u]);
        }
      }
    }
    for (; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(n - i);
      __m512 wk[NW];
      for (int r = 0; r < NW; ++r) wk[r] = L::load_tail(w[r] + i, m);
      for (int j = 0; j < NX; ++j) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + i);
        for (int r = 0; r < NW; ++r) acc[r][j][0] = _mm512_fmadd_ps(wk[r], xv, acc[r][j][0]);
      }
    }
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) {
        for (int u = 1; u < U; ++u) acc[r][j][0] = _mm512_add_ps(acc[r][j][0], acc[r][j][u]);
        out[r * kTileCols + j] = _mm512_reduce_add_ps(acc[r][j][0]);
      }
  }
};

template <class K, int NW>
void tile_rows(const uint8_t* w, size_t stride, const float* const* x, int nx, int64_t n, float* out) {
  switch (nx) {
    case 1: K::template run<NW, 1>(w, stride, x, n, out); break;
    case 2: K::template run<NW, 2>(w, stride, x, n, out); break;
    case 3: K::template run<NW, 3>(w, stride, x, n, out); break;
    default: K::template run<NW, 4>(w, stride, x, n, out); break;
  }
}

template <class K>
void tile(const void* wv, size_t stride, int nw, const float* const* x, int nx, int64_t n, float* out) {
  const auto* w = static_cast<const uint8_t*>(wv);
  switch (nw) {
    case 1: tile_rows<K, 1>(w, stride, x, nx, n, out); break;
    case 2: tile_rows<K, 2>(w, stride, x, nx, n, out); break;
    case 3: tile_rows<K, 3>(w, stride, x, nx, n, out); break;
    default: tile_rows<K, 4>(w, stride, x, nx, n, out); break;
  }
}

template <class K, class W>
float single(const W* w, const float* x, int64_t n) {
  float out;
  K::template run<1, 1>(reinterpret_cast<const uint8_t*>(w), 0, &x, n, &out);
  return out;
}

constinit const DotKernels kAvx512{
    single<Plain<F32>, float>,
    single<Plain<F16>, uint16_t>,
    single<Plain<BF16>, uint16_t>,
    tile<Plain<F32>>,
    tile<Plain<F16>>,
    tile<Plain<BF16>>,
    "avx512",
};

}  // namespace

const DotKernels& avx512_dot_table() {
  return kAvx512;
}

}  // namespace weft::cpu
