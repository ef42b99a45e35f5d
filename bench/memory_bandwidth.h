// The machine limits that benchmarks report their results against,
// measured in the same run so the ratios mean something on any machine.
#pragma once

namespace weft::bench {

struct Bandwidth {
  double read_bytes_per_s = 0;  // streaming read (sum) of a buffer far larger than cache
  double copy_bytes_per_s = 0;  // bytes read + written by memcpy of the same
};

// Measures with n_threads threads, each streaming its own slice of a buffer
// four times the last-level cache (cache_info.h); takes the best of a few
// repetitions.
Bandwidth measure_memory_bandwidth(int n_threads);

}  // namespace weft::bench
