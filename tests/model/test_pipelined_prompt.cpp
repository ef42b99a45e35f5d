// Pipelined prompts (LoadOptions::pipeline_micro_batch): a long prompt over
// several devices goes in micro-batches submitted without waiting, two
// memory sets in flight; the result must be the one batch's, on every mix
// of devices: two workers (their activations pushed worker to worker), the
// host CPU between or around them, and an async device with memory of its
// own and random delays (so micro-batches really overlap).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "rpc/local_workers.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace {

namespace fs = std::filesystem;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LogitRows;

constexpr int64_t kPromptCtx = 128;
constexpr int kPromptTokens = 45;  // 5 micro-batches of 8, then 5 tokens
constexpr int kPromptSteps = 5;

struct Generated {
  std::vector<int32_t> tokens;             // greedy after the prompt
  std::vector<std::vector<float>> logits;  // the prompt's last row, then each step's
};

Generated generate(Executor& m) {
  const int vocab = static_cast<int>(m.params().n_vocab);
  std::vector<int32_t> prompt;
  for (int i = 0; i < kPromptTokens; ++i) prompt.push_back(1 + (i * 37) % (vocab - 1));
  Generated r;
  std::vector<float> logits;
  m.eval(prompt, 0, logits, LogitRows::last);
  int64_t n_past = kPromptTokens;
  for (int step = 0; step < kPromptSteps; ++step) {
    r.logits.push_back(logits);
    const int32_t next = weft::model::greedy(logits.data() + logits.size() - static_cast<size_t>(vocab), vocab);
    r.tokens.push_back(next);
    m.eval({&next, 1}, n_past++, logits, LogitRows::last);
  }
  return r;
}

class PipelinedPrompt : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_pipelined_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "model.gguf").string();
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 4;
    weft::model::write_demo_model(path_, spec);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string endpoint(int i) const { return workers_.endpoint(i); }

  fs::path dir_;
  std::string path_;
  weft::testing::LocalWorkers workers_{2};
};

TEST_F(PipelinedPrompt, MicroBatchesMatchOneBatchOnEveryMix) {
  auto file = weft::GgufFile::open(path_);
  auto cpu = weft::make_cpu_device(2);
  Generated ref;
  {
    Executor m(*file, *cpu, kPromptCtx);
    ref = generate(m);
  }
  auto w0 = weft::make_rpc_devices(endpoint(0));
  auto w1 = weft::make_rpc_devices(endpoint(1));
  weft::AsyncOptions ao;
  ao.isolated_memory = true;
  ao.random_delay_ms = 1;
  auto async = weft::make_async_device(ao);
  weft::Device* a = w0.at(0).get();
  weft::Device* b = w1.at(0).get();
  const std::vector<std::vector<LayerPlacement>> placements{
      {{a, 0, 2}, {b, 2, 4}},                       // every layer on the workers
      {{cpu.get(), 0, 1}, {a, 1, 3}, {b, 3, 4}},     // host, then two workers
      {{a, 0, 2}, {cpu.get(), 2, 3}, {b, 3, 4}},     // the host between them
      {{async.get(), 0, 2}, {cpu.get(), 2, 4}},      // an async device with random delays
  };
  for (int micro : {8, 16}) {
    for (const auto& pl : placements) {
      SCOPED_TRACE("micro-batch " + std::to_string(micro) + ", " + std::to_string(pl.size()) + " parts, first " +
                   pl[0].device->name());
      weft::model::LoadOptions o;
      o.pipeline_micro_batch = micro;
      Executor m(*file, pl, kPromptCtx, {}, o);
      const Generated got = generate(m);
      EXPECT_EQ(got.tokens, ref.tokens);
      ASSERT_EQ(got.logits.size(), ref.logits.size());
      for (size_t i = 0; i < got.logits.size(); ++i) {
        ASSERT_EQ(got.logits[i].size(), ref.logits[i].size());
        for (size_t j = 0; j < got.logits[i].size(); ++j)
          ASSERT_NEAR(got.logits[i][j], ref.logits[i][j], 1e-3) << "eval " << i << ", logit " << j;
      }
    }
  }
}

// The point of micro-batches: while the second stage computes micro-batch
// i, the first computes i + 1. Two workers over async devices whose every
// compute sleeps kDelayMs stand in for two machines (sleeps overlap on any
// CPU). A 45-token prompt in micro-batches of 8 must be 6 computes on each
// stage whose windows overlap for several micro-batches' time; as one batch
// (pipeline_micro_batch 0) it is one compute each, one after the other. An
// order check, not a speed check: it fails if micro-batches are not made,
// or are made but each waited for before the next is sent.
TEST_F(PipelinedPrompt, MicroBatchesKeepBothStagesBusyAtOnce) {
  constexpr double kDelayMs = 40;
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_layer = 4;
  spec.tied = false;  // the output on the last worker: each micro-batch is one compute per worker
  const std::string untied = (dir_ / "untied.gguf").string();
  weft::model::write_demo_model(untied, spec);
  auto file = weft::GgufFile::open(untied);
  std::vector<int32_t> prompt;
  for (int i = 0; i < kPromptTokens; ++i) prompt.push_back(1 + (i * 37) % 599);
  for (int64_t micro : {int64_t{8}, int64_t{0}}) {
    SCOPED_TRACE("micro-batch " + std::to_string(micro));
    weft::testing::LocalWorkers slow(2, [&](int i) {
      weft::AsyncOptions ao;
      ao.delay_ms = kDelayMs;
      ao.name = "slow" + std::to_string(i);
      return weft::make_async_device(ao);
    });
    {
      auto r0 = weft::make_rpc_devices(slow.endpoint(0));
      auto r1 = weft::make_rpc_devices(slow.endpoint(1));
      const std::vector<LayerPlacement> pl{{r0.at(0).get(), 0, 2}, {r1.at(0).get(), 2, 4}};
      weft::model::LoadOptions o;
      o.pipeline_micro_batch = micro;
      Executor m(*file, pl, kPromptCtx, {}, o);
      std::vector<float> logits;
      m.eval(prompt, 0, logits, LogitRows::last);
      ASSERT_EQ(logits.size(), 600u);
    }
    const auto a = weft::async_device_compute_log(slow.device(0));
    const auto b = weft::async_device_compute_log(slow.device(1));
    const double overlap_ms = 1e3 * weft::compute_overlap_seconds(a, b);
    if (micro > 0) {
      EXPECT_GE(a.size(), 6u);
      EXPECT_GE(b.size(), 6u);
      EXPECT_GE(overlap_ms, 3 * kDelayMs) << a.size() << " computes on one worker, " << b.size() << " on the other";
    } else {
      EXPECT_LE(a.size(), 2u);  // the prompt, and at most a warm-up of the graph
      EXPECT_LT(overlap_ms, kDelayMs / 2);
    }
  }
}

// LogitRows::none fills the cache and returns no logits; what follows sees
// the cache as after any other eval.
TEST_F(PipelinedPrompt, NoLogitRowsFillTheCacheOnly) {
  auto file = weft::GgufFile::open(path_);
  auto cpu = weft::make_cpu_device(2);
  Executor m(*file, *cpu, kPromptCtx);
  const std::vector<int32_t> prompt{1, 9, 17, 33, 65};
  std::vector<float> logits{1.0f};
  m.eval(std::span(prompt).first(4), 0, logits, LogitRows::none);
  EXPECT_TRUE(logits.empty());
  m.eval(std::span(prompt).last(1), 4, logits, LogitRows::last);
  Executor whole(*file, *cpu, kPromptCtx);
  std::vector<float> ref;
  whole.eval(prompt, 0, ref, LogitRows::last);
  ASSERT_EQ(logits.size(), ref.size());
  for (size_t j = 0; j < ref.size(); ++j) ASSERT_NEAR(logits[j], ref[j], 1e-4) << j;
}

}  // namespace
