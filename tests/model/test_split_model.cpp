// A llama model split by layers across three devices (the CPU, a worker over
// loopback TCP in this process, an async device with isolated memory) gives
// the same greedy tokens, and nearly the same logits, as the model on the
// CPU alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"
#include "weft/testing/async.h"

namespace {

namespace fs = std::filesystem;
using weft::DType;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

constexpr int64_t kSplitVocab = 37, kSplitDim = 32, kSplitLayers = 3, kSplitHeads = 4, kSplitHeadsKv = 2, kSplitFf = 64,
                  kSplitCtx = 16;

// A tiny llama file (after tests/model/test_llama.cpp): q8_0 matrices, f32
// norms, a separate output matrix unless tied.
void write_tiny(const std::string& path, bool tied) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  std::vector<std::vector<uint8_t>> keep;
  keep.reserve(64);
  weft::GgufWriter w;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> f(static_cast<size_t>(n));
    for (float& x : f) x = norm ? 1.0f + u(rng) : u(rng);
    const DType type = norm ? DType::f32 : DType::q8_0;
    keep.emplace_back(weft::row_bytes(type, n));
    weft::from_f32(type, f.data(), keep.back().data(), n);
    w.add_tensor(name, type, ne, keep.back().data());
  };
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 64);
  w.set_u32("llama.embedding_length", kSplitDim);
  w.set_u32("llama.block_count", kSplitLayers);
  w.set_u32("llama.feed_forward_length", kSplitFf);
  w.set_u32("llama.attention.head_count", kSplitHeads);
  w.set_u32("llama.attention.head_count_kv", kSplitHeadsKv);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 10000.f);
  add("token_embd.weight", {kSplitDim, kSplitVocab}, false);
  add("output_norm.weight", {kSplitDim}, true);
  if (!tied) add("output.weight", {kSplitDim, kSplitVocab}, false);
  const int64_t hd = kSplitDim / kSplitHeads;
  for (int64_t i = 0; i < kSplitLayers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {kSplitDim}, true);
    add(b + "attn_q.weight", {kSplitDim, hd * kSplitHeads}, false);
    add(b + "attn_k.weight", {kSplitDim, hd * kSplitHeadsKv}, false);
    add(b + "attn_v.weight", {kSplitDim, hd * kSplitHeadsKv}, false);
    add(b + "attn_output.weight", {hd * kSplitHeads, kSplitDim}, false);
    add(b + "ffn_norm.weight", {kSplitDim}, true);
    add(b + "ffn_gate.weight", {kSplitDim, kSplitFf}, false);
    add(b + "ffn_up.weight", {kSplitDim, kSplitFf}, false);
    add(b + "ffn_down.weight", {kSplitFf, kSplitDim}, false);
  }
  w.write(path);
}

// Greedy tokens over the prompt then 4 steps, and every eval's logits.
template <typename Eval>
std::vector<int32_t> run(Eval&& eval, std::vector<std::vector<float>>& all_logits) {
  const std::vector<int32_t> prompt{3, 14, 15, 9, 26, 5};
  std::vector<float> logits = eval(std::span<const int32_t>(prompt), 0);
  all_logits.push_back(logits);
  std::vector<int32_t> out{weft::model::greedy(&logits[(prompt.size() - 1) * kSplitVocab], kSplitVocab)};
  int64_t n_past = static_cast<int64_t>(prompt.size());
  for (int step = 0; step < 4; ++step) {
    const int32_t last = out.back();
    logits = eval(std::span<const int32_t>(&last, 1), n_past++);
    all_logits.push_back(logits);
    out.push_back(weft::model::greedy(logits.data(), kSplitVocab));
  }
  return out;
}

class SplitModel : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_split_model_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / (GetParam() ? "tied.gguf" : "untied.gguf")).string();
    write_tiny(path_, GetParam());
    worker_cpu_ = weft::make_cpu_device(1);
    weft::rpc::WorkerOptions o;
    o.log = false;
    worker_ = std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{worker_cpu_.get()}, o);
    worker_->start();
  }
  void TearDown() override {
    worker_.reset();
    fs::remove_all(dir_);
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<weft::Device> worker_cpu_;
  std::unique_ptr<weft::rpc::Worker> worker_;
};

TEST_P(SplitModel, OneTwoAndThreeDevicesMatchOneCpu) {
  auto file = weft::GgufFile::open(path_);
  auto cpu = weft::make_cpu_device(2);

  std::vector<std::vector<float>> ref_logits;
  std::vector<int32_t> ref;
  {
    Executor m(*file, *cpu, kSplitCtx);
    ref = run([&](std::span<const int32_t> t, int64_t p) { return m.eval(t, p); }, ref_logits);
  }

  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker_->port()));
  weft::AsyncOptions ao;
  ao.isolated_memory = true;
  ao.random_delay_ms = 1;
  auto async = weft::make_async_device(ao);
  weft::Device* devs[3] = {cpu.get(), remote.at(0).get(), async.get()};
  // One device alone (a worker, the async device), two devices, every order
  // of the three with one layer each, and one with an empty part.
  const std::vector<std::vector<LayerPlacement>> placements{
      {{devs[1], 0, 3}},
      {{devs[2], 0, 3}},
      {{devs[0], 0, 2}, {devs[1], 2, 3}},
      {{devs[2], 0, 1}, {devs[0], 1, 3}},
      {{devs[0], 0, 1}, {devs[1], 1, 2}, {devs[2], 2, 3}},
      {{devs[2], 0, 1}, {devs[0], 1, 2}, {devs[1], 2, 3}},
      {{devs[1], 0, 2}, {devs[2], 2, 2}, {devs[0], 2, 3}},
  };
  for (const auto& pl : placements) {
    SCOPED_TRACE(std::to_string(pl.size()) + " parts, first device " + pl[0].device->name());
    Executor m(*file, pl, kSplitCtx);
    std::vector<std::vector<float>> logits;
    const std::vector<int32_t> got =
        run([&](std::span<const int32_t> t, int64_t p) { return m.eval(t, p); }, logits);
    EXPECT_EQ(got, ref);
    ASSERT_EQ(logits.size(), ref_logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_EQ(logits[i].size(), ref_logits[i].size());
      for (size_t j = 0; j < logits[i].size(); ++j) ASSERT_NEAR(logits[i][j], ref_logits[i][j], 1e-3) << i << "," << j;
    }
  }
}

// Per generated token, a worker holding layers gets its graph by id (the KV
// length is padded, so consecutive tokens build graphs of one shape) and
// the host's one round trip is the read of its output.
TEST_P(SplitModel, TokensReuseTheWorkersGraphAndWaitOnce) {
  auto file = weft::GgufFile::open(path_);
  auto cpu = weft::make_cpu_device(2);
  const std::string endpoint = "127.0.0.1:" + std::to_string(worker_->port());
  auto remote = weft::make_rpc_devices(endpoint);
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {remote.at(0).get(), 1, kSplitLayers}};
  Executor m(*file, pl, kSplitCtx);
  const std::vector<int32_t> prompt{1, 5, 9};
  m.eval(prompt, 0);
  int64_t n_past = 3;
  const int32_t token = 7;
  m.eval({&token, 1}, n_past++);  // the first single-token graph is sent whole
  for (int step = 0; step < 3; ++step) {
    const weft::RpcStats before = weft::rpc_stats(endpoint);
    m.eval({&token, 1}, n_past++);
    const weft::RpcStats after = weft::rpc_stats(endpoint);
    // Inputs (the activation row, position, a mask row of kSplitCtx floats) and
    // frame headers, but no graph encoding (hundreds of bytes per node).
    EXPECT_LT(after.bytes_sent - before.bytes_sent, 1024u) << "step " << step;
    // One read of its output, which also tells the host the worker's split
    // is done (docs/scheduler.md, implied completion): no wait besides.
    EXPECT_LE(after.round_trips - before.round_trips, 1u) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Output, SplitModel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tied" : "Separate"; });

TEST(SplitModelPlacement, RejectsGapsAndShortRanges) {
  const fs::path path = fs::temp_directory_path() / ("weft_split_bad_" + std::to_string(::getpid()) + ".gguf");
  write_tiny(path.string(), false);
  auto file = weft::GgufFile::open(path.string());
  auto cpu = weft::make_cpu_device(1);
  const std::vector<LayerPlacement> gap{{cpu.get(), 0, 1}, {cpu.get(), 2, 3}};
  const std::vector<LayerPlacement> short_range{{cpu.get(), 0, 2}};
  const std::vector<LayerPlacement> none;
  EXPECT_THROW(Executor(*file, gap, kSplitCtx), weft::Error);
  EXPECT_THROW(Executor(*file, short_range, kSplitCtx), weft::Error);
  EXPECT_THROW(Executor(*file, none, kSplitCtx), weft::Error);
  // Token ids outside the vocabulary and positions past the context are refused.
  const std::vector<LayerPlacement> two{{cpu.get(), 0, 1}, {cpu.get(), 1, 3}};
  Executor m(*file, two, kSplitCtx);
  const int32_t bad = 1 << 30, tok = 1;
  EXPECT_THROW(m.eval(std::span<const int32_t>(&bad, 1), 0), weft::Error);
  EXPECT_THROW(m.eval(std::span<const int32_t>(&tok, 1), kSplitCtx), weft::Error);
  fs::remove(path);
}

}  // namespace
