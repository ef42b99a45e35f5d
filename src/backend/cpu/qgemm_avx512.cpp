// AVX-512 VNNI kernels of qgemm.h (256-bit registers, EVEX-encoded): the
// panel layout and tile of the AVX2 kernels (qgemm_tile.h), but vpdpbusd
// multiplies unsigned by signed bytes and adds groups of four straight into
// i32 lanes, without saturating. So every type takes the same path:
// activations stored as x_q + 128 (unsigned), weights as their signed
// values v, and 128 * sum(v) (the panel's vsum128) taken off each block's
// sum, which leaves exactly sum(v * x_q), the integer the AVX2 kernels
// compute.
#include <immintrin.h>

#include "qgemm_tile.h"

namespace weft::cpu {
namespace {

template <bool kMinTerm>
struct Vnni {
  static constexpr bool kMin = kMinTerm;
  template <int NV>
  static void sums(const QPanelBlock& w, const QActCol* x, int64_t b, __m256i (&isum)[NV]) {
    for (int j = 0; j < NV; ++j) isum[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(w.q + 32 * k));
      for (int j = 0; j < NV; ++j) isum[j] = _mm256_dpbusd_epi32(isum[j], broadcast4(x[j].q + 32 * b + 4 * k), wv);
    }
    const __m256i corr = _mm256_load_si256(reinterpret_cast<const __m256i*>(w.vsum128));
    for (int j = 0; j < NV; ++j) isum[j] = _mm256_sub_epi32(isum[j], corr);
  }
};

// sign8 and offset weights are both stored as v here: one kernel serves them.
constexpr QGemmKernel kVnni{{qgemm_tile_any<Vnni<false>>, qgemm_tile_any<Vnni<false>>, qgemm_tile_any<Vnni<true>>},
                            true,
                            "avx512-vnni"};

}  // namespace

const QGemmKernel& avx512_qgemm_kernel() { return kVnni; }

}  // namespace weft::cpu
