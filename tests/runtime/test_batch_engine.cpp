// The one batched-generation engine (weft/runtime/batch_engine.h) over a
// fake model whose logits name the next token from the sequence and the
// position it was evaluated at, so every expected token is known: admission
// by shared prefix, cancellation between steps, a sink or a step that
// throws, a prompt evaluated alone and reused, the two decode policies over
// groups, and the checks on a job.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "runtime/batch_test_sink.h"
#include "weft/runtime/batch_engine.h"

namespace {

using weft::BatchEnd;
using weft::BatchEngine;
using weft::BatchJob;
using weft::StopReason;
using weft::model::BatchToken;

using batch_test::expected;
using batch_test::job;
using batch_test::kVocab;
using batch_test::predicted;
using batch_test::Recorder;
using batch_test::run;

// Keeps every step submitted; finish() answers with one-hot rows.
struct FakeModel {
  int slots = 1;
  int finish_throws_at = -1;  // the finish() call (0-based) that throws
  int finishes = 0;
  int recover_slots = 0;      // recover()'s answer (0: not recovered; -1: it throws)
  int recoveries = 0;
  std::map<int, std::vector<BatchToken>> in_flight;
  std::vector<std::pair<int, std::vector<BatchToken>>> submitted;  // (slot, batch)

  weft::BatchedEval eval() {
    weft::BatchedEval e;
    e.slots = slots;
    e.submit = [this](int slot, std::span<const BatchToken> batch, int64_t) {
      ASSERT_TRUE(in_flight[slot].empty()) << "slot " << slot << " submitted twice";
      in_flight[slot].assign(batch.begin(), batch.end());
      submitted.emplace_back(slot, in_flight[slot]);
    };
    e.recover = [this](const std::exception&) {
      ++recoveries;
      if (recover_slots < 0) throw weft::Error(weft::ErrorKind::out_of_memory, "[fake] the rest cannot hold it");
      in_flight.clear();  // a new model: nothing of the old one's is in flight
      slots = std::max(recover_slots, slots);
      return recover_slots;
    };
    e.finish = [this](int slot, std::vector<float>& logits) {
      std::vector<BatchToken> batch = std::move(in_flight[slot]);
      in_flight[slot].clear();
      if (finishes++ == finish_throws_at) throw weft::Error(weft::ErrorKind::disconnected, "[fake] stage 1 went away");
      logits.clear();
      for (const BatchToken& t : batch) {
        if (!t.logits) continue;
        std::vector<float> row(kVocab, 0.0f);
        row[static_cast<size_t>(predicted(t.seq, t.pos))] = 1.0f;
        logits.insert(logits.end(), row.begin(), row.end());
      }
    };
    return e;
  }
};

TEST(BatchEngine, AJobStartsInTheSlotSharingTheLongestPrefixAndReusesIt) {
  FakeModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 32}, {.slots = 2});
  Recorder a, b;
  e.start(job({5, 6, 7, 8}, 3), &a);
  e.start(job({9, 10}, 2), &b);
  run(e);
  ASSERT_TRUE(a.finished && b.finished);
  EXPECT_EQ(a.tokens, expected(0, 4, 3));
  EXPECT_EQ(b.tokens, expected(1, 2, 2));
  EXPECT_EQ(a.end.stop, StopReason::max_tokens);
  EXPECT_EQ(a.end.cached_tokens, 0);
  // Slot 1 holds 9 10 and b's first token: a prompt extending that goes
  // there, and only its new tokens are evaluated, from position 3.
  m.submitted.clear();
  Recorder c;
  e.start(job({9, 10, b.tokens[0], 40, 41}, 2), &c);
  run(e);
  EXPECT_EQ(c.end.cached_tokens, 3);
  EXPECT_EQ(c.tokens, expected(1, 5, 2));
  ASSERT_FALSE(m.submitted.empty());
  const BatchToken first = m.submitted.front().second.front();
  EXPECT_EQ(first.seq, 1);
  EXPECT_EQ(first.pos, 3);
  EXPECT_EQ(first.token, 40);
  // The same prompt again: everything but its last token is reused (its
  // logits are the first sample's).
  Recorder d;
  e.start(job({9, 10, b.tokens[0], 40, 41}, 1), &d);
  run(e);
  EXPECT_EQ(d.end.cached_tokens, 4);
}

TEST(BatchEngine, APromptAloneIsEvaluatedAndKept) {
  FakeModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 32}, {.slots = 1});
  Recorder a;
  e.start(job({3, 4, 5, 6}, 0), &a);
  run(e);
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_EQ(a.end.stop, StopReason::max_tokens);
  ASSERT_EQ(m.submitted.size(), 1u);
  EXPECT_EQ(m.submitted[0].second.size(), 4u);
  EXPECT_EQ(e.counters().prompt_tokens, 4u);
  Recorder b;
  e.start(job({3, 4, 5, 6}, 2), &b);
  run(e);
  EXPECT_EQ(b.end.cached_tokens, 3);
  EXPECT_EQ(b.tokens, expected(0, 4, 2));
}

TEST(BatchEngine, ACancelledOrThrowingJobEndsAndTheOthersGoOn) {
  FakeModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 3 * 32}, {.slots = 3});
  Recorder cancelled, broken, fine;
  cancelled.cancel_after = 2;
  broken.throw_at = 1;
  e.start(job({1, 2}, 8), &cancelled);
  e.start(job({3, 4, 5}, 8), &broken);
  e.start(job({6}, 8), &fine);
  run(e);
  EXPECT_EQ(cancelled.end.stop, StopReason::cancelled);
  EXPECT_EQ(cancelled.tokens, expected(0, 2, 2));
  EXPECT_EQ(broken.end.stop, StopReason::failed);
  EXPECT_NE(broken.end.error.find("callback broke"), std::string::npos) << broken.end.error;
  EXPECT_EQ(fine.end.stop, StopReason::max_tokens);
  EXPECT_EQ(fine.tokens, expected(2, 1, 8));
}

TEST(BatchEngine, TheContextOfASlotEndsItsJob) {
  FakeModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 8}, {.slots = 2});
  Recorder a;
  e.start(job({1, 2, 3}, 100), &a);
  run(e);
  EXPECT_EQ(a.end.stop, StopReason::context_full);
  EXPECT_EQ(a.tokens.size(), 8u - 3u + 1u);  // the last token sampled has no position left
}

TEST(BatchEngine, AFailedStepEndsEveryJobAndForgetsTheCaches) {
  FakeModel m;
  m.slots = 2;
  m.finish_throws_at = 3;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 32}, {.slots = 2});
  Recorder a, b;
  e.start(job({1, 2, 3}, 10), &a);
  e.start(job({4, 5}, 10), &b);
  try {
    run(e);
    FAIL() << "the step's error did not reach the driver";
  } catch (const weft::Error& err) {
    EXPECT_EQ(err.kind(), weft::ErrorKind::disconnected);
    e.fail_all(err.what());
  }
  for (Recorder* r : {&a, &b}) {
    EXPECT_TRUE(r->finished);
    EXPECT_EQ(r->end.stop, StopReason::failed);
    EXPECT_NE(r->end.error.find("stage 1 went away"), std::string::npos) << r->end.error;
  }
  EXPECT_FALSE(e.busy());
  Recorder c;
  e.start(job({1, 2, 3}, 2), &c);
  run(e);
  EXPECT_EQ(c.end.cached_tokens, 0);
  EXPECT_EQ(c.tokens, expected(0, 3, 2));
}

// Over two groups: prompts go in both groups' steps at once; then decoding
// is one step of every slot (decode_together) or stays in the groups.
TEST(BatchEngine, DecodeStepsTogetherOrInGroups) {
  for (bool together : {true, false}) {
    SCOPED_TRACE(together ? "together" : "in groups");
    FakeModel m;
    m.slots = 2;
    BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 4 * 16},
                  {.slots = 4, .batch_tokens = 64, .decode_together = together});
    ASSERT_EQ(e.groups(), 2);
    Recorder r[4];
    for (int i = 0; i < 4; ++i) e.start(job(std::vector<int32_t>(static_cast<size_t>(1 + i), 9), 5), &r[i]);
    run(e);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r[i].tokens, expected(i, 1 + i, 5)) << "sequence " << i;
    // The first two steps: each group's prompts, in its own eval slot.
    ASSERT_GE(m.submitted.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(m.submitted[static_cast<size_t>(k)].first, k);
      for (const BatchToken& t : m.submitted[static_cast<size_t>(k)].second) EXPECT_EQ(t.seq % 2, k);
    }
    size_t all_four = 0, in_slot_one = 0;
    for (size_t i = 2; i < m.submitted.size(); ++i) {
      all_four += m.submitted[i].second.size() == 4 ? 1 : 0;
      in_slot_one += m.submitted[i].first == 1 ? 1 : 0;
    }
    if (together) {
      EXPECT_EQ(all_four, 4u);  // 4 decode steps after the prompts' logits, each of every slot
      EXPECT_EQ(in_slot_one, 0u);
    } else {
      EXPECT_EQ(all_four, 0u);
      EXPECT_EQ(in_slot_one, 4u);
    }
  }
}

TEST(BatchEngine, ImpossibleJobsAndEnginesAreRefused) {
  FakeModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 8}, {.slots = 2});
  auto expect_invalid = [&](const BatchJob& j, const std::string& words) {
    try {
      e.check(j);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const weft::Error& err) {
      EXPECT_EQ(err.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  expect_invalid(job({}, 1), "empty");
  expect_invalid(job(std::vector<int32_t>(9, 1), 1), "do not fit a slot's context of 8");
  expect_invalid(job({1, kVocab}, 1), "outside the vocabulary");
  expect_invalid(job({1}, -1), "max_tokens");
  BatchJob later = job({1}, 1);
  later.options.start = 2;
  expect_invalid(later, "start 2");
  BatchJob hot = job({1}, 1);
  hot.options.sampler.temperature = -1;
  expect_invalid(hot, "temperature");
  Recorder a, b, c;
  e.start(job({1}, 1), &a);
  e.start(job({2}, 1), &b);
  EXPECT_FALSE(e.has_free_slot());
  EXPECT_THROW(e.start(job({3}, 1), &c), weft::Error);
  run(e);
  EXPECT_THROW(BatchEngine(m.eval(), {.n_vocab = kVocab, .n_ctx = 17}, {.slots = 2}), weft::Error);
  EXPECT_THROW(BatchEngine(m.eval(), {.n_vocab = kVocab, .n_ctx = 16}, {.slots = 2, .batch_tokens = 0}), weft::Error);
  EXPECT_THROW(BatchEngine(weft::BatchedEval{}, {.n_vocab = kVocab, .n_ctx = 16}, {.slots = 2}), weft::Error);
}

// A step that throws and a model that recovers: every job evaluates again
// its prompt and what it generated, from its slot's position 0, and goes on
// to the tokens it would have had; the groups follow the new model's slots.
TEST(BatchEngine, ARecoveredModelReplaysEachJobAndItsTokensDoNotChange) {
  for (int throws_at : {0, 1, 5}) {
    SCOPED_TRACE("finish " + std::to_string(throws_at) + " throws");
    FakeModel m;
    m.slots = 2;
    m.finish_throws_at = throws_at;
    m.recover_slots = 1;
    BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 64}, {.slots = 2, .batch_tokens = 64});
    Recorder a, b;
    e.start(job({5, 6, 7}, 8), &a);
    e.start(job({9, 10}, 8), &b);
    EXPECT_EQ(e.groups(), 2);
    for (int guard = 0; e.busy(); ++guard) {
      ASSERT_LT(guard, 10000);
      try {
        e.advance();
      } catch (const weft::Error& err) {
        ASSERT_TRUE(e.recover(err));
      }
    }
    EXPECT_EQ(m.recoveries, 1);
    EXPECT_EQ(e.groups(), 1);
    EXPECT_EQ(a.tokens, expected(0, 3, 8));
    EXPECT_EQ(b.tokens, expected(1, 2, 8));
    EXPECT_EQ(a.end.stop, StopReason::max_tokens);
    EXPECT_EQ(b.end.stop, StopReason::max_tokens);
    EXPECT_EQ(e.counters().recoveries, 1u);
    EXPECT_GE(e.counters().replayed_tokens, 5u);
    // Each sequence was evaluated from its slot's position 0 twice: at its
    // start, and again after the recovery (the new model's cache is empty).
    for (int seq : {0, 1}) {
      int from_zero = 0;
      for (const auto& [slot, batch] : m.submitted)
        for (const BatchToken& t : batch) from_zero += t.seq == seq && t.pos == 0 ? 1 : 0;
      EXPECT_EQ(from_zero, 2) << "sequence " << seq;
    }
  }
}

TEST(BatchEngine, AModelThatDoesNotRecoverLeavesTheJobsToFailAll) {
  for (int answer : {0, -1}) {
    FakeModel m;
    m.finish_throws_at = 1;
    m.recover_slots = answer;
    BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 64}, {.slots = 1});
    Recorder a;
    e.start(job({5, 6, 7}, 8), &a);
    bool failed = false;
    for (int guard = 0; e.busy() && guard < 100; ++guard) {
      try {
        e.advance();
      } catch (const weft::Error& err) {
        EXPECT_FALSE(e.recover(err));
        EXPECT_EQ(e.recovery_error().empty(), answer == 0) << e.recovery_error();
        e.fail_all(err.what());
        failed = true;
      }
    }
    EXPECT_TRUE(failed);
    EXPECT_TRUE(a.finished);
    EXPECT_EQ(a.end.stop, StopReason::failed);
    EXPECT_EQ(e.counters().recoveries, 0u);
  }
}

// A worker dead before the first step: the engine's reserve (sizing every
// slot's memory, over two stages) meets the loss. With a model that
// recovers, the engine is made over the recovered one and its jobs run as
// they would have; without, the error stands.
TEST(BatchEngine, ALossDuringTheReserveIsRecoveredBeforeTheFirstStep) {
  for (int answer : {1, 0}) {
    SCOPED_TRACE("recover answers " + std::to_string(answer));
    FakeModel m;
    m.slots = 2;
    m.recover_slots = answer;
    int reserves = 0;
    weft::BatchedEval eval = m.eval();
    eval.reserve = [&](int64_t, int64_t) {
      if (reserves++ == 0) throw weft::Error(weft::ErrorKind::disconnected, "[fake] stage 1 went away");
    };
    if (answer == 0) {
      EXPECT_THROW(BatchEngine(eval, {.n_vocab = kVocab, .n_ctx = 64}, {.slots = 2, .batch_tokens = 64}),
                   weft::Error);
      EXPECT_EQ(m.recoveries, 1);
      continue;
    }
    BatchEngine e(eval, {.n_vocab = kVocab, .n_ctx = 64}, {.slots = 2, .batch_tokens = 64});
    EXPECT_EQ(m.recoveries, 1);
    EXPECT_EQ(e.counters().recoveries, 1u);
    EXPECT_EQ(e.groups(), 1);  // the recovered model keeps one step in flight
    Recorder a, b;
    e.start(job({5, 6, 7}, 8), &a);
    e.start(job({9, 10}, 8), &b);
    run(e);
    EXPECT_EQ(a.tokens, expected(0, 3, 8));
    EXPECT_EQ(b.tokens, expected(1, 2, 8));
  }
}

}  // namespace
