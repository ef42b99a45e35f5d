// AVX2 + FMA + F16C dot kernels (the build's baseline), and the run-time
// choice between levels.
#include <immintrin.h>

#include <cstdlib>
#include <cstring>

#include "cpu_features.h"
#include "simd.h"

namespace weft::cpu {
namespace {

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Decode reads each weight once, in order: asked for at least 16 KiB ahead
// into L2 (as the quantized decode kernels do), a whole number of the
// tile's rows ahead (decode_ahead), which is the same place in the rows
// of a later tile. Without it one core read f16 weights at about half the
// bandwidth. The address is formed as an integer: it may lie past the
// tensor (a prefetch never faults).
constexpr uintptr_t kDecodePrefetchBytes = 16384;
inline uintptr_t decode_ahead(size_t tile_bytes) {
  return tile_bytes == 0 ? kDecodePrefetchBytes : (kDecodePrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
}
inline void prefetch_decode(const void* p, uintptr_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + ahead), _MM_HINT_T1);
}

// Weight loaders for the unquantized types: 8 values at a time, or one.
struct F32 {
  using W = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct F16 {
  using W = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct BF16 {
  using W = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float load1(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// Unquantized weights, NW (<= 2) rows by NX columns. U accumulators per
// product keep enough FMA chains in flight when the tile is small.
template <class L>
struct Plain {
  static constexpr int kMaxRows = 2;

  template <int NW, int NX>
  static void run(const uint8_t* wp, size_t stride, const float* const* x, int64_t n, float* out) {
    constexpr int U = NW * NX >= 4 ? 1 : 4 / (NW * NX);
    const typename L::W* w[NW];
    for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const typename L::W*>(wp + r * stride);
    __m256 acc[NW][NX][U];
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j)
        for (int u = 0; u < U; ++u) acc[r][j][u] = _mm256_setzero_ps();
    const uintptr_t ahead = decode_ahead(NW * stride);
    int64_t i = 0;
    for (; i + 8 * U <= n; i += 8 * U) {
      if constexpr (NX == 1)  // decode: stream the weights (prefetch_decode)
        for (int r = 0; r < NW; ++r) prefetch_decode(w[r] + i, ahead);
      for (int u = 0; u < U; ++u) {
        __m256 wk[NW];
        for (int r = 0; r < NW; ++r) wk[r] = L::load8(w[r] + i + 8 * u);
        for (int j = 0; j < NX; ++j) {
          const __m256 xv = _mm256_loadu_ps(x[j] + i + 8 * u);
          for (int r = 0; r < NW; ++r) acc[r][j][u] = _mm256_fmadd_ps(wk[r], xv, acc[r][j][u]);
        }
      }
    }
    for (; i + 8 <= n; i += 8) {
      __m256 wk[NW];
      for (int r = 0; r < NW; ++r) wk[r] = L::load8(w[r] + i);
      for (int j = 0; j < NX; ++j) {
        const __m256 xv = _mm256_loadu_ps(x[j] + i);
        for (int r = 0; r < NW; ++r) acc[r][j][0] = _mm256_fmadd_ps(wk[r], xv, acc[r][j][0]);
      }
    }
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) {
        for (int u = 1; u < U; ++u) acc[r][j][0] = _mm256_add_ps(acc[r][j][0], acc[r][j][u]);
        float s = hsum(acc[r][j][0]);
        for (int64_t k = i; k < n; ++k) s += L::load1(w[r] + k) * x[j][k];
        out[r * kTileCols + j] = s;
      }
  }
};

// nx columns of rows [0, NW) of a tile.
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
  int r = 0;
  if constexpr (K::kMaxRows >= 2) {
    for (; r + 2 <= nw; r += 2) tile_rows<K, 2>(w + r * stride, stride, x, nx, n, out + r * kTileCols);
  }
  for (; r < nw; ++r) tile_rows<K, 1>(w + r * stride, stride, x, nx, n, out + r * kTileCols);
}

template <class K, class W>
float single(const W* w, const float* x, int64_t n) {
  float out;
  K::template run<1, 1>(reinterpret_cast<const uint8_t*>(w), 0, &x, n, &out);
  return out;
}

constinit const DotKernels kAvx2{
    single<Plain<F32>, float>,
    single<Plain<F16>, uint16_t>,
    single<Plain<BF16>, uint16_t>,
    tile<Plain<F32>>,
    tile<Plain<F16>>,
    tile<Plain<BF16>>,
    "avx2",
};

}  // namespace

const DotKernels& avx2_dot_table() {
  return kAvx2;
}

TileDotFn DotKernels::tile(DType t) const {
  switch (t) {
    case DType::f32: return f32_tile;
    case DType::f16: return f16_tile;
    case DType::bf16: return bf16_tile;
    default: return nullptr;  // i32; quantized types have qdot.h kernels
  }
}

const DotKernels* dot_kernels_for(Level level) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (level) {
    case Level::avx2: return avx2 ? &avx2_dot_table() : nullptr;
    case Level::avx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq ? &avx512_dot_table() : nullptr;
  }
  return nullptr;
}

const DotKernels& dot_kernels() {
  static const DotKernels* const best = [] {
    const char* force = std::getenv("WEFT_CPU_SIMD");
    const bool avx2_only = force != nullptr && std::strcmp(force, "avx2") == 0;
    if (const DotKernels* k = dot_kernels_for(Level::avx512); k != nullptr && !avx2_only) return k;
    return &avx2_dot_table();  // the build's baseline: nothing narrower exists
  }();
  return *best;
}

float dot_row(DType t, const void* w_row, const float* x, int64_t n) {
  const DotKernels& k = dot_kernels();
  switch (t) {
    case DType::f32: return k.f32(static_cast<const float*>(w_row), x, n);
    case DType::f16: return k.f16(static_cast<const uint16_t*>(w_row), x, n);
    case DType::bf16: return k.bf16(static_cast<const uint16_t*>(w_row), x, n);
    default: break;
  }
  return 0.0f;
}

}  // namespace weft::cpu
