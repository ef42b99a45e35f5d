// The decode-path products of `weft bench ops`: a matrix-vector product per
// weight type over a matrix larger than the last-level cache, so each run
// reads the weights from memory, reported against the read bandwidth; and
// again over weights that fit in each core's L2, the kernel's own speed.
#pragma once

#include <string>

namespace weft::bench {

// Prints two rows per weight type (name contains filter), from memory and
// from L2: time per run, GFLOP/s, GB/s and GB/s / read_bytes_per_s.
void run_matvec_rows(int n_threads, double read_bytes_per_s, double min_seconds, const std::string& filter);

}  // namespace weft::bench
