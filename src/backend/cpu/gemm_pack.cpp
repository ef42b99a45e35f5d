// Packing of gemm()'s operands into k-major panels (gemm.h). Compiled at
// the build's baseline (AVX2 + F16C) and used by every level: both operands
// are stored with their k values contiguous, the panels want them strided,
// so each group of 8 rows and 8 k values is transposed in registers.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "gemm.h"

namespace weft::cpu {
namespace {

// Weight loaders: 8 values converted to f32, or one.
struct F32 {
  static constexpr size_t kSize = 4;
  static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
};
struct F16 {
  static constexpr size_t kSize = 2;
  static __m256 load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
  }
};
struct BF16 {
  static constexpr size_t kSize = 2;
  static __m256 load8(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return bf16_to_f32(h);
  }
};

// r[i] (row i, 8 values) -> r[k] (value k of the 8 rows).
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Rows src[0, live) (live <= 8; the others read as zero), values [0, kc),
// into 8 consecutive lanes of a panel: value k of row i at dst[k * ld + i].
// Only the first `lanes` lanes are written (lanes <= 8).
template <class L>
void pack_group(const uint8_t* const* src, int live, int64_t kc, float* dst, int64_t ld, int lanes) {
  alignas(32) static constexpr int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - lanes));
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 r[8];
    if (live == 8) {
      for (int i = 0; i < 8; ++i) r[i] = L::load8(src[i] + k * L::kSize);
    } else {
      for (int i = 0; i < 8; ++i) r[i] = i < live ? L::load8(src[i] + k * L::kSize) : _mm256_setzero_ps();
    }
    transpose8(r);
    if (lanes == 8) {
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (k + i) * ld, r[i]);
    } else {
      for (int i = 0; i < 8; ++i) _mm256_maskstore_ps(dst + (k + i) * ld, mask, r[i]);
    }
  }
  for (; k < kc; ++k)
    for (int i = 0; i < lanes; ++i) dst[k * ld + i] = i < live ? L::load1(src[i] + k * L::kSize) : 0.0f;
}

// Panels of mr rows, each filled in order: 8 values of k of all mr rows,
// then the next 8.
template <class L>
void pack_a_panels(const uint8_t* a, size_t stride, int64_t rows, int64_t k0, int64_t kc, int mr, float* dst) {
  assert(mr % 8 == 0 && mr <= 64);
  const int64_t panels = (rows + mr - 1) / mr;
  const int64_t k8 = kc / 8 * 8;
  for (int64_t p = 0; p < panels; ++p) {
    float* pd = dst + p * mr * kc;
    const int64_t live_rows = std::min<int64_t>(mr, rows - p * mr);
    const uint8_t* src[64];  // mr <= 64
    for (int i = 0; i < mr; ++i)
      src[i] = i < live_rows ? a + static_cast<size_t>(p * mr + i) * stride + k0 * L::kSize : nullptr;
    for (int64_t k = 0; k < k8; k += 8) {
      for (int g = 0; g < mr; g += 8) {
        const int live = static_cast<int>(std::clamp<int64_t>(live_rows - g, 0, 8));
        __m256 r[8];
        if (live == 8) {
          for (int i = 0; i < 8; ++i) r[i] = L::load8(src[g + i] + k * L::kSize);
        } else {
          for (int i = 0; i < 8; ++i) r[i] = i < live ? L::load8(src[g + i] + k * L::kSize) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_store_ps(pd + (k + i) * mr + g, r[i]);
      }
    }
    for (int64_t k = k8; k < kc; ++k)
      for (int i = 0; i < mr; ++i) pd[k * mr + i] = i < live_rows ? L::load1(src[i] + k * L::kSize) : 0.0f;
  }
}

}  // namespace

void gemm_pack_a(DType t, const uint8_t* a, size_t stride, int64_t rows, int64_t k0, int64_t kc, int mr, float* dst) {
  switch (t) {
    case DType::f16: return pack_a_panels<F16>(a, stride, rows, k0, kc, mr, dst);
    case DType::bf16: return pack_a_panels<BF16>(a, stride, rows, k0, kc, mr, dst);
    default: return pack_a_panels<F32>(a, stride, rows, k0, kc, mr, dst);
  }
}

void gemm_pack_b(const uint8_t* const* rows, size_t step, int n, int64_t k0, int64_t kc, int nr, float* dst) {
  if (step == sizeof(float)) {
    for (int j0 = 0; j0 < nr; j0 += 8) {
      const int lanes = std::min(8, nr - j0);
      const int live = std::clamp(n - j0, 0, lanes);
      const uint8_t* src[8] = {};
      for (int i = 0; i < live; ++i) src[i] = rows[j0 + i] + k0 * sizeof(float);
      pack_group<F32>(src, live, kc, dst + j0, nr, lanes);
    }
    return;
  }
  // Strided or transposed activations: element by element.
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * nr;
    for (int j = 0; j < n; ++j) std::memcpy(d + j, rows[j] + static_cast<size_t>(k0 + k) * step, sizeof(float));
    for (int j = n; j < nr; ++j) d[j] = 0.0f;
  }
}

}  // namespace weft::cpu
