// Several sequences decoded together (run_parallel_generation over
// Executor::submit_batch / finish_batch): every sequence must equal its
// own single run, on one device and with its steps pipelined over two
// workers (pushing worker to worker), the host and an async device with
// random delays; a stopped sequence leaves its group; a dead worker ends
// the run with an error naming it; the slot contract is enforced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "rpc/local_workers.h"
#include "weft/rpc/client.h"
#include "weft/runtime/generate.h"
#include "weft/testing/async.h"

namespace {

namespace fs = std::filesystem;
using weft::BatchedEval;
using weft::GenerateOptions;
using weft::GenerateResult;
using weft::GenerationModel;
using weft::model::BatchToken;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LogitRows;

constexpr int64_t kSeqCtx = 48;
constexpr int kTokens = 12;

std::vector<std::vector<int32_t>> prompts(int n, int vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int s = 0; s < n; ++s) {
    std::vector<int32_t> p;
    for (int i = 0; i < 3 + 4 * s; ++i) p.push_back(1 + (s * 131 + i * 37) % (vocab - 1));  // lengths differ
    out.push_back(p);
  }
  return out;
}

GenerationModel generation_model(const Executor& m) {
  return {.n_vocab = m.params().n_vocab, .n_ctx = m.n_ctx(), .is_end_of_generation = {}};
}

BatchedEval batched(Executor& m) {
  return {.slots = m.batch_slots(),
          .submit = [&m](int slot, std::span<const BatchToken> b, int64_t n_seq) { m.submit_batch(slot, b, n_seq); },
          .finish = [&m](int slot, std::vector<float>& logits) { m.finish_batch(slot, logits); }};
}

class ParallelGeneration : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_parallel_gen_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "model.gguf").string();
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 4;
    weft::model::write_demo_model(path_, spec);
    file_ = weft::GgufFile::open(path_);
    cpu_ = weft::make_cpu_device(2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string endpoint(int i) const { return workers_.endpoint(i); }

  // Each prompt alone, on this CPU, with a context of one sequence's part.
  std::vector<std::vector<int32_t>> references(const std::vector<std::vector<int32_t>>& ps) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& p : ps) {
      Executor m(*file_, *cpu_, kSeqCtx);
      auto eval = [&m](std::span<const int32_t> t, int64_t n_past, std::vector<float>& logits) {
        m.eval(t, n_past, logits, LogitRows::last);
      };
      GenerateOptions o;
      o.max_tokens = kTokens;
      out.push_back(weft::run_generation(eval, generation_model(m), p, o).tokens);
    }
    return out;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<weft::GgufFile> file_;
  std::unique_ptr<weft::Device> cpu_;
  weft::testing::LocalWorkers workers_{2};
};

TEST_F(ParallelGeneration, EverySequenceEqualsItsOwnRunOnEveryMix) {
  auto w0 = weft::make_rpc_devices(endpoint(0));
  auto w1 = weft::make_rpc_devices(endpoint(1));
  weft::AsyncOptions ao;
  ao.isolated_memory = true;
  ao.random_delay_ms = 1;
  auto async = weft::make_async_device(ao);
  weft::Device* a = w0.at(0).get();
  weft::Device* b = w1.at(0).get();
  const std::vector<std::vector<LayerPlacement>> placements{
      {{cpu_.get(), 0, 4}},                            // one device: one slot
      {{a, 0, 2}, {b, 2, 4}},                          // every layer on the workers
      {{cpu_.get(), 0, 1}, {a, 1, 3}, {b, 3, 4}},      // host, then two workers: three slots
      {{a, 0, 2}, {cpu_.get(), 2, 3}, {b, 3, 4}},      // the host between them
      {{async.get(), 0, 2}, {cpu_.get(), 2, 4}},       // an async device with random delays
  };
  for (int n_seq : {2, 3, 4}) {
    const auto ps = prompts(n_seq, 600);
    const auto ref = references(ps);
    for (const auto& pl : placements) {
      SCOPED_TRACE(std::to_string(n_seq) + " sequences, " + std::to_string(pl.size()) + " parts, first " +
                   pl[0].device->name());
      Executor m(*file_, pl, kSeqCtx * n_seq);
      EXPECT_EQ(m.batch_slots(), pl.size() == 1 ? 1 : static_cast<int>(pl.size()));
      GenerateOptions o;
      o.max_tokens = kTokens;
      std::map<int, int> emitted;
      const std::vector<GenerateResult> got =
          weft::run_parallel_generation(batched(m), generation_model(m), ps, o, [&](int seq, int32_t) {
            ++emitted[seq];
            return true;
          });
      ASSERT_EQ(got.size(), ps.size());
      for (size_t s = 0; s < ps.size(); ++s) {
        EXPECT_EQ(got[s].tokens, ref[s]) << "sequence " << s;
        EXPECT_EQ(got[s].stop, weft::StopReason::max_tokens);
        EXPECT_EQ(emitted[static_cast<int>(s)], kTokens);
        EXPECT_LE(got[s].prompt_seconds, got[s].total_seconds);
      }
    }
  }
}

// The point of the slots: while one worker computes a group's step, the
// other computes the other group's. Workers over async devices whose every
// compute sleeps kDelayMs stand in for two machines (sleeps overlap on any
// CPU): the devices' compute windows must overlap for several steps' time;
// run one after another (the host waiting for each step before the next
// goes, or a push sent only once the next stage's work is submitted) they
// would not overlap at all. Not a speed check: an order check.
TEST_F(ParallelGeneration, TwoGroupsKeepBothWorkersBusyAtOnce) {
  constexpr double kDelayMs = 40;
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_layer = 4;
  spec.tied = false;  // the output on the last worker: each step is one compute per worker
  const std::string untied = (dir_ / "untied.gguf").string();
  weft::model::write_demo_model(untied, spec);
  auto file = weft::GgufFile::open(untied);
  weft::testing::LocalWorkers slow(2, [&](int i) {
    weft::AsyncOptions ao;
    ao.delay_ms = kDelayMs;
    ao.name = "slow" + std::to_string(i);
    return weft::make_async_device(ao);
  });
  std::vector<std::vector<std::unique_ptr<weft::Device>>> remote;
  for (int i = 0; i < 2; ++i) remote.push_back(weft::make_rpc_devices(slow.endpoint(i)));
  {
    const std::vector<LayerPlacement> pl{{remote[0].at(0).get(), 0, 2}, {remote[1].at(0).get(), 2, 4}};
    Executor m(*file, pl, kSeqCtx * 2);
    GenerateOptions o;
    o.max_tokens = 8;
    const auto got = weft::run_parallel_generation(batched(m), generation_model(m), prompts(2, 600), o);
    ASSERT_EQ(got[0].tokens.size(), 8u);
  }
  const auto a = weft::async_device_compute_log(slow.device(0));
  const auto b = weft::async_device_compute_log(slow.device(1));
  ASSERT_GE(a.size(), 9u);
  ASSERT_GE(b.size(), 9u);
  const double overlap_ms = 1e3 * weft::compute_overlap_seconds(a, b);
  EXPECT_GE(overlap_ms, 4 * kDelayMs) << a.size() << " computes on one worker, " << b.size() << " on the other";
}

// A sequence its callback stops leaves its group; the others go on, and
// each still equals its own run.
TEST_F(ParallelGeneration, AStoppedSequenceLeavesTheOthersUnchanged) {
  auto w0 = weft::make_rpc_devices(endpoint(0));
  auto w1 = weft::make_rpc_devices(endpoint(1));
  const std::vector<LayerPlacement> pl{{w0.at(0).get(), 0, 2}, {w1.at(0).get(), 2, 4}};
  const auto ps = prompts(4, 600);
  const auto ref = references(ps);
  Executor m(*file_, pl, kSeqCtx * 4);
  GenerateOptions o;
  o.max_tokens = kTokens;
  const auto got = weft::run_parallel_generation(batched(m), generation_model(m), ps, o,
                                                 [&](int seq, int32_t) { return seq != 1; });
  EXPECT_EQ(got[1].stop, weft::StopReason::callback);
  ASSERT_EQ(got[1].tokens.size(), 1u);
  EXPECT_EQ(got[1].tokens[0], ref[1][0]);
  for (size_t s : {0u, 2u, 3u}) EXPECT_EQ(got[s].tokens, ref[s]) << "sequence " << s;
}

// A fake model whose logits name the next token from the sequence and the
// position it was evaluated at: checks the steps the loop sends (positions
// consecutive per sequence, each sequence in one group, logits asked for
// exactly the rows it reads) and that each sequence's context part bounds it.
TEST(ParallelGenerationLoop, StepsCarryEachSequenceAtItsOwnPositions) {
  constexpr int64_t kVocab = 50, kNSeq = 5, kCtx = 5 * 10;
  std::map<int, int32_t> next_pos;  // per sequence
  std::map<int, int> group_of;
  std::vector<std::vector<BatchToken>> in_flight(2);
  BatchedEval eval;
  eval.slots = 2;
  eval.submit = [&](int slot, std::span<const BatchToken> batch, int64_t n_seq) {
    ASSERT_EQ(n_seq, kNSeq);
    ASSERT_TRUE(in_flight[static_cast<size_t>(slot)].empty()) << "slot " << slot << " submitted twice";
    for (size_t i = 0; i < batch.size(); ++i) {
      const BatchToken& t = batch[i];
      EXPECT_EQ(t.pos, next_pos[t.seq]++) << "sequence " << t.seq;
      auto [it, fresh] = group_of.emplace(t.seq, slot);
      EXPECT_EQ(it->second, slot) << "sequence " << t.seq << " changed group";
      const bool last_of_seq = i + 1 == batch.size() || batch[i + 1].seq != t.seq;
      EXPECT_EQ(t.logits, last_of_seq);
    }
    in_flight[static_cast<size_t>(slot)].assign(batch.begin(), batch.end());
  };
  eval.finish = [&](int slot, std::vector<float>& logits) {
    auto& batch = in_flight[static_cast<size_t>(slot)];
    ASSERT_FALSE(batch.empty()) << "finish of an idle slot " << slot;
    logits.clear();
    for (const BatchToken& t : batch) {
      if (!t.logits) continue;
      std::vector<float> row(kVocab, 0.0f);
      row[static_cast<size_t>((t.seq * 7 + t.pos) % kVocab)] = 1.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    batch.clear();
  };
  std::vector<std::vector<int32_t>> ps;
  for (int s = 0; s < kNSeq; ++s) ps.push_back(std::vector<int32_t>(static_cast<size_t>(1 + s), 3));
  GenerateOptions o;
  o.max_tokens = 100;  // more than a part holds: the context stops each
  const auto got = weft::run_parallel_generation(eval, {.n_vocab = kVocab, .n_ctx = kCtx}, ps, o);
  for (int s = 0; s < kNSeq; ++s) {
    const auto& r = got[static_cast<size_t>(s)];
    EXPECT_EQ(r.stop, weft::StopReason::context_full) << s;
    // Prompt of 1 + s tokens, then tokens up to the part's 10 positions: the last one sampled has none left.
    ASSERT_EQ(static_cast<int>(r.tokens.size()), 10 - (1 + s) + 1) << s;
    for (size_t i = 0; i < r.tokens.size(); ++i)
      EXPECT_EQ(r.tokens[i], (s * 7 + s + static_cast<int>(i)) % kVocab) << "sequence " << s << " token " << i;
    EXPECT_EQ(group_of[s], s % 2);
  }
  EXPECT_THROW(weft::run_parallel_generation(eval, {.n_vocab = kVocab, .n_ctx = 51}, ps, o), weft::Error);
  EXPECT_THROW(weft::run_parallel_generation(eval, {.n_vocab = kVocab, .n_ctx = kCtx}, {}, o), weft::Error);
}

TEST_F(ParallelGeneration, SlotContractIsEnforced) {
  auto w0 = weft::make_rpc_devices(endpoint(0));
  auto w1 = weft::make_rpc_devices(endpoint(1));
  const std::vector<LayerPlacement> pl{{w0.at(0).get(), 0, 2}, {w1.at(0).get(), 2, 4}};
  Executor m(*file_, pl, kSeqCtx * 2);
  ASSERT_EQ(m.batch_slots(), 2);
  const std::vector<BatchToken> step{{5, 0, 0, true}};
  std::vector<float> logits;
  EXPECT_THROW(m.submit_batch(2, step, 2), weft::Error);
  EXPECT_THROW(m.finish_batch(0, logits), weft::Error);  // nothing in flight
  m.submit_batch(0, step, 2);
  EXPECT_THROW(m.submit_batch(0, step, 2), weft::Error);               // in flight
  EXPECT_THROW(m.eval(std::vector<int32_t>{5}, 0, logits), weft::Error);  // would take a slot's memory
  m.finish_batch(0, logits);
  EXPECT_EQ(logits.size(), 600u);
  std::vector<float> again;
  m.eval_batch(step, 2, again);  // idle again: eval_batch runs, and agrees
  ASSERT_EQ(again.size(), logits.size());
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(again[i], logits[i], 1e-5) << i;
}

// A worker that dies mid-run ends it with an error naming the worker: no
// hang, no abort; the model can then be destroyed.
TEST_F(ParallelGeneration, ADeadWorkerEndsTheRunWithAnErrorNamingIt) {
  auto w0 = weft::make_rpc_devices(endpoint(0));
  auto w1 = weft::make_rpc_devices(endpoint(1));
  const std::vector<LayerPlacement> pl{{w0.at(0).get(), 0, 2}, {w1.at(0).get(), 2, 4}};
  const std::string dead = endpoint(1);
  auto m = std::make_unique<Executor>(*file_, pl, kSeqCtx * 2);
  GenerateOptions o;
  o.max_tokens = kTokens;
  int seen = 0;
  try {
    weft::run_parallel_generation(batched(*m), generation_model(*m), prompts(2, 600), o, [&](int, int32_t) {
      if (++seen == 3) workers_.worker(1).stop();
      return true;
    });
    FAIL() << "the run went on without its worker";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dead), std::string::npos) << e.what();
  }
  m.reset();
}

}  // namespace
