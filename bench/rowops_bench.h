// The elementwise and row ops of `weft bench ops` over operands larger than
// the last-level cache (activations, binary ops, norms, soft_max, rope and
// the f16 / bf16 conversions), so every run streams its data from memory,
// reported against the read bandwidth (docs/performance.md, "Elementwise
// and row ops").
#pragma once

#include <string>

namespace weft::bench {

// Prints one row per op (name contains filter): time per run, GFLOP/s where
// meaningful, GB/s (bytes read plus bytes written) and GB/s /
// read_bytes_per_s. One graph is allocated at a time.
void run_rowop_rows(int n_threads, double read_bytes_per_s, double min_seconds, const std::string& filter);

}  // namespace weft::bench
