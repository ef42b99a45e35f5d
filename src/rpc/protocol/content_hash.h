// The content hash of section 5: XXH3-128 over per-4-MiB-chunk XXH3-128
// digests and the size, so chunks hash in parallel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft::rpc {

using ContentHash = std::array<uint8_t, 16>;

inline constexpr size_t kHashChunkBytes = size_t{4} << 20;

// n_threads <= 0: all hardware threads.
ContentHash content_hash(const void* data, size_t size, int n_threads = 0);

}  // namespace weft::rpc
