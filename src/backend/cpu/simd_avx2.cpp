// AVX2 + FMA + F16C dot kernels (the build's baseline), and the run-time
// choice between levels.
#include <immintrin.h>

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

// Unquantized weights: U independent accumulators per activation row (more
// for a single row, whose FMA chain would otherwise be latency-bound).
template <class L>
struct Plain {
  template <int NX>
  static void run(const void* wv, const float* const* x, int64_t n, float* out) {
    constexpr int U = NX == 1 ? 4 : 2;
    const auto* w = static_cast<const typename L::W*>(wv);
    __m256 acc[NX][U];
    for (int j = 0; j < NX; ++j)
      for (int u = 0; u < U; ++u) acc[j][u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * U <= n; i += 8 * U) {
      for (int u = 0; u < U; ++u) {
        const __m256 wk = L::load8(w + i + 8 * u);
        for (int j = 0; j < NX; ++j)
          acc[j][u] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(x[j] + i + 8 * u), acc[j][u]);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wk = L::load8(w + i);
      for (int j = 0; j < NX; ++j)
        acc[j][0] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(x[j] + i), acc[j][0]);
    }
    for (int j = 0; j < NX; ++j) {
      for (int u = U / 2; u >= 1; u /= 2)
        for (int k = 0; k < u; ++k) acc[j][k] = _mm256_add_ps(acc[j][k], acc[j][k + u]);
      float s = hsum(acc[j][0]);
      for (int64_t k = i; k < n; ++k) s += L::load1(w + k) * x[j][k];
      out[j] = s;
    }
  }
};

// One 32-value block unpacked to four vectors of 8 floats (unscaled).
struct Q8 {
  using Block = BlockQ8_0;
  static void unpack(const BlockQ8_0& b, __m256* v) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q));
    const __m128i q0 = _mm256_castsi256_si128(q);
    const __m128i q1 = _mm256_extracti128_si256(q, 1);
    v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0));
    v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_bsrli_si128(q0, 8)));
    v[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1));
    v[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_bsrli_si128(q1, 8)));
  }
};
struct Q4 {
  using Block = BlockQ4_0;
  static void unpack(const BlockQ4_0& b, __m256* v) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, mask), eight);  // values 0..15
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), mask), eight);  // 16..31
    v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_bsrli_si128(lo, 8)));
    v[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    v[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_bsrli_si128(hi, 8)));
  }
};

// Quantized weights: per block, sum q*x over its 32 values, then scale by d.
// A single row alternates two accumulators to hide the FMA latency.
template <class Q>
struct Quant {
  template <int NX>
  static void run(const void* wv, const float* const* x, int64_t n, float* out) {
    constexpr int U = NX == 1 ? 2 : 1;
    const auto* w = static_cast<const typename Q::Block*>(wv);
    const int64_t nb = n / kQuantBlock;
    __m256 acc[NX][U];
    for (int j = 0; j < NX; ++j)
      for (int u = 0; u < U; ++u) acc[j][u] = _mm256_setzero_ps();
    auto block = [&](int64_t b, int u) __attribute__((always_inline)) {
      __m256 v[4];
      Q::unpack(w[b], v);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[b].d));
      for (int j = 0; j < NX; ++j) {
        const float* xb = x[j] + b * kQuantBlock;
        __m256 s0 = _mm256_mul_ps(v[0], _mm256_loadu_ps(xb));
        __m256 s1 = _mm256_mul_ps(v[1], _mm256_loadu_ps(xb + 8));
        s0 = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(xb + 16), s0);
        s1 = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(xb + 24), s1);
        acc[j][u] = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), d, acc[j][u]);
      }
    };
    int64_t b = 0;
    for (; b + U <= nb; b += U)
      for (int u = 0; u < U; ++u) block(b + u, u);
    for (; b < nb; ++b) block(b, 0);
    for (int j = 0; j < NX; ++j) {
      __m256 s = acc[j][0];
      for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[j][u]);
      out[j] = hsum(s);
    }
  }
};

template <class K>
void multi(const void* w, const float* const* x, int nx, int64_t n, float* out) {
  switch (nx) {
    case 1: K::template run<1>(w, x, n, out); break;
    case 2: K::template run<2>(w, x, n, out); break;
    case 3: K::template run<3>(w, x, n, out); break;
    default: K::template run<4>(w, x, n, out); break;
  }
}

template <class K, class W>
float single(const W* w, const float* x, int64_t n) {
  float out;
  K::template run<1>(w, &x, n, &out);
  return out;
}

constinit const DotKernels kAvx2{
    single<Plain<F32>, float>,     single<Plain<F16>, uint16_t>, single<Plain<BF16>, uint16_t>,
    single<Quant<Q8>, BlockQ8_0>,  single<Quant<Q4>, BlockQ4_0>, multi<Plain<F32>>,
    multi<Plain<F16>>,             multi<Plain<BF16>>,           multi<Quant<Q8>>,
    multi<Quant<Q4>>,              "avx2",
};

}  // namespace

const DotKernels& avx2_dot_table() { return kAvx2; }

MultiDotFn DotKernels::multi(DType t) const {
  switch (t) {
    case DType::f32: return f32_multi;
    case DType::f16: return f16_multi;
    case DType::bf16: return bf16_multi;
    case DType::q8_0: return q8_0_multi;
    case DType::q4_0: return q4_0_multi;
    case DType::i32: return nullptr;
  }
  return nullptr;
}

const DotKernels* dot_kernels_for(Level level) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (level) {
    case Level::avx2: return avx2 ? &avx2_dot_table() : nullptr;
    case Level::avx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq ? &avx512_dot_table()
                                                                          : nullptr;
  }
  return nullptr;
}

const DotKernels& dot_kernels() {
  static const DotKernels* const best = [] {
    if (const DotKernels* k = dot_kernels_for(Level::avx512)) return k;
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
    case DType::q8_0: return k.q8_0(static_cast<const BlockQ8_0*>(w_row), x, n);
    case DType::q4_0: return k.q4_0(static_cast<const BlockQ4_0*>(w_row), x, n);
    case DType::i32: break;
  }
  return 0.0f;
}

}  // namespace weft::cpu
