// `weft bench gemm`: matrix products of float weights (f32, f16, bf16) with
// a batch of activation rows, the prompt-processing path of mul_mat, in
// GFLOP/s and as a fraction of the FMA peak measured first in the same run
// (fma_peak.h, at the vector width the product's kernel uses).
//
//   run_gemm_bench({.n_threads = 2});
//
// Two tables: the products of a 1B-class model (TinyLlama's shapes) on a
// 512-token prompt, through the CPU backend as a graph runs them, including
// attention's batched products with broadcast kv heads; and the crossover
// between the matrix-vector tile engine and the packed product, the
// backend's choice beside the packed product forced, for the column counts
// around the thresholds of gemm_preferred() (src/backend/cpu/gemm.h).
// Each time is the fastest of several runs.
#pragma once

#include <string>

namespace weft::bench {

struct GemmBenchOptions {
  int n_threads = 0;   // 0: hardware threads
  std::string filter;  // only rows whose name contains this
  double min_seconds = 0.2;
};

int run_gemm_bench(const GemmBenchOptions& options);

}  // namespace weft::bench
