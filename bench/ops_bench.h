// `weft bench ops`: each op's CPU kernel timed at a few sizes.
#pragma once

#include <string>

namespace weft::bench {

struct OpsBenchOptions {
  int n_threads = 0;  // 0: hardware threads
  std::string filter;
  double min_seconds = 0.2;
};

// Prints one row per (op, size) with GFLOP/s, GB/s, and GB/s as a fraction
// of the memory read bandwidth measured first in the same run.
int run_ops_bench(const OpsBenchOptions& options);

}  // namespace weft::bench
