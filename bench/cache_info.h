// The size of this machine's last-level cache, so "memory" buffers can be
// made larger than it on any CPU (sessions have seen 32 MiB and 260 MiB).
#pragma once

#include <cstddef>

namespace weft::bench {

// Bytes of the largest CPU cache the kernel reports (sysfs, then sysconf);
// 32 MiB when neither says.
size_t last_level_cache_bytes();

// Bytes of one core's level-2 cache (sysfs, then sysconf); 1 MiB when
// neither says.
size_t level2_cache_bytes();

// A buffer size for memory-bound measurements: at least `floor` and at least
// `factor` times the last-level cache, so repeated passes come from DRAM.
size_t beyond_cache_bytes(size_t floor, double factor);

}  // namespace weft::bench
