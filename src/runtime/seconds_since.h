// The unit of the runtime's time reports (prompt, total, recovery times).
#pragma once

#include <chrono>

namespace weft {

// Seconds on the steady clock from t0 to now.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace weft
