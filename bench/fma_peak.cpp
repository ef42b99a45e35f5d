#include "fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu_features.h"

namespace weft::bench {
namespace detail {

float fma_chains_avx2(long iterations) {
  // 12 accumulators and 2 constants in the 16 YMM registers; see
  // fma_chains_avx512 for why the chains neither overflow nor go denormal.
  const __m256 m = _mm256_set1_ps(0.9999f), a = _mm256_set1_ps(0.0001f);
  __m256 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = _mm256_fmadd_ps(c[i], m, a);
  }
  __m256 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, c[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

}  // namespace detail

namespace {

using Chains = float (*)(long);

// Seconds for n_threads threads each running chains(iterations), measured
// from before the threads start to after the last one ends.
double run_seconds(Chains chains, int n_threads, long iterations, std::vector<float>& sink) {
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&sink, chains, iterations, t] { sink[static_cast<size_t>(t)] = chains(iterations); });
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Flops per second of one ISA's chains on n_threads threads: the iteration
// count is calibrated so one run takes about 0.1 s (thread start-up is then
// well under 1%), and the best of three runs is kept.
double measure(Chains chains, double flops_per_round, int n_threads) {
  std::vector<float> sink(static_cast<size_t>(n_threads));
  long iterations = 1 << 14;
  double s = run_seconds(chains, 1, iterations, sink);
  while (s < 0.01 && iterations < (1L << 40)) {
    iterations *= 4;
    s = run_seconds(chains, 1, iterations, sink);
  }
  iterations = std::max(1L, static_cast<long>(static_cast<double>(iterations) * 0.1 / s));
  double best = 1e30;
  for (int r = 0; r < 3; ++r) best = std::min(best, run_seconds(chains, n_threads, iterations, sink));
  return flops_per_round * static_cast<double>(iterations) * n_threads / best;
}

}  // namespace

FmaPeak measure_fma_peak(int n_threads) {
  n_threads = std::max(1, n_threads);
  FmaPeak p;
  p.avx2_flops_per_s = measure(detail::fma_chains_avx2, detail::kFmaFlopsPerRoundAvx2, n_threads);
  p.flops_per_s = p.avx2_flops_per_s;
  if (cpu::cpu_features().avx512f) {
    p.avx512_flops_per_s = measure(detail::fma_chains_avx512, detail::kFmaFlopsPerRoundAvx512, n_threads);
    if (p.avx512_flops_per_s > p.flops_per_s) {
      p.flops_per_s = p.avx512_flops_per_s;
      p.isa = "avx512";
    }
  }
  return p;
}

}  // namespace weft::bench
