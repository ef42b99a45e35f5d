// The content hash of docs/rpc-protocol.md section 5, checked against a
// straightforward single-threaded reading of the spec.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "protocol/content_hash.h"

namespace weft::rpc {
namespace {

void append_le(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// The spec, sentence by sentence.
ContentHash reference_hash(const uint8_t* data, size_t size) {
  std::vector<uint8_t> concat;
  for (size_t start = 0; start < size; start += kHashChunkBytes) {
    const size_t len = size - start < kHashChunkBytes ? size - start : kHashChunkBytes;
    const XXH128_hash_t h = XXH3_128bits(data + start, len);
    append_le(concat, h.high64);
    append_le(concat, h.low64);
  }
  append_le(concat, size);
  const XXH128_hash_t h = XXH3_128bits_withSeed(concat.data(), concat.size(), 0);
  std::vector<uint8_t> out;
  append_le(out, h.high64);
  append_le(out, h.low64);
  ContentHash r{};
  std::copy(out.begin(), out.end(), r.begin());
  return r;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(RpcContentHash, FollowsTheSpecAtChunkBoundaries) {
  const auto data = random_bytes(3 * kHashChunkBytes + 1000, 1);
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, kHashChunkBytes - 1, kHashChunkBytes, kHashChunkBytes + 1,
                      2 * kHashChunkBytes, 3 * kHashChunkBytes + 1000}) {
    EXPECT_EQ(content_hash(data.data(), size, 2), reference_hash(data.data(), size)) << size;
  }
}

TEST(RpcContentHash, IndependentOfThreadCount) {
  const auto data = random_bytes(5 * kHashChunkBytes + 12345, 2);
  const ContentHash one = content_hash(data.data(), data.size(), 1);
  for (int threads : {0, 2, 3, 4, 7, 64}) {
    EXPECT_EQ(content_hash(data.data(), data.size(), threads), one) << threads << " threads";
  }
  EXPECT_EQ(one, reference_hash(data.data(), data.size()));
}

TEST(RpcContentHash, ChangesWithOneFlippedByteAndWithSize) {
  auto data = random_bytes(2 * kHashChunkBytes + 77, 3);
  const ContentHash base = content_hash(data.data(), data.size());
  for (size_t pos : {size_t{0}, kHashChunkBytes - 1, kHashChunkBytes, data.size() - 1}) {
    data[pos] ^= 0x01;
    EXPECT_NE(content_hash(data.data(), data.size()), base) << "flipped byte " << pos;
    data[pos] ^= 0x01;
  }
  EXPECT_EQ(content_hash(data.data(), data.size()), base);
  EXPECT_NE(content_hash(data.data(), data.size() - 1), base);

  // Same bytes, different lengths: the size is part of the hash.
  const std::vector<uint8_t> zeros(kHashChunkBytes + 1, 0);
  EXPECT_NE(content_hash(zeros.data(), 0), content_hash(zeros.data(), 1));
  EXPECT_NE(content_hash(zeros.data(), kHashChunkBytes), content_hash(zeros.data(), kHashChunkBytes + 1));
}

TEST(RpcContentHash, EmptyInputIsTheHashOfItsSize) {
  // No chunks: XXH3-128 of the u64 size 0 alone.
  const uint8_t zero_size[8] = {};
  const XXH128_hash_t h = XXH3_128bits(zero_size, 8);
  const ContentHash got = content_hash(nullptr, 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i], static_cast<uint8_t>(h.high64 >> (8 * i)));
    EXPECT_EQ(got[8 + i], static_cast<uint8_t>(h.low64 >> (8 * i)));
  }
}

}  // namespace
}  // namespace weft::rpc
