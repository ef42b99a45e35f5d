// Mixture-of-experts llama models (Mixtral layout): LlamaModel against the
// float64 reference of tests/model/llama_reference.h with the routing written
// here from FACTS.md (softmax over all experts, the top expert_used_count,
// their weights renormalized to sum to 1, the weighted sum of their SwiGLU
// outputs); errors naming a missing expert tensor or a bad key; the plan; a
// split over this CPU and a worker; the demo writer's MoE files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/llama_reference.h"
#include "model/tiny_moe.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace {

using llama_reference::TempFile;
using weft::DType;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

using namespace tiny_moe;

// Prompt of 5 tokens, then 2 greedy single-token steps through the KV cache;
// every token's logits against the reference over the whole sequence.
void check_moe_against_reference(const MoeSpec& spec, const std::string& name, double tol) {
  llama_reference::check_against_reference<TinyMoe>(
      spec, name, tol,
      [&](const TinyMoe& tiny, const llama_reference::CachedRun& run, const std::vector<std::vector<double>>&) {
        EXPECT_EQ(run.params.n_expert, kExperts);
        EXPECT_EQ(run.params.n_expert_used, kUsed);
        // No near-tie between a kept and a dropped expert (the model's
        // probabilities differ from the reference's by ~1e-7 at most), so float32
        // rounding cannot route a token differently; and tokens route differently
        // from one another, so each token must get its own experts.
        std::printf("[ %s ] smallest kept-dropped probability gap %.3g, %zu distinct expert sets\n", name.c_str(),
                    tiny.min_gap, tiny.routes.size());
        EXPECT_GT(tiny.min_gap, 1e-5) << name;
        EXPECT_GE(tiny.routes.size(), 3u) << name;
      });
}

// Tolerances as test_llama.cpp's: f32 accumulation and rare f16 cache
// rounding ties; weights are decoded exactly on both sides; q8_0 weights
// multiply 8-bit activations (~2e-4 normalized here, against a kept-dropped
// routing gap of 1.6e-3 in probability).
TEST(LlamaMoe, MatchesReferenceF32) {
  check_moe_against_reference({}, "moe_f32", 1e-6);
}
TEST(LlamaMoe, MatchesReferenceQ8_0) {
  check_moe_against_reference({.q8 = true}, "moe_q8_0", 2e-3);
}

// Writes a TinyMoe of spec; its load and plan errors must hold every needle.
void expect_error(const MoeSpec& spec, const std::vector<std::string>& needles) {
  llama_reference::expect_load_error<TinyMoe>(spec, "moe_bad", needles);
}

TEST(LlamaMoe, MissingExpertTensorIsNamed) {
  expect_error({.drop = "blk.1.ffn_down_exps.weight"}, {"missing tensor blk.1.ffn_down_exps.weight"});
  expect_error({.drop = "blk.0.ffn_gate_inp.weight"}, {"missing tensor blk.0.ffn_gate_inp.weight"});
}

TEST(LlamaMoe, WrongExpertShapeIsNamed) {
  expect_error({.bad = "blk.0.ffn_up_exps.weight"},
               {"blk.0.ffn_up_exps.weight", "[32, 64, 3]", "expected [32, 64, 4]"});
}

TEST(LlamaMoe, BadExpertUsedCountIsNamed) {
  for (int64_t used : {int64_t{0}, int64_t{-1}, kExperts + 1})
    expect_error({.used = used},
                 {"llama.expert_used_count = " + std::to_string(used), "outside [1, llama.expert_count = 4]"});
  expect_error({.write_used = false}, {"missing key llama.expert_used_count"});
}

// The plan counts the router and the experts in their layer's part.
TEST(LlamaMoe, PlanCountsExperts) {
  TempFile f("moe_plan");
  TinyMoe tiny({}, f.path);
  auto file = weft::GgufFile::open(f.path);
  const int64_t bounds[] = {0, 1, kLayers};
  const auto plan = LlamaModel::plan(*file, bounds, 16);
  ASSERT_EQ(plan.size(), 2u);
  size_t layer0 = 0, rest = 0;
  for (const auto& [name, r] : tiny.t) (name.rfind("blk.0.", 0) == 0 ? layer0 : rest) += r.bytes.size();
  EXPECT_EQ(plan[0].weight_bytes, layer0 + tiny.t.at("token_embd.weight").bytes.size());
  EXPECT_EQ(plan[0].weight_bytes + plan[1].weight_bytes, layer0 + rest);
  EXPECT_GT(layer0, 3 * kDim * kFf * kExperts * sizeof(float));  // the experts are in there
}

// A worker in this process serves the second layer (and, in a second
// placement, both): the greedy tokens equal the CPU's alone.
TEST(LlamaMoe, SplitOverWorkerMatchesCpu) {
  TempFile f("moe_split");
  MoeSpec spec;
  spec.q8 = true;
  TinyMoe tiny(spec, f.path);
  auto file = weft::GgufFile::open(f.path);
  auto cpu = weft::make_cpu_device(2);
  auto worker_cpu = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions o;
  o.log = false;
  weft::rpc::Worker worker(std::vector<weft::Device*>{worker_cpu.get()}, o);
  worker.start();
  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker.port()));

  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5};
  std::vector<int32_t> ref_seq = prompt;
  std::vector<float> ref_logits;
  {
    Executor m(*file, *cpu, 16);
    llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t p) { return m.eval(t, p); }, ref_seq,
                                     4, kVocab, ref_logits);
  }
  const std::vector<std::vector<LayerPlacement>> placements{
      {{cpu.get(), 0, 1}, {remote.at(0).get(), 1, kLayers}},
      {{cpu.get(), 0, 0}, {remote.at(0).get(), 0, kLayers}},
  };
  for (const auto& pl : placements) {
    SCOPED_TRACE("first part [0, " + std::to_string(pl[0].last) + ")");
    Executor m(*file, pl, 16);
    std::vector<int32_t> seq = prompt;
    std::vector<float> logits;
    llama_reference::eval_with_steps(
        [&](std::span<const int32_t> t, int64_t p) { return m.eval(t, p); }, seq, 4, kVocab, logits);
    EXPECT_EQ(seq, ref_seq);
    ASSERT_EQ(logits.size(), ref_logits.size());
    for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], ref_logits[i], 1e-3) << i;
  }
}

// write_demo_model writes the MoE keys and tensors; LlamaModel loads them.
TEST(LlamaMoe, DemoSpecWithExperts) {
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_expert = 4;
  spec.n_expert_used = 2;
  TempFile f("moe_demo");
  weft::model::write_demo_model(f.path, spec);
  auto file = weft::GgufFile::open(f.path);
  EXPECT_TRUE(file->find_tensor("blk.1.ffn_down_exps.weight"));
  EXPECT_FALSE(file->find_tensor("blk.1.ffn_down.weight"));
  int64_t params = 0;
  for (const auto& info : file->tensors())
    params += std::accumulate(info.ne, info.ne + info.n_dims, int64_t{1}, std::multiplies<>());
  EXPECT_EQ(params, weft::model::demo_model_params(spec));
  auto dev = weft::make_cpu_device(2);
  Executor model(*file, *dev, 32);
  EXPECT_EQ(model.params().n_expert, 4);
  EXPECT_EQ(model.params().n_expert_used, 2);
  const std::vector<int32_t> prompt = {1, 300, 301, 302};
  for (float x : model.eval(prompt, 0)) ASSERT_TRUE(std::isfinite(x));

  for (auto [n, k] : {std::pair<int64_t, int64_t>{4, 0}, {4, 5}, {0, 1}, {-1, 0}}) {
    spec.n_expert = n;
    spec.n_expert_used = k;
    EXPECT_THROW(weft::model::write_demo_model(f.path, spec), weft::Error) << n << " " << k;
  }
}

}  // namespace
