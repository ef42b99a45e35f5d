// How the kernel benches time what they run: the fastest of repeated runs
// (other processes on the machine can only slow a run down), each run long
// enough (about 2 ms) for the clock to resolve it.
#pragma once

#include <algorithm>
#include <chrono>

#include "weft/backend/backend.h"
#include "weft/core/graph.h"

namespace weft::bench {

// The fastest of runs of at least 3 that together take min_seconds, as
// seconds per repetition: run(reps) does reps repetitions and returns the
// seconds they took.
template <class Run>
double fastest(Run run, double min_seconds) {
  const double once = std::max(run(1), 1e-9);
  const int reps = static_cast<int>(std::clamp(2e-3 / once, 1.0, 1e4));
  double best = 1e30, total = 0;
  for (int i = 0; i < 3 || total < min_seconds; ++i) {
    const double s = run(reps);
    total += s;
    best = std::min(best, s / reps);
  }
  return best;
}

// Seconds per backend.compute(graph) by fastest(), after one run that warms
// the pages, the thread pool and the scratch.
inline double time_compute(Backend& backend, const Graph& graph, double min_seconds) {
  backend.compute(graph);
  return fastest(
      [&](int reps) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) backend.compute(graph);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      min_seconds);
}

}  // namespace weft::bench
