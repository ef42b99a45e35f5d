// The model's fused attention (one flash_attn node per layer) against its
// unfused graph (q.k products, soft-cap, mask, soft_max, transposed values):
// the same logits within the family tests' limit and the same greedy
// tokens, for every
// family's attention (grouped heads, sliding windows, soft-caps, per-head
// norms, fused qkv), on the CPU and split over an isolated-memory device.
// The family tests compare the fused graphs with the float64 references.
// Not to f32 rounding: the two round attention differently, so a later
// layer's key or value near an f16 step can land one step apart in the
// cache, which moves the logits by up to ~1e-4 (normalized).
constexpr double kLimit = 1e-4;
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/testing/async.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LoadOptions;

using family_files::normalized_error;

// A 9-token prompt (past gemma2's window of 4), then 40 greedy tokens.
void expect_same(Executor& fused, Executor& unfused) {
  ASSERT_TRUE(fused.fused_attention());
  ASSERT_FALSE(unfused.fused_attention());
  const int64_t vocab = fused.params().n_vocab;
  std::vector<int32_t> seq{1, 17, 42, 99, 5, 8, 13, 21, 34};
  std::vector<float> a = fused.eval(seq, 0), b = unfused.eval(seq, 0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < seq.size(); ++t)
    EXPECT_LE(normalized_error(&a[t * vocab], &b[t * vocab], vocab), kLimit) << "prompt token " << t;
  for (int step = 0; step < 40; ++step) {
    const int32_t next = weft::model::greedy(&b[b.size() - static_cast<size_t>(vocab)], static_cast<int>(vocab));
    ASSERT_EQ(weft::model::greedy(&a[a.size() - static_cast<size_t>(vocab)], static_cast<int>(vocab)), next)
        << "step " << step;
    seq.push_back(next);
    const int64_t pos = static_cast<int64_t>(seq.size()) - 1;
    a = fused.eval({&seq.back(), 1}, pos);
    b = unfused.eval({&seq.back(), 1}, pos);
    ASSERT_LE(normalized_error(a.data(), b.data(), vocab), kLimit) << "step " << step;
  }
}

class FusedAttention : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedAttention, MatchesTheUnfusedGraph) {
  auto file = weft::GgufFile::open((family_files::dir() / (GetParam() + ".gguf")).string());
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  auto cpu = weft::make_cpu_device(2);
  const LoadOptions unfused_options{.fused_attention = false};
  {
    SCOPED_TRACE("one device");
    Executor fused(*file, *cpu, 128);
    Executor unfused(*file, *cpu, 128, {}, unfused_options);
    expect_same(fused, unfused);
  }
  {
    SCOPED_TRACE("split over cpu and an isolated-memory device");
    weft::AsyncOptions o;
    o.isolated_memory = true;
    auto isolated = weft::make_async_device(o);
    const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {isolated.get(), 1, n_layer}};
    Executor fused(*file, pl, 128);
    Executor unfused(*file, pl, 128, {}, unfused_options);
    expect_same(fused, unfused);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FusedAttention,
                         ::testing::Values("llama", "qwen2", "qwen3", "phi3_long", "gemma2", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
