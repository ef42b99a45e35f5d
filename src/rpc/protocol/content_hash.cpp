// The content hash of docs/rpc-protocol.md section 5. Each 4 MiB chunk's
// digest lands at the chunk's index, so the result does not depend on how
// many threads hashed or in what order they finished.
#include "protocol/content_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace weft::rpc {
namespace {

void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// 16 bytes: high 64 bits, then low 64 bits, each little-endian.
void put_digest(uint8_t* out, const XXH128_hash_t& h) {
  put_u64(out, h.high64);
  put_u64(out + 8, h.low64);
}

}  // namespace

ContentHash content_hash(const void* data, size_t size, int n_threads) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t n_chunks = size / kHashChunkBytes + (size % kHashChunkBytes != 0 ? 1 : 0);
  // The digests, then the u64 total size.
  std::vector<uint8_t> digests(n_chunks * 16 + 8);

  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n_chunks; i = next.fetch_add(1)) {
      const size_t start = i * kHashChunkBytes;
      const size_t len = std::min(kHashChunkBytes, size - start);
      put_digest(&digests[i * 16], XXH3_128bits(bytes + start, len));
    }
  };

  size_t threads = n_threads > 0 ? static_cast<size_t>(n_threads) : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, n_chunks);
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer helpers: the calling thread takes what they would have done
    }
  }
  work();
  for (std::thread& t : helpers) t.join();

  put_u64(&digests[n_chunks * 16], static_cast<uint64_t>(size));
  ContentHash out;
  put_digest(out.data(), XXH3_128bits(digests.data(), digests.size()));
  return out;
}

}  // namespace weft::rpc
