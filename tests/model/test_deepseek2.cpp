// DeepSeek-V2/V3 (deepseek2) beyond the family matrix of test_families.cpp:
// the latent cache's layout, the unfused attention path, and routed experts
// cut over a worker (LoadOptions::expert_split), each against the float64
// reference of tests/model/families (which decompresses per-head keys and
// values, so it checks the absorbed graph).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu/bind_graph.h"
#include "model/family_files.h"
#include "model/llama_ffn.h"
#include "rpc/local_workers.h"
#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

constexpr double kDeepseekTolerance = 1e-4;  // as test_families.cpp: f32 through a few layers

// Every eval of the case's reference through m, each token's logits within
// kDeepseekTolerance; returns the largest normalized error.
double check_against_reference(Executor& m, const family_files::Reference& ref) {
  double worst = 0;
  for (const family_files::Eval& ev : ref.evals) {
    const std::vector<float> logits = m.eval(ev.tokens, ev.n_past);
    EXPECT_EQ(logits.size(), ev.logits.size());
    if (logits.size() != ev.logits.size()) return INFINITY;
    for (size_t t = 0; t < ev.tokens.size(); ++t) {
      const size_t at = t * static_cast<size_t>(ref.n_vocab);
      const double err = family_files::normalized_error(&logits[at], &ev.logits[at], ref.n_vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, kDeepseekTolerance) << "n_past " << ev.n_past << ", token " << t;
    }
  }
  return worst;
}

struct MlaCase {
  std::unique_ptr<weft::GgufFile> file;
  family_files::Reference ref;
};

MlaCase open_case(const std::string& name) {
  const auto dir = family_files::dir();
  return {weft::GgufFile::open((dir / (name + ".gguf")).string()), family_files::read_reference(dir / (name + ".ref"))};
}

class Deepseek2 : public ::testing::TestWithParam<std::string> {};

// One cache tensor per layer, a row of latent and rope key per position; no
// value cache.
TEST_P(Deepseek2, CachesTheLatentOnly) {
  MlaCase c = open_case(GetParam());
  auto cpu = weft::make_cpu_device(2);
  Executor m(*c.file, *cpu, c.ref.n_ctx);
  const auto& p = m.params();
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const weft::Tensor* k = m.model().layer(il).k_cache;
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->ne[0], p.n_lora_kv + p.n_rot);
    EXPECT_EQ(k->ne[1], c.ref.n_ctx);
    EXPECT_EQ(k->ne[2], 1);
    EXPECT_EQ(m.model().layer(il).v_cache, nullptr);
  }
}

// Weights are used in place from the file's mapping, except an older
// file's attn_k_b / attn_v_b, cut from its attn_kv_b at load (f32 copies):
// per layer 4 heads x (16 x 32 + 32 x 12) floats for deepseek2_lite.
TEST_P(Deepseek2, WeightsCutAtLoadAreCopiedBesideTheMapping) {
  MlaCase c = open_case(GetParam());
  auto cpu = weft::make_cpu_device(2);
  Executor m(*c.file, *cpu, c.ref.n_ctx);
  const auto plan = LlamaModel::plan(*c.file, std::vector<int64_t>{0, m.params().n_layer}, c.ref.n_ctx);
  const size_t cut = GetParam() == "deepseek2_lite" ? size_t{3} * 4 * (16 * 32 + 32 * 12) * sizeof(float) : 0;
  EXPECT_EQ(m.mapped_weight_bytes() + cut, plan.at(0).weight_bytes);
}

// The unfused products (soft_max over mul_mat, values a packed transposed
// copy of the latent columns) match the reference as flash_attn does.
TEST_P(Deepseek2, UnfusedAttentionMatchesReference) {
  MlaCase c = open_case(GetParam());
  auto cpu = weft::make_cpu_device(2);
  weft::model::LoadOptions o;
  o.fused_attention = false;
  Executor m(*c.file, *cpu, c.ref.n_ctx, {}, o);
  ASSERT_FALSE(m.fused_attention());
  const double worst = check_against_reference(m, c.ref);
  std::printf("%s unfused: largest normalized error %.3g\n", GetParam().c_str(), worst);
}

// Routed experts cut between this CPU and a worker (the leading dense layer
// has none to cut), with the layers after the first on the worker too.
TEST_P(Deepseek2, ExpertSplitOverAWorkerMatchesReference) {
  MlaCase c = open_case(GetParam());
  auto cpu = weft::make_cpu_device(2);
  weft::testing::LocalWorkers workers{1};
  auto remote = weft::make_rpc_devices(workers.endpoint(0));
  const auto& p = weft::model::LlamaParams::from_gguf(*c.file);
  const int64_t half = p.n_expert / 2;
  for (const bool layers_split : {false, true}) {
    SCOPED_TRACE(layers_split ? "layers 1.. on the worker" : "every layer on the host");
    const std::vector<LayerPlacement> pl =
        layers_split ? std::vector<LayerPlacement>{{cpu.get(), 0, 1}, {remote.at(0).get(), 1, p.n_layer}}
                     : std::vector<LayerPlacement>{{cpu.get(), 0, p.n_layer}, {remote.at(0).get(), p.n_layer, p.n_layer}};
    weft::model::LoadOptions o;
    o.expert_split = {half, p.n_expert - half};
    Executor m(*c.file, pl, c.ref.n_ctx, {}, o);
    EXPECT_TRUE(m.model().layer(0).expert_slices.empty());  // dense
    EXPECT_EQ(m.model().layer(1).expert_slices.size(), 2u);
    check_against_reference(m, c.ref);
  }
}

// A batch over two sequences (what `weft serve` runs): each sequence's
// latent rows in its own part of the cache, every token's logits as the
// reference's for that prompt.
TEST_P(Deepseek2, BatchOfTwoSequencesMatchesReference) {
  MlaCase c = open_case(GetParam());
  auto cpu = weft::make_cpu_device(2);
  Executor m(*c.file, *cpu, c.ref.n_ctx);
  const family_files::Eval& prompt = c.ref.evals.front();
  std::vector<weft::model::BatchToken> batch;
  for (int32_t seq = 0; seq < 2; ++seq)
    for (size_t i = 0; i < prompt.tokens.size(); ++i)
      batch.push_back({prompt.tokens[i], static_cast<int32_t>(i), seq, true});
  std::vector<float> logits;
  m.eval_batch(batch, 2, logits);
  const size_t n = prompt.tokens.size(), vocab = static_cast<size_t>(c.ref.n_vocab);
  ASSERT_EQ(logits.size(), 2 * n * vocab);
  for (size_t b = 0; b < 2 * n; ++b)
    EXPECT_LE(family_files::normalized_error(&logits[b * vocab], &prompt.logits[(b % n) * vocab], c.ref.n_vocab),
              kDeepseekTolerance)
        << "batch token " << b;
}

INSTANTIATE_TEST_SUITE_P(Cases, Deepseek2, ::testing::Values("deepseek2", "deepseek2_lite"),
                         [](const auto& info) { return info.param; });

}  // namespace

namespace {

// Group-limited selection (detail::limit_expert_groups) on scores of 12
// experts in 4 groups of 3, 2 groups kept, for 5 tokens, against the rule
// computed here: a group's score is the sum of its two best; the experts of
// the other groups become -inf, the kept ones are unchanged.
TEST(Deepseek2Routing, GroupLimitKeepsTheBestGroupsExperts) {
  weft::model::LlamaParams p;
  p.n_expert = 12;
  p.n_expert_groups = 4;
  p.n_group_used = 2;
  const int64_t n = 5, per = 3;
  weft::Context ctx;
  weft::Tensor* sel = ctx.new_tensor(weft::DType::f32, {p.n_expert, n});
  sel->flags |= weft::kFlagInput;
  weft::Tensor* out = weft::model::detail::limit_expert_groups(ctx, p, sel);
  weft::Graph g;
  g.expand(out);
  auto cpu = weft::make_cpu_device(1);
  auto buffer = weft::testing::bind_graph(*cpu, g);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> in(static_cast<size_t>(p.n_expert * n));
  for (float& v : in) v = normal(rng);
  std::memcpy(sel->data, in.data(), in.size() * sizeof(float));
  cpu->create_backend()->compute(g);
  const auto* got = static_cast<const float*>(out->data);
  for (int64_t t = 0; t < n; ++t) {
    const float* s = &in[static_cast<size_t>(t * p.n_expert)];
    std::vector<std::pair<double, int>> score;
    for (int gi = 0; gi < 4; ++gi) {
      std::vector<float> v(s + gi * per, s + (gi + 1) * per);
      std::sort(v.begin(), v.end(), std::greater<>());
      score.push_back({-(static_cast<double>(v[0]) + v[1]), gi});
    }
    std::sort(score.begin(), score.end());
    for (int64_t e = 0; e < p.n_expert; ++e) {
      const int gi = static_cast<int>(e / per);
      const bool kept = gi == score[0].second || gi == score[1].second;
      const float want = kept ? s[e] : -INFINITY;
      EXPECT_EQ(got[t * p.n_expert + e], want) << "token " << t << ", expert " << e;
    }
  }
}

}  // namespace
