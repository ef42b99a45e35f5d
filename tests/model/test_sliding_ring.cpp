// Sliding-window layers keep a ring of rows (LoadOptions::sliding_ring_step):
// the same logits as full caches (which test_families.cpp holds to the
// float64 reference) on every sliding family, past many wraps of the ring,
// in prompts cut into steps, single tokens, a pipelined prompt over a
// worker, and a reused prefix; a prefix the ring no longer holds and a
// batch over sequences are refused by name; the plan counts the ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LoadOptions;
using weft::model::LogitRows;

constexpr int64_t kRingCtx = 256;
constexpr int64_t kStep = 8;      // ring rows: window + 7 rounded up to 32
// Normalized error per token. The ring sums a window's rows in another order
// than full caches, and f32 noise moves the odd cached value to the next
// f16 step: measured up to 1.5e-4 over these prompts, as much as full
// caches' fused against unfused attention (1.6e-4). A wrong row seen or
// missed costs ~1e-1.
constexpr double kRingTolerance = 1e-3;

LoadOptions ring_options(int64_t step) {
  LoadOptions o;
  o.sliding_ring_step = step;
  return o;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = pick(rng);
  return t;
}

// The largest normalized error of got against want, token by token.
double worst_error(const std::vector<float>& got, const std::vector<float>& want, int64_t n_vocab) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t at = 0; at + static_cast<size_t>(n_vocab) <= std::min(got.size(), want.size());
       at += static_cast<size_t>(n_vocab))
    worst = std::max(worst, family_files::normalized_error(&got[at], &want[at], n_vocab));
  return worst;
}

class SlidingRing : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<weft::GgufFile> file() const {
    return weft::GgufFile::open((family_files::dir() / (GetParam() + ".gguf")).string());
  }
};

// An 80-token prompt (every row's logits) and 40 steps: almost four wraps
// of a 32-row ring, against full caches.
TEST_P(SlidingRing, MatchesFullCaches) {
  auto f = file();
  auto cpu = weft::make_cpu_device(2);
  Executor ring(*f, *cpu, kRingCtx, {}, ring_options(kStep));
  Executor full(*f, *cpu, kRingCtx, {}, ring_options(0));
  ASSERT_EQ(ring.sliding_ring_rows(), 32);
  ASSERT_EQ(full.sliding_ring_rows(), 0);
  const int64_t n_vocab = ring.params().n_vocab;
  const std::vector<int32_t> tokens = random_tokens(120, n_vocab, 7);
  const std::span<const int32_t> prompt(tokens.data(), 80);
  const double prompt_error = worst_error(ring.eval(prompt, 0, LogitRows::all), full.eval(prompt, 0, LogitRows::all), n_vocab);
  EXPECT_LE(prompt_error, kRingTolerance);
  double worst = 0;
  for (int64_t pos = 80; pos < 120; ++pos) {
    const std::span<const int32_t> one(&tokens[static_cast<size_t>(pos)], 1);
    worst = std::max(worst, worst_error(ring.eval(one, pos), full.eval(one, pos), n_vocab));
  }
  EXPECT_LE(worst, kRingTolerance);
  std::printf("%s: ring of 32 rows vs full caches: prompt %.3g, steps %.3g\n", GetParam().c_str(), prompt_error,
              worst);
}

// Going back to a cached prefix: near enough, the ring still holds the
// window before it and the logits are those of full caches; further back
// it does not, and the eval is refused naming the ring; from 0, anything.
TEST_P(SlidingRing, ReusedPrefixWithinTheRingOnly) {
  auto f = file();
  auto cpu = weft::make_cpu_device(2);
  Executor ring(*f, *cpu, kRingCtx, {}, ring_options(kStep));
  Executor full(*f, *cpu, kRingCtx, {}, ring_options(0));
  const int64_t n_vocab = ring.params().n_vocab;
  const std::vector<int32_t> tokens = random_tokens(100, n_vocab, 11);
  (void)ring.eval(tokens, 0, LogitRows::none);
  (void)full.eval(tokens, 0, LogitRows::none);
  const std::vector<int32_t> other = random_tokens(3, n_vocab, 12);
  EXPECT_LE(worst_error(ring.eval(other, 97), full.eval(other, 97), n_vocab), kRingTolerance);
  try {
    (void)ring.eval(other, 50);
    ADD_FAILURE() << "an eval from position 50 after 100 was accepted";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("sliding-window ring of 32 rows"), std::string::npos) << e.what();
  }
  EXPECT_LE(worst_error(ring.eval(other, 0, LogitRows::all), full.eval(other, 0, LogitRows::all), n_vocab),
            kRingTolerance);
}

INSTANTIATE_TEST_SUITE_P(Sliding, SlidingRing,
                         ::testing::Values("gemma2", "gemma3", "phi3_window", "llama_window", "gemma3_window_list", "gptoss"),
                         [](const auto& info) { return info.param; });

// Layer 0 here, the rest on a worker, the prompt pipelined in micro-batches
// (clamped to the ring's step): the last token's logits as full caches'.
TEST(SlidingRingSplit, PipelinedOverAWorker) {
  auto f = weft::GgufFile::open((family_files::dir() / "gemma3.gguf").string());
  auto cpu = weft::make_cpu_device(2);
  auto worker_cpu = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions wo;
  wo.log = false;
  weft::rpc::Worker worker(std::vector<weft::Device*>{worker_cpu.get()}, wo);
  worker.start();
  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker.port()));
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {remote.at(0).get(), 1, 6}};
  Executor ring(*f, pl, kRingCtx, {}, ring_options(kStep));
  Executor full(*f, pl, kRingCtx, {}, ring_options(0));
  const int64_t n_vocab = ring.params().n_vocab;
  const std::vector<int32_t> tokens = random_tokens(120, n_vocab, 5);
  EXPECT_LE(worst_error(ring.eval(tokens, 0, LogitRows::last), full.eval(tokens, 0, LogitRows::last), n_vocab),
            kRingTolerance);
  const int32_t next = 42;
  EXPECT_LE(worst_error(ring.eval({&next, 1}, 120), full.eval({&next, 1}, 120), n_vocab), kRingTolerance);
}

// A batch over sequences needs full caches: refused by name.
TEST(SlidingRingBatch, BatchesAreRefused) {
  auto f = weft::GgufFile::open((family_files::dir() / "gemma2.gguf").string());
  auto cpu = weft::make_cpu_device(1);
  Executor ring(*f, *cpu, kRingCtx, {}, ring_options(kStep));
  std::vector<weft::model::BatchToken> batch{{5, 0, 0, true}, {6, 0, 1, true}};
  std::vector<float> logits;
  try {
    ring.eval_batch(batch, 2, logits);
    ADD_FAILURE() << "a batch was accepted with a ring";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_ring_step = 0"), std::string::npos) << e.what();
  }
}

// The plan counts ring rows for sliding layers and n_ctx for the others;
// no ring where it would not be smaller.
TEST(SlidingRingPlan, CountsTheRing) {
  auto f = weft::GgufFile::open((family_files::dir() / "gemma3.gguf").string());
  const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(*f);
  const std::vector<int64_t> bounds{0, 6};
  const size_t full = LlamaModel::plan(*f, bounds, 1024, weft::DType::f16, {}, 0)[0].kv_cache_bytes;
  const size_t ring = LlamaModel::plan(*f, bounds, 1024, weft::DType::f16, {}, kStep)[0].kv_cache_bytes;
  EXPECT_EQ(full, weft::model::kv_cache_bytes(p, 6, 1024));
  // Four of six layers slide (pattern 3): 2 x 1024 + 4 x 32 rows.
  EXPECT_EQ(ring, weft::model::kv_cache_bytes(p, 2, 1024) + weft::model::kv_cache_bytes(p, 4, 32));
  EXPECT_EQ(weft::model::sliding_ring_rows(p, 1024, 512), 544);
  EXPECT_EQ(weft::model::sliding_ring_rows(p, 544, 512), 0);  // not fewer than n_ctx
  EXPECT_EQ(weft::model::sliding_ring_rows(p, 1024, 0), 0);
}

}  // namespace
