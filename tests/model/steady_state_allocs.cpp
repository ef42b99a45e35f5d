// Heap allocations per generated token, counted by replacing the global
// operator new of this executable (its own binary: the counting would
// otherwise cover every test). In steady state (one token per eval, the KV
// length within one 32-row bucket, so LlamaModel reuses its graph) an eval
// allocates nothing: not the model, the scheduler, the CPU backend nor its
// thread pool. A new bucket rebuilds the graph, once per 32 tokens. (CPU
// devices only: the async test device queues each call as a std::function,
// which allocates; its queue stands in for a GPU driver's.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/testing/async.h"

namespace {
std::atomic<uint64_t> g_allocations{0};

void* counted(size_t n, size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return counted(n, 0); }
void* operator new[](size_t n) { return counted(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return counted(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted(n, static_cast<size_t>(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

// Generates tokens one at a time after a 5-token prompt (position 5..36 is
// the first bucket boundary at 32) and returns the allocations of each eval.
std::vector<uint64_t> allocations_per_token(Executor& m, int steps) {
  const int64_t vocab = m.params().n_vocab;
  std::vector<int32_t> seq{1, 17, 42, 99, 5};
  seq.reserve(static_cast<size_t>(steps) + seq.size());
  std::vector<float> logits;
  m.eval(seq, 0, logits);
  std::vector<uint64_t> counts;
  counts.reserve(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    const int32_t next = weft::model::greedy(&logits[logits.size() - static_cast<size_t>(vocab)],
                                             static_cast<int>(vocab));
    seq.push_back(next);
    const uint64_t before = g_allocations.load();
    m.eval({&seq.back(), 1}, static_cast<int64_t>(seq.size()) - 1, logits);
    counts.push_back(g_allocations.load() - before);
  }
  return counts;
}

// Every token whose KV length stays in the bucket of the token before it
// allocates nothing; the first token of a bucket may (a new graph).
void expect_steady_state_free(const std::vector<uint64_t>& counts, int64_t first_pos) {
  uint64_t total = 0;
  for (size_t i = 1; i < counts.size(); ++i) {
    const int64_t pos = first_pos + static_cast<int64_t>(i);  // the token's position; n_kv = pos + 1
    const bool same_bucket = pos / 32 == (pos - 1) / 32;
    if (same_bucket) {
      EXPECT_EQ(counts[i], 0u) << "eval at position " << pos;
    }
    total += counts[i];
  }
  std::printf("allocations: %.2f per token over %zu tokens (graph rebuilt at each 32-row KV bucket)\n",
              static_cast<double>(total) / static_cast<double>(counts.size() - 1), counts.size() - 1);
}

class SteadyStateAllocations : public ::testing::TestWithParam<int> {};

TEST_P(SteadyStateAllocations, OneDevice) {
  auto file = weft::GgufFile::open((family_files::dir() / "llama.gguf").string());
  auto cpu = weft::make_cpu_device(GetParam());
  Executor m(*file, *cpu, 128);
  expect_steady_state_free(allocations_per_token(m, 70), 5);
}

TEST_P(SteadyStateAllocations, SplitThroughTheScheduler) {
  auto file = weft::GgufFile::open((family_files::dir() / "llama.gguf").string());
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  auto cpu = weft::make_cpu_device(GetParam());
  auto other = weft::make_cpu_device(1);
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {other.get(), 1, n_layer}};
  Executor m(*file, pl, 128);
  expect_steady_state_free(allocations_per_token(m, 70), 5);
}

INSTANTIATE_TEST_SUITE_P(Threads, SteadyStateAllocations, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "threads"; });

}  // namespace
