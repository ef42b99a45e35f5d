// gpt-oss (docs/models.md): what weft reads from the family test file, both
// attention paths against the float64 reference (tests/model/families:
// sinks, the clamped SwiGLU, router and expert biases, softmax over the
// top-k logits, alternating windows, YaRN, one MXFP4 expert tensor), and an
// expert split refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"

namespace {

using weft::model::LlamaModel;
using weft::Executor;
namespace fs = std::filesystem;

constexpr double kGptOssTolerance = 1e-4;  // as test_families.cpp

fs::path gguf() { return family_files::dir() / "gptoss.gguf"; }

double worst_error(Executor& m, const family_files::Reference& ref) {
  double worst = 0;
  for (const family_files::Eval& ev : ref.evals) {
    const std::vector<float> logits = m.eval(ev.tokens, ev.n_past);
    if (logits.size() != ev.logits.size()) return INFINITY;
    for (size_t t = 0; t < ev.tokens.size(); ++t) {
      const size_t at = t * static_cast<size_t>(ref.n_vocab);
      worst = std::max(worst, family_files::normalized_error(&logits[at], &ev.logits[at], ref.n_vocab));
    }
  }
  return worst;
}

TEST(GptOss, ParamsFromTheFile) {
  auto file = weft::GgufFile::open(gguf().string());
  const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(*file);
  using namespace weft::model;
  EXPECT_EQ(p.arch, Arch::gptoss);
  EXPECT_EQ(p.rope_mode, weft::RopeMode::neox);
  EXPECT_EQ(p.ffn_act, FfnActivation::swiglu_oai);
  EXPECT_EQ(p.expert_gating, ExpertGating::softmax_weight);
  EXPECT_FALSE(p.expert_weights_norm);
  EXPECT_TRUE(p.expert_biases);
  EXPECT_TRUE(p.attn_sinks);
  // The standard engine's pattern 2: layers 0 and 2 slide, 1 and 3 are global.
  EXPECT_EQ(p.n_swa, 4);
  EXPECT_TRUE(p.is_swa(0) && p.is_swa(2));
  EXPECT_FALSE(p.is_swa(1) || p.is_swa(3));
  EXPECT_EQ(p.rope_scaling, RopeScalingType::yarn);
  EXPECT_NEAR(p.rope_attn_factor, 1 + 0.1 * std::log(32.0), 1e-6);
  EXPECT_FLOAT_EQ(p.attn_scale, 0.25f);  // 1 / sqrt(head_dim 16)
  const std::string d = describe(p);
  for (const char* part : {"model: gpt-oss", "attention sinks", "clamped SwiGLU", "softmax over the top 2"})
    EXPECT_NE(d.find(part), std::string::npos) << part << " in\n" << d;
}

// Fused attention (flash_attn with sinks) where the device runs it, the
// unfused products and soft_max with sinks otherwise: both match.
TEST(GptOss, BothAttentionPathsMatchTheReference) {
  const family_files::Reference ref = family_files::read_reference(family_files::dir() / "gptoss.ref");
  auto file = weft::GgufFile::open(gguf().string());
  auto cpu = weft::make_cpu_device(2);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "unfused");
    weft::model::LoadOptions o;
    o.fused_attention = fused;
    Executor m(*file, *cpu, ref.n_ctx, {}, o);
    EXPECT_EQ(m.fused_attention(), fused);
    const double worst = worst_error(m, ref);
    EXPECT_LE(worst, kGptOssTolerance);
    std::printf("gptoss %s: largest normalized error %.3g\n", fused ? "fused" : "unfused", worst);
  }
}

// A pair routed to another device's slice comes back as zeros, to which a
// bias row must not be added: refused until slices carry their biases.
TEST(GptOss, ExpertSplitIsRefusedByName) {
  auto file = weft::GgufFile::open(gguf().string());
  auto a = weft::make_cpu_device(1);
  auto b = weft::make_cpu_device(1);
  const std::vector<weft::LayerPlacement> pl{{a.get(), 0, 2}, {b.get(), 2, 4}};
  weft::model::LoadOptions o;
  o.expert_split = {2, 2};
  try {
    Executor m(*file, pl, 64, {}, o);
    ADD_FAILURE() << "an expert split of gpt-oss loaded";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("expert biases (gpt-oss)"), std::string::npos) << e.what();
  }
}

}  // namespace
