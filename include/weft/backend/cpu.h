// The CPU device. Its backends run graphs on a persistent thread pool.
#pragma once

#include <memory>

#include "weft/backend/backend.h"

namespace weft {

// n_threads <= 0 uses the number of hardware threads.
std::unique_ptr<Device> make_cpu_device(int n_threads = 0);

}  // namespace weft
