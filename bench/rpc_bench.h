// `weft bench rpc`: what the RPC client costs, as ratios to limits measured
// in the same run: upload throughput against raw loopback TCP, the round
// trip of a small command, and a chain of small graphs run locally and
// through a worker.
#pragma once

#include <cstddef>
#include <string>

namespace weft::bench {

struct RpcBenchOptions {
  std::string endpoint;                     // empty: an in-process worker on 127.0.0.1
  int n_threads = 0;                        // CPU threads (local and in-process worker); 0: hardware threads
  size_t upload_bytes = size_t{256} << 20;  // one buffer, uploaded whole
  int latency_samples = 1000;               // round trips timed (median reported)
  int chain_graphs = 100;                   // graphs per token: [256,256] matmul + silu each
  int tokens = 30;                          // tokens timed per side (after one warm-up)
};

// Prints one line per measurement with its ratio; returns 0, or 1 on an error.
int run_rpc_bench(const RpcBenchOptions& options);

}  // namespace weft::bench
