// The CPU device. Its backends run graphs on a persistent thread pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "weft/backend/backend.h"

namespace weft {

// n_threads <= 0 uses the number of hardware threads.
std::unique_ptr<Device> make_cpu_device(int n_threads = 0);

// The instruction-set level of the CPU kernels, chosen once per process from
// what the CPU reports (and WEFT_CPU_SIMD=avx2, which forces the baseline):
// "avx2", "avx512-vnni" (float and quantized kernels on AVX-512), or
// "avx512 (quantized: avx2)" on an AVX-512 CPU without VNNI. For
// `weft --version` and logs; thread-safe.
std::string cpu_simd_level();

// What every CPU backend of this process has computed since it started:
// graphs run, nodes run, and the seconds spent running them, timed by the
// thread that called compute() from waking the pool's threads to the end of
// the last node (barriers between nodes included; planning, allocation,
// inputs and outputs not). `weft bench model` subtracts it from wall time to
// get the host's own time per token. Thread-safe and cheap (two clock reads
// per graph); the three totals are read one after another, so a snapshot
// taken while another thread computes may mix before and after.
struct CpuComputeStats {
  uint64_t graphs = 0;
  uint64_t nodes = 0;
  double seconds = 0;
};
CpuComputeStats cpu_compute_stats();

}  // namespace weft
