// The decode-path products of `weft bench ops`: a matrix-vector product per
// weight type over a matrix larger than the last-level cache, so each run
// reads the weights from memory, reported against the read bandwidth.
#pragma once

#include <string>

namespace weft::bench {

// Prints one row per weight type (name contains filter): time per product,
// GFLOP/s, GB/s and GB/s / read_bytes_per_s.
void run_matvec_rows(int n_threads, double read_bytes_per_s, double min_seconds, const std::string& filter);

}  // namespace weft::bench
