// BatchEngine::rejoin_running (weft/runtime/batch_engine.h): lost workers
// taken back while jobs run (`weft run --parallel`), weighed by the rule of
// weft/runtime/rejoin_estimate.h per round. The fake model's steps take a
// set time that a recovery and a move back change, so the rule's inputs are
// known to within the sleeps' precision; the margins are tenfold.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "runtime/batch_test_sink.h"
#include "weft/core/error.h"
#include "weft/runtime/batch_engine.h"

namespace {

using weft::BatchEngine;
using weft::RejoinEstimate;
using weft::model::BatchToken;

using batch_test::expected;
using batch_test::job;
using batch_test::kVocab;
using batch_test::predicted;
using batch_test::Recorder;

// Two stages (two steps in flight) until finish call `lose_at` throws; then
// one stage, whose steps take `after_loss_ms`, until a move back (when the
// rule pays) restores two stages at `full_ms`. The lost worker answers
// again from the recovery on.
struct TimedModel {
  int slots = 2;
  int lose_at = 6;
  int finishes = 0;
  int full_ms = 1;
  int after_loss_ms = 25;
  int step_ms = full_ms;
  bool lost = false;
  int moves = 0;
  std::vector<RejoinEstimate> weighed;  // every estimate rejoin was asked with
  std::map<int, std::vector<BatchToken>> in_flight;
  std::vector<BatchToken> evaluated;  // every token of every step, in order

  weft::BatchedEval eval() {
    weft::BatchedEval e;
    e.slots = slots;
    e.submit = [this](int slot, std::span<const BatchToken> batch, int64_t) {
      in_flight[slot].assign(batch.begin(), batch.end());
      evaluated.insert(evaluated.end(), batch.begin(), batch.end());
    };
    e.finish = [this](int slot, std::vector<float>& logits) {
      std::vector<BatchToken> batch = std::move(in_flight[slot]);
      in_flight[slot].clear();
      if (finishes++ == lose_at) throw weft::Error(weft::ErrorKind::disconnected, "[fake] stage 1 went away");
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      logits.clear();
      for (const BatchToken& t : batch) {
        if (!t.logits) continue;
        std::vector<float> row(kVocab, 0.0f);
        row[static_cast<size_t>(predicted(t.seq, t.pos))] = 1.0f;
        logits.insert(logits.end(), row.begin(), row.end());
      }
    };
    e.recover = [this](const std::exception&) {
      in_flight.clear();
      lost = true;
      step_ms = after_loss_ms;
      return 1;
    };
    e.rejoin_ready = [this] { return lost; };
    e.rejoin = [this](const RejoinEstimate* running) {
      EXPECT_NE(running, nullptr) << "jobs are running: the rule must be weighed";
      if (!running) return 0;
      weighed.push_back(*running);
      if (running->seconds_per_token_with < 0 || !running->pays()) return 0;
      EXPECT_TRUE(in_flight.empty() ||
                  std::all_of(in_flight.begin(), in_flight.end(), [](const auto& f) { return f.second.empty(); }))
          << "a step in flight when the model moves";
      in_flight.clear();
      lost = false;
      step_ms = full_ms;
      ++moves;
      return 2;
    };
    return e;
  }

  // How many times sequence seq was evaluated from its position 0.
  int starts_of(int seq) const {
    return static_cast<int>(std::count_if(evaluated.begin(), evaluated.end(),
                                          [seq](const BatchToken& t) { return t.seq == seq && t.pos == 0; }));
  }
};

// What run_parallel_generation does: advance, recover a loss, weigh a move.
void run_with_rejoin(BatchEngine& e) {
  for (int guard = 0; e.busy(); ++guard) {
    ASSERT_LT(guard, 10000) << "the engine does not finish";
    try {
      e.advance();
      e.rejoin_running();
    } catch (const weft::Error& err) {
      ASSERT_TRUE(e.recover(err)) << err.what();
    }
  }
}

// After the loss each round takes 25 ms instead of 1: with 30-odd tokens
// left the move back pays for itself many times. It is made once, between
// steps, and every job evaluates again what it had: the tokens are those of
// an uninterrupted run.
TEST(BatchRejoin, AMoveThatPaysIsMadeWhileJobsRunAndTheirTokensDoNotChange) {
  TimedModel m;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 64},
                {.slots = 2, .batch_tokens = 64, .decode_together = false});
  Recorder a, b;
  e.start(job({5, 6, 7}, 40), &a);
  e.start(job({9, 10}, 40), &b);
  run_with_rejoin(e);
  EXPECT_EQ(a.tokens, expected(0, 3, 40));
  EXPECT_EQ(b.tokens, expected(1, 2, 40));
  EXPECT_EQ(e.counters().recoveries, 1u);
  EXPECT_EQ(e.counters().rejoins, 1u);
  EXPECT_EQ(m.moves, 1);
  EXPECT_EQ(e.groups(), 2);  // two stages again
  ASSERT_FALSE(m.weighed.empty());
  const RejoinEstimate& moved = m.weighed.back();
  EXPECT_TRUE(moved.pays());
  EXPECT_GT(moved.seconds_per_token_with, 0);
  EXPECT_GT(moved.seconds_per_token_now, 5 * moved.seconds_per_token_with);
  EXPECT_GT(moved.move_seconds, 0);  // the recovery's replay, scaled
  EXPECT_GT(moved.remaining_tokens, 0);
  EXPECT_LE(moved.remaining_tokens, 40);
  // From position 0: at the start, after the recovery, after the move.
  EXPECT_EQ(m.starts_of(0), 3);
  EXPECT_EQ(m.starts_of(1), 3);
}

// One stage is faster than two here (the fewer stages of equal devices on
// one machine): the move would lose time, so it is declined at every
// round it is weighed, and the jobs end on the recovered model.
TEST(BatchRejoin, AMoveThatWouldLoseTimeIsDeclined) {
  TimedModel m;
  m.full_ms = 25;
  m.step_ms = 25;
  m.after_loss_ms = 1;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 64},
                {.slots = 2, .batch_tokens = 64, .decode_together = false});
  Recorder a, b;
  e.start(job({5, 6, 7}, 24), &a);
  e.start(job({9, 10}, 24), &b);
  run_with_rejoin(e);
  EXPECT_EQ(a.tokens, expected(0, 3, 24));
  EXPECT_EQ(b.tokens, expected(1, 2, 24));
  EXPECT_EQ(e.counters().rejoins, 0u);
  EXPECT_EQ(m.moves, 0);
  ASSERT_FALSE(m.weighed.empty());
  for (const RejoinEstimate& w : m.weighed) {
    EXPECT_FALSE(w.pays());
    EXPECT_LT(w.seconds_per_token_now, w.seconds_per_token_with);
  }
  EXPECT_EQ(m.starts_of(0), 2);  // the start and the recovery only
}

// A loss at the first step: nothing was measured with every device, so the
// estimate says so (seconds_per_token_with < 0) and nothing moves.
TEST(BatchRejoin, ALossBeforeAnyRoundWasMeasuredIsNotWeighedAgainstAGuess) {
  TimedModel m;
  m.lose_at = 0;
  BatchEngine e(m.eval(), {.n_vocab = kVocab, .n_ctx = 2 * 64},
                {.slots = 2, .batch_tokens = 64, .decode_together = false});
  Recorder a, b;
  e.start(job({5, 6, 7}, 16), &a);
  e.start(job({9, 10}, 16), &b);
  run_with_rejoin(e);
  EXPECT_EQ(a.tokens, expected(0, 3, 16));
  EXPECT_EQ(b.tokens, expected(1, 2, 16));
  EXPECT_EQ(m.moves, 0);
  ASSERT_FALSE(m.weighed.empty());
  for (const RejoinEstimate& w : m.weighed) EXPECT_LT(w.seconds_per_token_with, 0);
}

}  // namespace
