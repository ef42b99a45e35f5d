// Tensor parallelism (ModelLayout::tensor_shares, docs/placement.md): every
// layer cut by key/value heads and feed-forward columns over this CPU and
// workers in this process, the partial sums added on the home part. Against
// the float64 references (the family files' and llama_reference's), and
// against one device where only the order of f32 sums differs (a q8_0
// cache, batches); the caches hold each part's heads only; a dead worker is
// an error naming it; cuts that do not fit are refused naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "model/llama_reference.h"
#include "rpc/local_workers.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"

namespace {

using llama_reference::TempFile;
using weft::DType;
using weft::Executor;
using weft::Placement;
using weft::PlacementPart;
using weft::model::LlamaModel;

// The family files' tolerance (test_families.cpp): f32 arithmetic against float64.
constexpr double kTensorParallelTolerance = 1e-4;

// Parts over layers [0, n_layer) of the query heads in counts (each a
// multiple of the group), one per device in order.
Placement by_heads(const std::vector<weft::Device*>& devices, const std::vector<int64_t>& heads, int64_t n_layer) {
  Placement pl;
  int64_t first = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    pl.parts.push_back({.device = devices[i],
                        .label = "part" + std::to_string(i),
                        .first_layer = 0,
                        .last_layer = n_layer,
                        .first_head = first,
                        .last_head = first + heads[i]});
    first += heads[i];
  }
  return pl;
}

std::vector<int32_t> greedy_run(Executor& m, std::vector<int32_t> seq, int steps) {
  const auto vocab = static_cast<int>(m.params().n_vocab);
  std::vector<float> logits = m.eval(seq, 0);
  for (int s = 0; s < steps; ++s) {
    seq.push_back(weft::model::greedy(&logits[logits.size() - static_cast<size_t>(vocab)], vocab));
    logits = m.eval({&seq.back(), 1}, static_cast<int64_t>(seq.size()) - 1);
  }
  return seq;
}

class TensorParallel : public ::testing::Test {
 protected:
  std::unique_ptr<weft::Device> cpu_ = weft::make_cpu_device(2);
  weft::testing::LocalWorkers workers_{2};
  std::vector<std::unique_ptr<weft::Device>> w0_ = weft::make_rpc_devices(workers_.endpoint(0));
  std::vector<std::unique_ptr<weft::Device>> w1_ = weft::make_rpc_devices(workers_.endpoint(1));
  weft::Device* host() { return cpu_.get(); }
  weft::Device* a() { return w0_.at(0).get(); }
  weft::Device* b() { return w1_.at(0).get(); }
};

// Every family file whose heads can be cut (two key/value heads or more):
// half the heads here, half on a worker; each eval's logits against the
// float64 reference, and greedy tokens as one device's. Files with one
// key/value head, and multi-head latent attention, are refused by name.
TEST_F(TensorParallel, EveryFamilyMatchesTheFloat64Reference) {
  int run = 0;
  for (const std::string& name : family_files::cases()) {
    SCOPED_TRACE(name);
    if (name.size() > 6 && name.compare(name.size() - 6, 6, "_mxfp4") == 0) continue;  // gptoss's blocks of 32: same graph
    auto file = weft::GgufFile::open((family_files::dir() / (name + ".gguf")).string());
    const family_files::Reference ref = family_files::read_reference(family_files::dir() / (name + ".ref"));
    const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(*file);
    const Placement pl = by_heads({host(), a()}, {p.n_head / 2, p.n_head - p.n_head / 2}, p.n_layer);
    if (p.n_head_kv < 2 || p.mla()) {
      try {
        Executor m(*file, pl, ref.n_ctx);
        ADD_FAILURE() << "loaded cut by heads";
      } catch (const weft::Error& e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.find("query heads sharing one key/value head") != std::string::npos ||
                    what.find("multi-head latent attention") != std::string::npos)
            << what;
      }
      continue;
    }
    Executor m(*file, pl, ref.n_ctx);
    for (int64_t l = 0; l < p.n_layer; ++l) {
      ASSERT_EQ(m.model().layer(l).shards.size(), 2u);
      EXPECT_EQ(m.model().layer(l).wo, nullptr);
    }
    double worst = 0;
    for (const family_files::Eval& ev : ref.evals) {
      const std::vector<float> logits = m.eval(ev.tokens, ev.n_past);
      ASSERT_EQ(logits.size(), ev.logits.size());
      for (size_t t = 0; t < ev.tokens.size(); ++t) {
        const size_t at = t * static_cast<size_t>(ref.n_vocab);
        const double err = family_files::normalized_error(&logits[at], &ev.logits[at], ref.n_vocab);
        worst = std::max(worst, err);
        EXPECT_LE(err, kTensorParallelTolerance) << "n_past " << ev.n_past << ", token " << t;
      }
    }
    std::printf("%s: heads over 2 devices, largest normalized error %.3g\n", name.c_str(), worst);
    Executor local(*file, *cpu_, ref.n_ctx);
    Executor split(*file, pl, ref.n_ctx);
    EXPECT_EQ(greedy_run(split, ref.evals.front().tokens, 4), greedy_run(local, ref.evals.front().tokens, 4));
    ++run;
  }
  EXPECT_GE(run, 10);  // llama, qwen3, phi3, gemma2, the MoE files, gpt-oss and their variants
}

// A llama model with 4 key/value heads of 8 query heads (head size 32), f32
// or q8_0 matrices, and its float64 reference.
struct FourKvModel {
  static constexpr int64_t kVocab = 41, kDim = 256, kLayers = 2, kHeads = 8, kHeadsKv = 4, kFf = 128;
  llama_reference::Shape shape{"llama", kVocab, kDim, kLayers, kHeads, kHeadsKv, kFf};
  llama_reference::RefTensors t;

  FourKvModel(const std::string& path, bool q8) {
    std::mt19937 rng(77);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = norm ? 1.0f + 2.0f * u(rng) : u(rng);
      t[name] = llama_reference::make_tensor(std::move(ne), f, q8 && !norm ? DType::q8_0 : DType::f32);
    };
    add("token_embd.weight", {kDim, kVocab}, false);
    add("output_norm.weight", {kDim}, true);
    add("output.weight", {kDim, kVocab}, false);
    for (int64_t i = 0; i < kLayers; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {kDim}, true);
      add(b + "attn_q.weight", {kDim, kDim}, false);
      add(b + "attn_k.weight", {kDim, kHeadsKv * 32}, false);
      add(b + "attn_v.weight", {kDim, kHeadsKv * 32}, false);
      add(b + "attn_output.weight", {kDim, kDim}, false);
      add(b + "ffn_norm.weight", {kDim}, true);
      add(b + "ffn_gate.weight", {kDim, kFf}, false);
      add(b + "ffn_up.weight", {kDim, kFf}, false);
      add(b + "ffn_down.weight", {kFf, kDim}, false);
    }
    llama_reference::write_model(path, shape, t);
  }

  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    return llama_reference::forward(shape, t, tokens, [&](int64_t l, const std::vector<double>& h) {
      const std::string b = "blk." + std::to_string(l) + ".";
      auto g = llama_reference::matvec(t.at(b + "ffn_gate.weight").v, h, kFf);
      llama_reference::swiglu(g, llama_reference::matvec(t.at(b + "ffn_up.weight").v, h, kFf));
      return llama_reference::matvec(t.at(b + "ffn_down.weight").v, g, kDim);
    });
  }
};

// Three devices with uneven shares (2, 1, 1 key/value heads): the logits
// against the float64 reference (f32 and q8_0 matrices), the tokens as one
// device's, and each part's cache only its heads' rows.
TEST_F(TensorParallel, ThreeDevicesWithUnevenSharesMatchTheReference) {
  for (const bool q8 : {false, true}) {
    SCOPED_TRACE(q8 ? "q8_0" : "f32");
    TempFile f(q8 ? "tp_four_kv_q8" : "tp_four_kv");
    const FourKvModel tiny(f.path, q8);
    auto file = weft::GgufFile::open(f.path);
    const Placement pl = by_heads({host(), a(), b()}, {4, 2, 2}, FourKvModel::kLayers);
    Executor m(*file, pl, 32);
    const weft::model::LlamaLayer& l0 = m.model().layer(0);
    ASSERT_EQ(l0.shards.size(), 3u);
    EXPECT_EQ(l0.shards[0].n_kv, 2);
    EXPECT_EQ(l0.shards[2].first_head, 6);
    EXPECT_EQ(l0.shards[1].first_ff, 64);  // columns in proportion to the heads
    EXPECT_EQ(l0.shards[2].n_ff, 32);
    std::vector<int32_t> seq = {1, 7, 22, 36, 5, 12};
    std::vector<float> logits;
    llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t n) { return m.eval(t, n); }, seq, 3,
                                     FourKvModel::kVocab, logits);
    llama_reference::expect_close(logits, tiny.forward(seq), q8 ? 2e-2 : 1e-5, q8 ? "tp 2,1,1 q8_0" : "tp 2,1,1 f32");
    Executor local(*file, *cpu_, 32);
    EXPECT_EQ(greedy_run(m, {1, 7, 22}, 6), greedy_run(local, {1, 7, 22}, 6));
    // Cache bytes per part: its key/value heads' share of one device's.
    const auto plan = LlamaModel::plan(*file, std::vector<int64_t>{0, 2, 2, 2}, 32, DType::f16, {},
                                       weft::model::kSlidingRingStep, m.model().layout().tensor_shares);
    const size_t whole = weft::model::kv_cache_bytes(m.params(), FourKvModel::kLayers, 32);
    ASSERT_EQ(plan.size(), 3u);
    EXPECT_EQ(plan[0].kv_cache_bytes, whole / 2);
    EXPECT_EQ(plan[1].kv_cache_bytes, whole / 4);
    EXPECT_EQ(plan[2].kv_cache_bytes, whole / 4);
    EXPECT_EQ(plan[1].first_head, 4);
    EXPECT_EQ(plan[1].last_head, 6);
    for (int part = 0; part < 3; ++part) {
      size_t bytes = 0;
      for (const weft::Tensor* t : m.model().part_caches(part)) bytes += t->nbytes();
      EXPECT_EQ(bytes, plan[static_cast<size_t>(part)].kv_cache_bytes) << "part " << part;
    }
  }
}

// The output matrix of a cut last run is cut too, by vocabulary rows in
// proportion to the key/value heads: each part holds (and reads per token)
// its rows only, the output norm and the logits' concatenation stay on the
// home part, and no byte of the file is held twice. The logits are the
// float64 reference's (ThreeDevicesWithUnevenSharesMatchTheReference).
TEST_F(TensorParallel, TheOutputMatrixIsCutByVocabularyRows) {
  TempFile f("tp_output_rows");
  const FourKvModel tiny(f.path, true);
  auto file = weft::GgufFile::open(f.path);
  Executor m(*file, by_heads({host(), a(), b()}, {4, 2, 2}, FourKvModel::kLayers), 32);
  ASSERT_TRUE(m.model().output_split());
  EXPECT_EQ(m.model().output_part(), 0);
  // Heads [0, 2), [2, 3), [3, 4) of 4: vocabulary rows [0, 21), [21, 31), [31, 41).
  const int64_t want_rows[] = {21, 10, 10};
  for (int part = 0; part < 3; ++part) {
    int64_t rows = 0;
    bool norm = false;
    for (const weft::Tensor* t : m.model().part_weights(part)) {
      if (t->name == "output.weight") rows += t->ne[1];
      norm = norm || t->name == "output_norm.weight";
    }
    EXPECT_EQ(rows, want_rows[part]) << "part " << part;
    EXPECT_EQ(norm, part == 0) << "part " << part;
  }
  const auto cut = LlamaModel::plan(*file, std::vector<int64_t>{0, 2, 2, 2}, 32, DType::f16, {},
                                    weft::model::kSlidingRingStep, m.model().layout().tensor_shares);
  const auto whole = LlamaModel::plan(*file, std::vector<int64_t>{0, 2}, 32);
  size_t cut_bytes = 0;
  for (const weft::model::PartPlan& pp : cut) cut_bytes += pp.weight_bytes;
  EXPECT_EQ(cut_bytes, whole.front().weight_bytes);
  // A layer split keeps the output whole on the last part.
  Placement layers;
  layers.parts.push_back({.device = host(), .label = "host", .first_layer = 0, .last_layer = 1});
  layers.parts.push_back({.device = a(), .label = "A", .first_layer = 1, .last_layer = 2});
  Executor piped(*file, layers, 32);
  EXPECT_FALSE(piped.model().output_split());
  EXPECT_EQ(piped.model().output_part(), 1);
}

// With a q8_0 cache, and for a batch of several sequences, the cut model
// gives one device's logits up to the order of its f32 sums.
TEST_F(TensorParallel, QuantizedCacheAndBatchesMatchOneDevice) {
  TempFile f("tp_batch");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  const Placement pl = by_heads({host(), a(), b()}, {2, 4, 2}, FourKvModel::kLayers);
  weft::model::LoadOptions o;
  o.cache_type = DType::q8_0;
  Executor local(*file, *cpu_, 32, {}, o);
  Executor split(*file, pl, 32, {}, o);
  const std::vector<int32_t> prompt = {3, 9, 27, 4, 17};
  const std::vector<float> want = local.eval(prompt, 0);
  const std::vector<float> got = split.eval(prompt, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;

  // Two sequences of four cache rows... of 16 each, interleaved in one batch.
  std::vector<weft::model::BatchToken> batch;
  for (int32_t i = 0; i < 4; ++i)
    for (int32_t s = 0; s < 2; ++s) batch.push_back({prompt[static_cast<size_t>(i + s)], i, s, i == 3});
  std::vector<float> batch_want, batch_got;
  Executor local_b(*file, *cpu_, 32, {}, o);
  Executor split_b(*file, pl, 32, {}, o);
  local_b.eval_batch(batch, 2, batch_want);
  split_b.eval_batch(batch, 2, batch_got);
  ASSERT_EQ(batch_got.size(), 2u * FourKvModel::kVocab);
  for (size_t i = 0; i < batch_want.size(); ++i) EXPECT_NEAR(batch_got[i], batch_want[i], 1e-4) << i;
}

// Layer 0 whole on this CPU, layer 1 cut by heads over this CPU and a
// worker (a pipeline of a whole stage and a tensor-parallel one).
TEST_F(TensorParallel, AHybridOfLayersAndHeadsMatchesTheReference) {
  TempFile f("tp_hybrid");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  Placement pl;
  pl.parts.push_back({.device = host(), .label = "host", .first_layer = 0, .last_layer = 1});
  pl.parts.push_back({.device = a(), .label = "A", .first_layer = 1, .last_layer = 2, .first_head = 0, .last_head = 2});
  pl.parts.push_back({.device = b(), .label = "B", .first_layer = 1, .last_layer = 2, .first_head = 2, .last_head = 8});
  Executor m(*file, pl, 32);
  EXPECT_TRUE(m.model().layer(0).shards.empty());
  ASSERT_EQ(m.model().layer(1).shards.size(), 2u);
  std::vector<int32_t> seq = {5, 6, 7, 8};
  std::vector<float> logits;
  llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t n) { return m.eval(t, n); }, seq, 2,
                                   FourKvModel::kVocab, logits);
  llama_reference::expect_close(logits, tiny.forward(seq), 1e-5, "hybrid");

  // A prompt in micro-batches flowing through the two stages at once
  // (LoadOptions::pipeline_micro_batch): its last token's logits as the
  // reference's.
  weft::model::LoadOptions o;
  o.pipeline_micro_batch = 3;
  Executor piped(*file, pl, 32, {}, o);
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<float> last = piped.eval(prompt, 0, weft::model::LogitRows::last);
  const std::vector<std::vector<double>> ref = tiny.forward(prompt);
  ASSERT_EQ(last.size(), static_cast<size_t>(FourKvModel::kVocab));
  EXPECT_LT(llama_reference::nerr(last.data(), ref.back()), 1e-5);
}

// A generated token waits for each worker twice per layer (its partial of
// the attention, then of the feed-forward) and once for its share of the
// logits: the inputs every layer reads stay on this host, so no layer
// reads them back from a worker.
TEST_F(TensorParallel, ATokenWaitsForAWorkerTwicePerLayer) {
  TempFile f("tp_round_trips");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  Executor m(*file, by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers), 32);
  const std::vector<int32_t> prompt = {3, 14, 15};
  (void)m.eval(prompt, 0);
  const int32_t next = 9;
  (void)m.eval({&next, 1}, 3);  // the one-token graph, allocated
  const uint64_t before = weft::rpc_stats(workers_.endpoint(0)).round_trips;
  constexpr int kTokens = 5;
  for (int i = 0; i < kTokens; ++i) (void)m.eval({&next, 1}, 4 + i);
  const uint64_t per_token = (weft::rpc_stats(workers_.endpoint(0)).round_trips - before) / kTokens;
  EXPECT_LE(per_token, 2u * FourKvModel::kLayers + 1) << "round trips per token";
}

// Three devices, two of them workers linked to each other: the second
// worker's partial sums go to the first over their peer link and are added
// there, so this host reads one sum per layer's sum from the first worker
// and nothing from the second but its slice of the logits. The additions
// keep their order: the logits are bit for bit those of the same cut over
// workers without peer links, where this host reads each partial itself.
TEST_F(TensorParallel, WorkersAddTheirPartialsOverPeerLinks) {
  TempFile f("tp_partials_meet");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  weft::testing::LocalWorkers apart(2);
  weft::RpcOptions no_links;
  no_links.peer_links = false;
  auto c = weft::make_rpc_devices(apart.endpoint(0), no_links);
  auto d = weft::make_rpc_devices(apart.endpoint(1), no_links);
  Executor linked(*file, by_heads({host(), a(), b()}, {4, 2, 2}, FourKvModel::kLayers), 32);
  Executor unlinked(*file, by_heads({host(), c.at(0).get(), d.at(0).get()}, {4, 2, 2}, FourKvModel::kLayers), 32);
  EXPECT_TRUE(linked.model().layout().partials_meet_for(0));
  EXPECT_FALSE(unlinked.model().layout().partials_meet_for(0));
  std::vector<int32_t> seq = {1, 7, 22, 36, 5, 12};
  EXPECT_EQ(linked.eval(seq, 0), unlinked.eval(seq, 0));
  // Then single tokens: the round trips per token to each second worker.
  constexpr int kTokens = 4;
  auto decode = [&](Executor& m, const std::string& second, std::vector<std::vector<float>>& out) {
    uint64_t before = 0;
    for (int i = 0; i <= kTokens; ++i) {  // the first allocates the one-token graph
      if (i == 1) before = weft::rpc_stats(second).round_trips;
      const int32_t next = 9 + i;
      out.push_back(m.eval({&next, 1}, static_cast<int64_t>(seq.size()) + i));
    }
    return (weft::rpc_stats(second).round_trips - before) / kTokens;
  };
  std::vector<std::vector<float>> with_links, without;
  EXPECT_LE(decode(linked, workers_.endpoint(1), with_links), 1u) << "the second worker: its logits' slice only";
  EXPECT_GE(decode(unlinked, apart.endpoint(1), without), 2u * FourKvModel::kLayers) << "each partial read";
  EXPECT_EQ(with_links, without);
}

// Activations crossing as q8_0 (LoadOptions::tensor_partials): the logits
// against the float64 reference within q8_0's rounding, over two devices
// and over three whose partials meet on a worker; and per token about
// 34/128 of the f32 crossings' bytes to and from the worker.
TEST_F(TensorParallel, PartialsAsQ8_0CrossInAQuarterOfTheBytes) {
  TempFile f("tp_partials_q8");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  weft::model::LoadOptions q8;
  q8.tensor_partials = DType::q8_0;
  const std::vector<int32_t> seq = {1, 7, 22, 36, 5, 12};
  const auto want = tiny.forward(seq);
  for (const bool three : {false, true}) {
    SCOPED_TRACE(three ? "three devices" : "two devices");
    const Placement pl = three ? by_heads({host(), a(), b()}, {4, 2, 2}, FourKvModel::kLayers)
                               : by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers);
    Executor m(*file, pl, 32, {}, q8);
    EXPECT_EQ(m.model().layout().partials_meet_for(0), three);
    std::vector<int32_t> tokens = seq;
    std::vector<float> logits;
    llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t n) { return m.eval(t, n); }, tokens, 3,
                                     FourKvModel::kVocab, logits);
    llama_reference::expect_close(logits, want, 2e-3, three ? "tp q8_0 partials, 3" : "tp q8_0 partials, 2");
  }
  // Per token from the worker: the partials' bytes fall to 34/128, in as
  // many round trips (the conversions' tensors add no wait: the scheduler's
  // reads made at submission, docs/scheduler.md rule 2).
  struct PerToken {
    double bytes, round_trips;
  };
  auto per_token = [&](const weft::model::LoadOptions& o) {
    Executor m(*file, by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers), 32, {}, o);
    (void)m.eval(seq, 0);
    const int32_t next = 9;
    (void)m.eval({&next, 1}, 6);
    const weft::RpcStats before = weft::rpc_stats(workers_.endpoint(0));
    for (int i = 0; i < 4; ++i) (void)m.eval({&next, 1}, 7 + i);
    const weft::RpcStats after = weft::rpc_stats(workers_.endpoint(0));
    return PerToken{static_cast<double>(after.bytes_received - before.bytes_received) / 4,
                    static_cast<double>(after.round_trips - before.round_trips) / 4};
  };
  const PerToken exact = per_token({}), rounded = per_token(q8);
  const double partials = 2.0 * FourKvModel::kLayers * FourKvModel::kDim * 4;  // f32 partials per token
  std::printf("per token from the worker: f32 %.0f bytes in %.1f round trips, q8_0 %.0f in %.1f\n", exact.bytes,
              exact.round_trips, rounded.bytes, rounded.round_trips);
  EXPECT_NEAR(exact.bytes - rounded.bytes, partials * (1.0 - 34.0 / 128.0), 64.0);
  EXPECT_EQ(rounded.round_trips, exact.round_trips);
  // A width that is not whole q8_0 blocks, or another type, is refused by name.
  weft::model::LoadOptions q4;
  q4.tensor_partials = DType::q4_0;
  try {
    Executor m(*file, by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers), 32, {}, q4);
    ADD_FAILURE() << "q4_0 partials were taken";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("partials as q4_0"), std::string::npos) << e.what();
  }
}

// A device beyond the key/value heads takes feed-forward columns only
// (PlacementPart::ffn_share): this host and worker A two key/value heads
// each, worker B none, the feed-forward 1:1:2. The logits are the float64
// reference's; B holds no attention weights and no cache, A and this host
// each half the cache; B's columns are half the width.
TEST_F(TensorParallel, ADeviceBeyondTheHeadsTakesFeedForwardColumnsOnly) {
  TempFile f("tp_ffn_only");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  Placement pl = by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers);
  pl.parts.push_back({.device = b(),
                      .label = "b",
                      .first_layer = 0,
                      .last_layer = FourKvModel::kLayers,
                      .first_head = 8,
                      .last_head = 8});
  const std::vector<double> shares = {1, 1, 2};
  for (size_t i = 0; i < 3; ++i) pl.parts[i].ffn_share = shares[i];
  EXPECT_NE(pl.describe().find("feed-forward only on b"), std::string::npos) << pl.describe();
  Executor m(*file, pl, 32);
  const weft::model::LlamaLayer& l0 = m.model().layer(0);
  ASSERT_EQ(l0.shards.size(), 3u);
  EXPECT_EQ(l0.shards[2].n_kv, 0);
  EXPECT_EQ(l0.shards[2].wq, nullptr);
  EXPECT_EQ(l0.shards[2].n_ff, FourKvModel::kFf / 2);
  EXPECT_EQ(l0.shards[0].n_ff, FourKvModel::kFf / 4);
  EXPECT_TRUE(m.model().part_caches(2).empty());
  EXPECT_EQ(m.model().part_caches(1).size(), 2u * FourKvModel::kLayers);
  std::vector<int32_t> seq = {1, 7, 22, 36, 5, 12};
  std::vector<float> logits;
  llama_reference::eval_with_steps([&](std::span<const int32_t> t, int64_t n) { return m.eval(t, n); }, seq, 3,
                                   FourKvModel::kVocab, logits);
  llama_reference::expect_close(logits, tiny.forward(seq), 1e-5, "ffn-only third device");
  // Without a feed-forward share it has nothing to do: refused by name.
  pl.parts[2].ffn_share = 0;
  EXPECT_THROW(Executor(*file, pl, 32), weft::Error);
  // From weights, as --split gives them: more devices than key/value heads.
  EXPECT_EQ(weft::head_bounds({1, 1, 1, 1, 1, 1}, 8, 4), (std::vector<int64_t>{0, 2, 4, 6, 8, 8, 8}));
}

// A worker that dies while it holds shards ends the next eval with an
// error naming it (no hang, no abort), and the executor can be destroyed.
TEST_F(TensorParallel, ADeadWorkerEndsTheEvalWithAnErrorNamingIt) {
  TempFile f("tp_dead");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  auto m = std::make_unique<Executor>(*file, by_heads({host(), a()}, {4, 4}, FourKvModel::kLayers), 32);
  const std::vector<int32_t> prompt = {3, 14, 15};
  EXPECT_EQ(m->eval(prompt, 0).size(), prompt.size() * static_cast<size_t>(FourKvModel::kVocab));
  const std::string dead = workers_.endpoint(0);
  workers_.worker(0).stop();
  const int32_t next = 9;
  try {
    (void)m->eval({&next, 1}, static_cast<int64_t>(prompt.size()));
    ADD_FAILURE() << "an eval went on without the worker holding half the heads";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dead), std::string::npos) << e.what();
  }
  m.reset();
}

// Cuts that do not fit are refused with what was wrong: heads that split a
// key/value group, and a q8_0 output projection cut off its 32-value blocks
// (8 query heads of 32 values: head 1 starts at column 32, but in a model
// of head size 16 at column 16).
TEST_F(TensorParallel, CutsThatDoNotFitAreNamed) {
  TempFile f("tp_bad");
  const FourKvModel tiny(f.path, false);
  auto file = weft::GgufFile::open(f.path);
  try {
    Executor m(*file, by_heads({host(), a()}, {3, 5}, FourKvModel::kLayers), 32);
    ADD_FAILURE() << "heads 0-2 of groups of 2 loaded";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("split a group of 2 query heads"), std::string::npos) << e.what();
  }
  TempFile g("tp_bad_blocks");
  llama_reference::Shape s{"llama", 37, 64, 1, 4, 4, 64};
  llama_reference::RefTensors t;
  std::vector<float> zeros(64 * 64, 0.01f), ones(64, 1.0f), emb(64 * 37, 0.01f);
  t["token_embd.weight"] = llama_reference::make_tensor({64, 37}, emb, DType::f32);
  t["output_norm.weight"] = llama_reference::make_tensor({64}, ones, DType::f32);
  const std::string b = "blk.0.";
  for (const char* n : {"attn_norm.weight", "ffn_norm.weight"}) t[b + n] = llama_reference::make_tensor({64}, ones, DType::f32);
  for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                        "ffn_up.weight", "ffn_down.weight"})
    t[b + n] = llama_reference::make_tensor({64, 64}, zeros, DType::q8_0);
  llama_reference::write_model(g.path, s, t);
  auto bad = weft::GgufFile::open(g.path);
  try {
    Executor m(*bad, by_heads({host(), a()}, {1, 3}, 1), 32);
    ADD_FAILURE() << "a q8_0 attn_output cut at column 16 loaded";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_output.weight (q8_0, blocks of 32 values) cannot be cut at columns [0, 16)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
