// The AVX-512 FMA chains of fma_peak.h; compiled with -mavx512f and called
// only when the CPU reports AVX-512F.
#include <immintrin.h>

#include "fma_peak.h"

namespace weft::bench::detail {

float fma_chains_avx512(long iterations) {
  // 24 accumulators (of 32 registers): with 2 FMA ports of 4-cycle latency,
  // 8 chains in flight keep them busy; 24 leave margin for 6-cycle parts.
  // Each chain converges to 1 (x * m + a with m + a = 1): no overflow, no
  // denormals, whatever the iteration count.
  const __m512 m = _mm512_set1_ps(0.9999f), a = _mm512_set1_ps(0.0001f);
  __m512 c[24];
  for (int i = 0; i < 24; ++i) c[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) c[i] = _mm512_fmadd_ps(c[i], m, a);
  }
  __m512 s = c[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, c[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

}  // namespace weft::bench::detail
