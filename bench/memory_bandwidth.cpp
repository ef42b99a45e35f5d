#include "memory_bandwidth.h"

#include "cache_info.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace weft::bench {
namespace {

constexpr int kRepeats = 5;

float sum_stream(const float* p, size_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  for (size_t i = 0; i + 32 <= n; i += 32) {
    acc0 = _mm256_add_ps(acc0, _mm256_load_ps(p + i));
    acc1 = _mm256_add_ps(acc1, _mm256_load_ps(p + i + 8));
    acc2 = _mm256_add_ps(acc2, _mm256_load_ps(p + i + 16));
    acc3 = _mm256_add_ps(acc3, _mm256_load_ps(p + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

template <typename Work>
double best_seconds(int n_threads, Work&& work) {
  double best = 1e30;
  for (int r = 0; r < kRepeats; ++r) {
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < n_threads; ++t) threads.emplace_back(work, t);
    for (auto& th : threads) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

}  // namespace

Bandwidth measure_memory_bandwidth(int n_threads) {
  n_threads = std::max(1, n_threads);
  // Four times the last-level cache (at least 256 MiB): every pass from DRAM.
  const size_t kBytes = beyond_cache_bytes(size_t{256} << 20, 4.0) / 64 * 64;
  const size_t n = kBytes / sizeof(float);
  const size_t slice = n / static_cast<size_t>(n_threads) / 32 * 32;
  auto* src = static_cast<float*>(::operator new(kBytes, std::align_val_t(64)));
  auto* dst = static_cast<float*>(::operator new(kBytes, std::align_val_t(64)));
  std::fill(src, src + n, 1.0f);  // touch every page before timing
  std::fill(dst, dst + n, 0.0f);

  std::vector<float> sink(static_cast<size_t>(n_threads));
  Bandwidth bw;
  const double read_s = best_seconds(n_threads, [&](int t) {
    sink[static_cast<size_t>(t)] = sum_stream(src + slice * static_cast<size_t>(t), slice);
  });
  const double copy_s = best_seconds(n_threads, [&](int t) {
    std::memcpy(dst + slice * static_cast<size_t>(t), src + slice * static_cast<size_t>(t), slice * sizeof(float));
  });
  const double bytes = static_cast<double>(slice * static_cast<size_t>(n_threads) * sizeof(float));
  bw.read_bytes_per_s = bytes / read_s;
  bw.copy_bytes_per_s = 2 * bytes / copy_s;
  ::operator delete(src, std::align_val_t(64));
  ::operator delete(dst, std::align_val_t(64));
  return bw;
}

}  // namespace weft::bench
