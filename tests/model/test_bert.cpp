// BERT encoders (LlamaParams::encoder, src/model/bert_model.cpp): the hidden
// states of every token against the float64 reference (bert_reference.h),
// f32 and q8_0 matrices, alone and as a batch of sequences, on this CPU and
// split by layers with a worker; pooled and normalized as embeddings are;
// what an encoder cannot do is refused naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/bert_reference.h"
#include "rpc/local_workers.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/rpc/client.h"
#include "weft/runtime/executor.h"

namespace {

using bert_reference::BertShape;
using weft::DType;
using weft::Executor;
using weft::model::LogitRows;

constexpr int64_t kBertCtx = 32;

// A tiny BERT file (vocabulary 40, width 64, 2 layers of 4 heads) of
// random weights, its matrices of `type`, and the reference's view of it.
struct TinyBert {
  BertShape s{.vocab = 40, .dim = 64, .layers = 2, .heads = 4, .ff = 96};
  bert_reference::TempFile path;
  bert_reference::RefTensors t;
  std::unique_ptr<weft::GgufFile> file;

  TinyBert(const std::string& name, unsigned seed, DType type)
      : path(name), t(bert_reference::make_bert_tensors(s, seed, type)) {
    bert_reference::write_bert_model(path.path, s, t);
    file = weft::GgufFile::open(path.path);
  }
};

// The largest difference of a token's row from the reference's, relative to
// the reference row's largest value.
double row_error(const float* got, const std::vector<double>& want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / scale;
}

// Each token's row within tol of the reference's (relative to its largest
// value); prints the worst.
void expect_rows(const std::vector<float>& got, const std::vector<std::vector<double>>& want, int64_t dim, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size() * static_cast<size_t>(dim)) << what;
  double worst = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    const double err = row_error(&got[t * static_cast<size_t>(dim)], want[t]);
    worst = std::max(worst, err);
    EXPECT_LE(err, tol) << what << ", token " << t;
  }
  std::printf("[ bert ] %s: worst row error %.3g (tolerance %.3g)\n", what.c_str(), worst, tol);
}

// f32 matrices: f32 arithmetic and the f16 cache's rounding of keys and
// values; q8_0: also the activations quantized to q8_0 for each product.
double tolerance(DType type) {
  return type == DType::q8_0 ? 1e-2 : 5e-4;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "no error";
}

// Every token's hidden state (the last block's output) as the float64
// reference's: f32 matrices to f32 rounding and the f16 cache, q8_0 as
// stored. Mean and CLS pooling of them, normalized, as the reference pools.
TEST(Bert, HiddenStatesMatchTheFloat64Reference) {
  for (const DType type : {DType::f32, DType::q8_0}) {
    SCOPED_TRACE(std::string(weft::dtype_name(type)));
    const TinyBert bert("bert_" + std::string(weft::dtype_name(type)), 11, type);
    const BertShape& s = bert.s;
    const auto& t = bert.t;
    const weft::GgufFile& file = *bert.file;
    const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(file);
    EXPECT_TRUE(p.encoder);
    EXPECT_FALSE(p.causal);
    EXPECT_EQ(p.n_token_types, 2);
    EXPECT_EQ(p.pooling_type, 1);
    auto cpu = weft::make_cpu_device(2);
    Executor m(file, *cpu, kBertCtx);
    for (const std::vector<int32_t>& tokens :
         {std::vector<int32_t>{2, 17, 5, 33, 9, 3}, std::vector<int32_t>{2, 39, 3}, std::vector<int32_t>{7}}) {
      const std::vector<float> hidden = m.eval(tokens, 0, LogitRows::hidden);
      const auto want = bert_reference::bert_forward(s, t, tokens);
      expect_rows(hidden, want, s.dim, tolerance(type),
                  std::string(weft::dtype_name(type)) + ", " + std::to_string(tokens.size()) + " tokens");
      for (const int pooling : {1, 2}) {
        const std::vector<double> ref = bert_reference::pool(want, pooling);
        std::vector<std::vector<double>> rows;
        for (size_t r = 0; r < tokens.size(); ++r)
          rows.emplace_back(hidden.begin() + static_cast<int64_t>(r * s.dim),
                            hidden.begin() + static_cast<int64_t>((r + 1) * s.dim));
        const std::vector<double> got = bert_reference::pool(rows, pooling);
        double worst = 0;
        for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
        EXPECT_LT(worst, tolerance(type) / 2) << "pooling " << pooling;
      }
    }
  }
}

// Two sequences of different lengths in one batch: each token sees all of
// its own sequence and none of the other, as when evaluated alone.
TEST(Bert, ABatchOfSequencesIsEachSequenceAlone) {
  const TinyBert bert("bert_batch", 12, DType::f32);
  const BertShape& s = bert.s;
  auto cpu = weft::make_cpu_device(2);
  Executor m(*bert.file, *cpu, kBertCtx);
  const std::vector<int32_t> a = {2, 11, 12, 13, 3}, b = {2, 30, 3};
  std::vector<weft::model::BatchToken> batch;
  for (int32_t i = 0; i < 5; ++i) {
    batch.push_back({a[static_cast<size_t>(i)], i, 0, true});
    if (i < 3) batch.push_back({b[static_cast<size_t>(i)], i, 1, true});
  }
  std::vector<float> hidden;
  m.eval_batch(batch, 2, hidden, LogitRows::hidden);
  const auto want_a = bert_reference::bert_forward(s, bert.t, a);
  const auto want_b = bert_reference::bert_forward(s, bert.t, b);
  ASSERT_EQ(hidden.size(), batch.size() * static_cast<size_t>(s.dim));
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& want = batch[i].seq == 0 ? want_a : want_b;
    EXPECT_LE(row_error(&hidden[i * static_cast<size_t>(s.dim)], want[static_cast<size_t>(batch[i].pos)]),
              tolerance(DType::f32))
        << "batch token " << i;
  }
  // A sequence given in part (a token at position 4 of a batch holding
  // two of it) is refused: it would attend to rows not yet written.
  const std::vector<weft::model::BatchToken> partial = {{2, 0, 0, true}, {11, 4, 0, true}};
  EXPECT_NE(error_of([&] { m.eval_batch(partial, 2, hidden, LogitRows::hidden); }).find("attends both ways"),
            std::string::npos);
}

// Layer 0 on this CPU, layer 1 on a worker: the same hidden states.
TEST(Bert, SplitByLayersOverAWorkerMatchesTheReference) {
  const TinyBert bert("bert_split", 13, DType::q8_0);
  auto cpu = weft::make_cpu_device(2);
  weft::testing::LocalWorkers workers{1};
  auto remote = weft::make_rpc_devices(workers.endpoint(0));
  weft::Placement pl;
  pl.parts.push_back({.device = cpu.get(), .label = "host", .first_layer = 0, .last_layer = 1});
  pl.parts.push_back({.device = remote.at(0).get(), .label = "worker", .first_layer = 1, .last_layer = 2});
  Executor m(*bert.file, pl, kBertCtx);
  const std::vector<int32_t> tokens = {2, 21, 22, 23, 3};
  expect_rows(m.eval(tokens, 0, LogitRows::hidden), bert_reference::bert_forward(bert.s, bert.t, tokens), bert.s.dim,
              tolerance(DType::q8_0), "q8_0 over a worker");
}

// What an encoder cannot do, refused naming why: logits (no output
// matrix), a sequence continued from a cached prefix, a context beyond its
// position embeddings, a cut by heads; and a file missing a tensor.
TEST(Bert, WhatAnEncoderCannotDoIsRefusedByName) {
  TinyBert bert("bert_refusals", 14, DType::f32);
  const BertShape& s = bert.s;
  const weft::GgufFile& file = *bert.file;
  auto cpu = weft::make_cpu_device(2);
  Executor m(file, *cpu, kBertCtx);
  const std::vector<int32_t> tokens = {2, 5, 3};
  EXPECT_NE(error_of([&] { (void)m.eval(tokens, 0); }).find("not logits"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)m.eval(tokens, 3, LogitRows::hidden); }).find("from position 0"), std::string::npos);
  EXPECT_NE(error_of([&] { Executor big(file, *cpu, s.n_ctx_train + 1); }).find("position embeddings"),
            std::string::npos);
  weft::testing::LocalWorkers workers{1};
  auto remote = weft::make_rpc_devices(workers.endpoint(0));
  weft::Placement heads;
  heads.parts.push_back(
      {.device = cpu.get(), .label = "host", .first_layer = 0, .last_layer = 2, .first_head = 0, .last_head = 2});
  heads.parts.push_back(
      {.device = remote.at(0).get(), .label = "w", .first_layer = 0, .last_layer = 2, .first_head = 2, .last_head = 4});
  EXPECT_NE(error_of([&] { Executor cut(file, heads, kBertCtx); }).find("split by layers"), std::string::npos);

  bert.t.erase("blk.1.attn_output_norm.bias");
  bert_reference::TempFile g("bert_missing");
  bert_reference::write_bert_model(g.path, s, bert.t);
  auto broken = weft::GgufFile::open(g.path);
  EXPECT_NE(error_of([&] { Executor e(*broken, *cpu, kBertCtx); }).find("blk.1.attn_output_norm.bias"),
            std::string::npos);
}

}  // namespace
