// The worker's content cache on its own: verified stores, LRU eviction,
// the index rebuilt from the directory, damaged files dropped, threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "protocol/content_hash.h"
#include "server/tensor_cache.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

struct CacheDir {
  CacheDir() {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() /
           ("weft_cache_test_" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)));
    fs::remove_all(path);
  }
  ~CacheDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

Bytes random_payload(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

ContentHash hash_of(const Bytes& b) {
  return content_hash(b.data(), b.size());
}

TEST(TensorCache, StoresVerifiedBytesAndCopiesThemOut) {
  CacheDir dir;
  TensorCache cache(dir.path, 1 << 20);
  const Bytes a = random_payload(1000, 1);
  EXPECT_TRUE(cache.store(hash_of(a), a.data(), a.size()));
  EXPECT_TRUE(cache.contains(hash_of(a), a.size()));
  EXPECT_EQ(cache.bytes(), 1000u);
  Bytes out(1000);
  EXPECT_TRUE(cache.lookup(hash_of(a), a.size(), out.data()));
  EXPECT_EQ(out, a);
  EXPECT_FALSE(cache.lookup(hash_of(a), 999, out.data()));  // same hash, other size
}

TEST(TensorCache, RefusesBytesThatDoNotMatchTheirHash) {
  CacheDir dir;
  TensorCache cache(dir.path, 1 << 20);
  const Bytes a = random_payload(1000, 1), b = random_payload(1000, 2);
  EXPECT_FALSE(cache.store(hash_of(a), b.data(), b.size()));
  EXPECT_FALSE(cache.contains(hash_of(a), 1000));
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_TRUE(fs::is_empty(dir.path));  // no file, not even a temporary one
}

TEST(TensorCache, EvictsTheLeastRecentlyUsed) {
  CacheDir dir;
  TensorCache cache(dir.path, 3000);
  const Bytes a = random_payload(1000, 1), b = random_payload(1000, 2), c = random_payload(1000, 3),
              d = random_payload(1000, 4);
  ASSERT_TRUE(cache.store(hash_of(a), a.data(), a.size()));
  ASSERT_TRUE(cache.store(hash_of(b), b.data(), b.size()));
  ASSERT_TRUE(cache.store(hash_of(c), c.data(), c.size()));
  Bytes out(1000);
  ASSERT_TRUE(cache.lookup(hash_of(a), 1000, out.data()));  // a is now the most recent
  ASSERT_TRUE(cache.store(hash_of(d), d.data(), d.size()));
  EXPECT_TRUE(cache.contains(hash_of(a), 1000));
  EXPECT_FALSE(cache.contains(hash_of(b), 1000));
  EXPECT_FALSE(fs::exists(dir.path / TensorCache::file_name(hash_of(b), 1000)));
  EXPECT_TRUE(cache.contains(hash_of(c), 1000));
  EXPECT_TRUE(cache.contains(hash_of(d), 1000));
  EXPECT_LE(cache.bytes(), 3000u);
  const Bytes big = random_payload(3001, 5);
  EXPECT_FALSE(cache.store(hash_of(big), big.data(), big.size()));  // never fits
  EXPECT_EQ(cache.entries(), 3u);
}

TEST(TensorCache, IndexIsRebuiltFromTheDirectory) {
  CacheDir dir;
  const Bytes a = random_payload(1000, 1), b = random_payload(1000, 2), c = random_payload(1000, 3);
  {
    TensorCache cache(dir.path, 1 << 20);
    ASSERT_TRUE(cache.store(hash_of(a), a.data(), a.size()));
    ASSERT_TRUE(cache.store(hash_of(b), b.data(), b.size()));
    ASSERT_TRUE(cache.store(hash_of(c), c.data(), c.size()));
  }
  // Oldest first by mtime: b, then a, then c.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(dir.path / TensorCache::file_name(hash_of(b), 1000), now - std::chrono::hours(3));
  fs::last_write_time(dir.path / TensorCache::file_name(hash_of(a), 1000), now - std::chrono::hours(2));
  fs::last_write_time(dir.path / TensorCache::file_name(hash_of(c), 1000), now - std::chrono::hours(1));
  std::ofstream(dir.path / ".tmp-leftover") << "partial";
  std::ofstream(dir.path / (TensorCache::file_name(hash_of(a), 5000))) << "wrong size";
  std::ofstream(dir.path / "README") << "not ours";

  TensorCache cache(dir.path, 2000);  // room for two: b, the oldest, goes
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_TRUE(cache.contains(hash_of(a), 1000));
  EXPECT_FALSE(cache.contains(hash_of(b), 1000));
  EXPECT_TRUE(cache.contains(hash_of(c), 1000));
  EXPECT_FALSE(fs::exists(dir.path / ".tmp-leftover"));
  EXPECT_FALSE(fs::exists(dir.path / TensorCache::file_name(hash_of(a), 5000)));
  EXPECT_TRUE(fs::exists(dir.path / "README"));
  Bytes out(1000);
  EXPECT_TRUE(cache.lookup(hash_of(c), 1000, out.data()));
  EXPECT_EQ(out, c);
}

TEST(TensorCache, DamagedFileIsDropped) {
  CacheDir dir;
  TensorCache cache(dir.path, 1 << 20);
  const Bytes a = random_payload(1000, 1);
  ASSERT_TRUE(cache.store(hash_of(a), a.data(), a.size()));
  const fs::path file = dir.path / TensorCache::file_name(hash_of(a), 1000);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put(static_cast<char>(a[500] ^ 0xFF));
  }
  Bytes out(1000);
  EXPECT_FALSE(cache.lookup(hash_of(a), 1000, out.data()));
  EXPECT_FALSE(cache.contains(hash_of(a), 1000));
  EXPECT_FALSE(fs::exists(file));
}

TEST(TensorCache, UnusableDirectoryIsAnError) {
  CacheDir dir;
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  EXPECT_THROW(TensorCache(dir.path / "file", 100), Error);
}

TEST(TensorCache, ThreadsStoreAndLookUpTogether) {
  CacheDir dir;
  TensorCache cache(dir.path, 20 * 4096);
  std::vector<Bytes> blobs;
  for (uint32_t i = 0; i < 32; ++i) blobs.push_back(random_payload(4096, i));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Bytes out(4096);
      for (int round = 0; round < 3; ++round) {
        for (size_t i = static_cast<size_t>(t); i < blobs.size() + static_cast<size_t>(t); ++i) {
          const Bytes& b = blobs[i % blobs.size()];
          cache.store(hash_of(b), b.data(), b.size());
          if (cache.lookup(hash_of(b), b.size(), out.data()) && out != b) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.bytes(), 20u * 4096);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
    ++files;
  }
  EXPECT_EQ(files, cache.entries());
}

}  // namespace
}  // namespace weft::rpc
