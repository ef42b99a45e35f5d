// LlamaModel reuses its last graph across evals of the same shape: the
// logits are bit-identical to those of graphs built and allocated afresh for
// every call, over 100 generated tokens (several KV buckets), on one device
// and split through the scheduler (including a device with its own memory,
// whose inputs are staged through the host).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "runtime/executor_testing.h"
#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/testing/async.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

// Greedy generation of `steps` tokens after a prompt, one token per eval;
// every eval's logits, concatenated.
std::vector<float> generate(Executor& m, int steps) {
  const int64_t vocab = m.params().n_vocab;
  std::vector<int32_t> seq{1, 17, 42, 99, 5};
  std::vector<float> all = m.eval(seq, 0);
  for (int i = 0; i < steps; ++i) {
    const int32_t next = weft::model::greedy(&all[all.size() - static_cast<size_t>(vocab)], static_cast<int>(vocab));
    seq.push_back(next);
    const std::vector<float> logits = m.eval({&seq.back(), 1}, static_cast<int64_t>(seq.size()) - 1);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

class GraphReuse : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphReuse, LogitsEqualFreshGraphs) {
  auto file = weft::GgufFile::open((family_files::dir() / (GetParam() + ".gguf")).string());
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  constexpr int64_t kCtx = 128;
  auto cpu = weft::make_cpu_device(2);
  weft::AsyncOptions o;
  o.isolated_memory = true;
  auto isolated = weft::make_async_device(o);

  {
    SCOPED_TRACE("one device");
    Executor reused(*file, *cpu, kCtx);
    Executor fresh(*file, *cpu, kCtx);
    weft::ExecutorTestAccess::set_reuse_graphs(fresh, false);
    expect_bit_identical(generate(reused, 100), generate(fresh, 100));
  }
  {
    SCOPED_TRACE("split over cpu and an isolated-memory device");
    const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {isolated.get(), 1, n_layer}};
    Executor reused(*file, pl, kCtx);
    Executor fresh(*file, pl, kCtx);
    weft::ExecutorTestAccess::set_reuse_graphs(fresh, false);
    expect_bit_identical(generate(reused, 100), generate(fresh, 100));
  }
}

// LogitRows::last computes the output for the last token alone: its logits
// are the last row of LogitRows::all's (to the rounding of a one-row product
// against a batched one), and the greedy tokens after it are the same.
void expect_last_row_matches(Executor& all, Executor& last) {
  const int64_t vocab = all.params().n_vocab;
  std::vector<int32_t> seq{1, 17, 42, 99, 5, 8, 13};
  std::vector<float> a = all.eval(seq, 0);
  std::vector<float> l = last.eval(seq, 0, weft::model::LogitRows::last);
  ASSERT_EQ(a.size(), seq.size() * static_cast<size_t>(vocab));
  for (int step = 0; step < 20; ++step) {
    ASSERT_EQ(l.size(), static_cast<size_t>(vocab));
    const float* a_last = &a[a.size() - static_cast<size_t>(vocab)];
    double num = 0, den = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      num += (l[i] - a_last[i]) * (l[i] - a_last[i]);
      den += a_last[i] * a_last[i];
    }
    ASSERT_LE(std::sqrt(num / den), 1e-5) << "step " << step;
    const int32_t next = weft::model::greedy(a_last, static_cast<int>(vocab));
    ASSERT_EQ(weft::model::greedy(l.data(), static_cast<int>(vocab)), next) << "step " << step;
    seq.push_back(next);
    const int64_t pos = static_cast<int64_t>(seq.size()) - 1;
    a = all.eval({&seq.back(), 1}, pos);
    last.eval({&seq.back(), 1}, pos, l, weft::model::LogitRows::last);
  }
}

TEST_P(GraphReuse, LastRowOnlyMatchesTheLastRowOfAll) {
  auto file = weft::GgufFile::open((family_files::dir() / (GetParam() + ".gguf")).string());
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  auto cpu = weft::make_cpu_device(2);
  weft::AsyncOptions o;
  o.isolated_memory = true;
  auto isolated = weft::make_async_device(o);
  {
    SCOPED_TRACE("one device");
    Executor all(*file, *cpu, 128);
    Executor last(*file, *cpu, 128);
    expect_last_row_matches(all, last);
  }
  {
    SCOPED_TRACE("split over cpu and an isolated-memory device");
    const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {isolated.get(), 1, n_layer}};
    Executor all(*file, pl, 128);
    Executor last(*file, pl, 128);
    expect_last_row_matches(all, last);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GraphReuse, ::testing::Values("llama", "gemma2", "phi3_long"),
                         [](const auto& info) { return info.param; });

}  // namespace
