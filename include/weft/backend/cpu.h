// The CPU device. Its backends run graphs on a persistent thread pool.
#pragma once

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

}  // namespace weft
