// Experts spread over devices (LoadOptions::expert_split,
// docs/experts-split.md): every layer's experts cut into slices on the host
// and on workers in this process, each slice computing only the pairs routed
// to it. The logits must equal the float64 reference of tiny_moe.h and the
// tokens the local run's, on every cut, with the slices overlapped or run
// one after another; a dead worker is an error naming it; bad cuts are
// refused with what was wrong; the plan counts each device's slice.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "model/llama_reference.h"
#include "model/tiny_moe.h"
#include "rpc/local_workers.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace {

using llama_reference::TempFile;
using tiny_moe::kExperts;
using tiny_moe::kLayers;
using tiny_moe::kVocab;
using tiny_moe::MoeSpec;
using tiny_moe::TinyMoe;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

struct Cut {
  std::string what;
  std::vector<LayerPlacement> layers;
  std::vector<int64_t> experts;
};

std::string describe(const std::vector<int64_t>& counts) {
  std::string s;
  for (int64_t c : counts) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

// The prompt, then 3 greedy steps through the KV cache.
void run(Executor& m, std::vector<int32_t>& seq, std::vector<float>& logits) {
  llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t p) { return m.eval(t, p); }, seq, 3,
                                   kVocab, logits);
}

class ExpertsSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    tiny_ = std::make_unique<TinyMoe>(MoeSpec{}, file_.path);
    file = weft::GgufFile::open(file_.path);
    w0 = weft::make_rpc_devices(workers_.endpoint(0));
    w1 = weft::make_rpc_devices(workers_.endpoint(1));
  }

  std::vector<Cut> cuts() const {
    weft::Device* h = cpu.get();
    weft::Device* a = w0.at(0).get();
    weft::Device* b = w1.at(0).get();
    return {
        {"host routes, half the experts on a worker", {{h, 0, kLayers}, {a, kLayers, kLayers}}, {2, 2}},
        {"host routes, experts over three devices", {{h, 0, kLayers}, {a, kLayers, kLayers}, {b, kLayers, kLayers}},
         {1, 2, 1}},
        {"the host holds no expert", {{h, 0, kLayers}, {a, kLayers, kLayers}, {b, kLayers, kLayers}}, {0, 3, 1}},
        {"layers split too (layer 1 routes on the worker)", {{h, 0, 1}, {a, 1, kLayers}}, {3, 1}},
    };
  }

  TempFile file_{"experts_split"};
  std::unique_ptr<TinyMoe> tiny_;
  std::unique_ptr<weft::GgufFile> file;
  std::unique_ptr<weft::Device> cpu = weft::make_cpu_device(2);
  weft::testing::LocalWorkers workers_{2};
  std::vector<std::unique_ptr<weft::Device>> w0, w1;
};

TEST_F(ExpertsSplit, MatchesTheReferenceOnEveryCut) {
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5};
  std::vector<int32_t> ref_seq = prompt;
  std::vector<float> ref_logits;
  {
    Executor m(*file, *cpu, 16);
    run(m, ref_seq, ref_logits);
  }
  const std::vector<std::vector<double>> ref = tiny_->forward(ref_seq);
  EXPECT_GT(tiny_->min_gap, 1e-5);         // no near-tie a rounding could route differently
  EXPECT_GE(tiny_->routes.size(), 3u);     // tokens go to different experts
  for (const Cut& cut : cuts()) {
    for (bool overlap : {true, false}) {
      SCOPED_TRACE(cut.what + ", experts " + describe(cut.experts) + (overlap ? ", overlapped" : ", serialised"));
      weft::model::LoadOptions o;
      o.expert_split = cut.experts;
      o.experts_overlap = overlap;
      Executor m(*file, cut.layers, 16, {}, o);
      for (int64_t l = 0; l < kLayers; ++l) {
        EXPECT_EQ(m.model().layer(l).ffn_gate_exps, nullptr);
        size_t slices = 0;
        for (int64_t c : cut.experts) slices += c > 0 ? 1 : 0;
        EXPECT_EQ(m.model().layer(l).expert_slices.size(), slices);
      }
      std::vector<int32_t> seq = prompt;
      std::vector<float> logits;
      run(m, seq, logits);
      EXPECT_EQ(seq, ref_seq);
      llama_reference::expect_close(logits, ref, 1e-6, "experts_split");
    }
  }
}

// A worker holding expert 3 of 4 is sent the rows of the tokens routed to
// expert 3 and sends back only theirs (routed_rows, SET_TENSOR_ROWS and
// GET_TENSOR_ROWS): against the same prompt with every row sent, the bytes
// each way differ by exactly the unrouted rows less the row lists, and the
// logits are the same bits.
TEST_F(ExpertsSplit, EachWorkerIsSentOnlyItsTokensRows) {
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5, 11, 30};
  const auto n = static_cast<int64_t>(prompt.size());
  tiny_->choices.clear();
  (void)tiny_->forward(prompt);
  std::vector<int64_t> routed(kLayers, 0);  // tokens that chose expert 3, by layer
  for (const auto& [layer, chosen] : tiny_->choices)
    routed[static_cast<size_t>(layer)] += std::count(chosen.begin(), chosen.end(), 3);
  int64_t total = 0;
  for (int64_t r : routed) total += r;
  ASSERT_GT(total, 0);
  ASSERT_LT(total, n * kLayers);  // some rows stay home

  const std::string endpoint = workers_.endpoint(0);
  auto measure = [&](bool routed_rows, std::vector<float>& logits) {
    weft::model::LoadOptions o;
    o.expert_split = {3, 1};
    o.experts_routed_rows = routed_rows;
    const std::vector<LayerPlacement> layers = {{cpu.get(), 0, kLayers}, {w0.at(0).get(), kLayers, kLayers}};
    Executor m(*file, layers, 16, {}, o);
    (void)m.eval(prompt, 0);  // the first eval asks SUPPORTS_OP and sends the graph; the second only its id
    const weft::RpcStats before = weft::rpc_stats(endpoint);
    logits = m.eval(prompt, 0);
    const weft::RpcStats after = weft::rpc_stats(endpoint);
    return std::pair{after.bytes_sent - before.bytes_sent, after.bytes_received - before.bytes_received};
  };
  std::vector<float> whole_logits, rows_logits;
  const auto [whole_sent, whole_received] = measure(false, whole_logits);
  const auto [rows_sent, rows_received] = measure(true, rows_logits);
  EXPECT_EQ(rows_logits, whole_logits);

  constexpr int64_t kRow = tiny_moe::kDim * 4;
  int64_t saved_sent = 0, saved_received = 0;
  for (int64_t r : routed) {
    // In: SET_TENSOR (24 bytes of fields, every row) or, with a row left
    // out, SET_TENSOR_ROWS (32 bytes of fields, a number per listed row);
    // the GET_TENSOR_ROWS request has 4 bytes more than GET_TENSOR's.
    saved_sent += r == n ? 0 : n * kRow + 24 - (32 + r * (4 + kRow));
    saved_sent -= 4;
    // Out: every row, or the listed ones with their count and numbers.
    saved_received += n * kRow - (4 + r * (4 + kRow));
  }
  EXPECT_EQ(static_cast<int64_t>(whole_sent - rows_sent), saved_sent);
  EXPECT_EQ(static_cast<int64_t>(whole_received - rows_received), saved_received);
}

// Several sequences in one batch (eval_batch) route token by token too.
TEST_F(ExpertsSplit, BatchesOfSequencesMatchTheirSingleRuns) {
  weft::model::LoadOptions o;
  o.expert_split = {2, 1, 1};
  const Cut cut = cuts()[1];
  Executor split(*file, cut.layers, 32, {}, o);
  Executor local(*file, *cpu, 16);
  const std::vector<std::vector<int32_t>> prompts = {{3, 14, 15}, {9, 26, 5}};
  std::vector<weft::model::BatchToken> batch;
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i)
      batch.push_back({prompts[static_cast<size_t>(s)][static_cast<size_t>(i)], i, s, i == 2});
  std::vector<float> got;
  split.eval_batch(batch, 2, got);
  ASSERT_EQ(got.size(), 2 * static_cast<size_t>(kVocab));
  for (int s = 0; s < 2; ++s) {
    const std::vector<float> want = local.eval(prompts[static_cast<size_t>(s)], 0, weft::model::LogitRows::last);
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_NEAR(got[static_cast<size_t>(s) * want.size() + j], want[j], 1e-5) << "sequence " << s << ", logit " << j;
  }
}

// The point of experts_overlap: the layer's own device computes its slice
// while the other device computes the other. Two async devices whose every
// compute sleeps kDelayMs stand in for two machines (sleeps overlap on any
// CPU): overlapped, their compute windows meet for about a delay per layer
// and eval; serialised (the own slice first, then the other sent), never.
// An order check, not a speed check.
TEST_F(ExpertsSplit, OverlappedSlicesComputeAtOnce) {
  constexpr double kDelayMs = 30;
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapped" : "serialised");
    weft::AsyncOptions ao;
    ao.delay_ms = kDelayMs;
    ao.name = "slow_a";
    auto a = weft::make_async_device(ao);
    ao.name = "slow_b";
    auto b = weft::make_async_device(ao);
    {
      weft::model::LoadOptions o;
      o.expert_split = {2, 2};
      o.experts_overlap = overlap;
      const std::vector<LayerPlacement> pl{{a.get(), 0, kLayers}, {b.get(), kLayers, kLayers}};
      Executor m(*file, pl, 16, {}, o);
      const std::vector<float> logits = m.eval(std::vector<int32_t>{3, 14, 15, 9}, 0);
      ASSERT_EQ(logits.size(), 4 * static_cast<size_t>(kVocab));
    }
    const auto la = weft::async_device_compute_log(*a);
    const auto lb = weft::async_device_compute_log(*b);
    const double overlap_ms = 1e3 * weft::compute_overlap_seconds(la, lb);
    ASSERT_GE(lb.size(), static_cast<size_t>(kLayers)) << "the second device computed no slice";
    if (overlap)
      EXPECT_GE(overlap_ms, 0.5 * kDelayMs * kLayers) << la.size() << " computes on one device, " << lb.size();
    else
      EXPECT_LT(overlap_ms, 0.25 * kDelayMs) << la.size() << " computes on one device, " << lb.size();
  }
}

// A worker that dies while it holds a slice ends the next eval with an error
// naming it (no hang, no abort), and the model can then be destroyed.
TEST_F(ExpertsSplit, ADeadWorkerEndsTheEvalWithAnErrorNamingIt) {
  weft::model::LoadOptions o;
  o.expert_split = {2, 2};
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, kLayers}, {w0.at(0).get(), kLayers, kLayers}};
  auto m = std::make_unique<Executor>(*file, pl, 16, weft::model::LoadProgress{}, o);
  const std::vector<int32_t> prompt = {3, 14, 15};
  EXPECT_EQ(m->eval(prompt, 0).size(), prompt.size() * static_cast<size_t>(kVocab));
  const std::string dead = workers_.endpoint(0);
  workers_.worker(0).stop();
  const int32_t next = 9;
  try {
    (void)m->eval({&next, 1}, static_cast<int64_t>(prompt.size()));
    ADD_FAILURE() << "an eval went on without the worker holding half the experts";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dead), std::string::npos) << e.what();
  }
  m.reset();
}

// Counts that do not cut n_expert experts over the placements, and a model
// without experts, are refused with what was wrong.
TEST_F(ExpertsSplit, BadCutsAreNamed) {
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, kLayers}, {w0.at(0).get(), kLayers, kLayers}};
  const std::vector<std::pair<std::vector<int64_t>, std::string>> bad{
      {{2, 1}, "the parts hold 3 experts; the model has 4"},
      {{2, 2, 0}, "an expert split of 3 counts for 2 placements"},
      {{-1, 5}, "part 0 holds -1 of 4 experts"},
  };
  for (const auto& [counts, needle] : bad) {
    weft::model::LoadOptions o;
    o.expert_split = counts;
    try {
      Executor m(*file, pl, 16, {}, o);
      ADD_FAILURE() << "loaded with experts " << describe(counts);
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  TempFile dense("experts_split_dense");
  weft::model::write_demo_model(dense.path, weft::model::tiny_demo_spec());
  auto dense_file = weft::GgufFile::open(dense.path);
  weft::model::LoadOptions o;
  o.expert_split = {1, 1};
  EXPECT_THROW(
      {
        try {
          Executor m(*dense_file, pl, 16, {}, o);
        } catch (const weft::Error& e) {
          EXPECT_NE(std::string(e.what()).find("a model without experts"), std::string::npos) << e.what();
          throw;
        }
      },
      weft::Error);
}

// The plan puts each slice's bytes on its part: the host keeps the dense
// weights and its experts, a worker only its experts.
TEST_F(ExpertsSplit, PlanCountsEachSlice) {
  const int64_t bounds[] = {0, kLayers, kLayers};
  const int64_t experts[] = {1, 3};
  const auto whole = LlamaModel::plan(*file, bounds, 16);
  const auto split = LlamaModel::plan(*file, bounds, 16, weft::DType::f16, experts);
  ASSERT_EQ(split.size(), 2u);
  size_t expert_bytes = 0;
  for (const auto& [name, r] : tiny_->t)
    if (name.find("_exps.") != std::string::npos) expert_bytes += r.bytes.size();
  const size_t output_norm = tiny_->t.at("output_norm.weight").bytes.size();  // the last part's
  EXPECT_EQ(whole[1].weight_bytes, output_norm);
  EXPECT_EQ(split[1].weight_bytes, output_norm + expert_bytes / kExperts * 3);
  EXPECT_EQ(split[0].weight_bytes, whole[0].weight_bytes - expert_bytes / kExperts * 3);
  EXPECT_EQ(split[0].n_experts, 1);
  EXPECT_EQ(split[1].n_experts, 3);
  EXPECT_EQ(split[1].kv_cache_bytes, 0u);
}

}  // namespace
