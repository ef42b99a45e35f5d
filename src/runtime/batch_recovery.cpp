// BatchEngine across placement changes (weft/runtime/batch_engine.h): a
// recovery after a lost worker, a move back onto workers that answer again
// (between jobs, or while they run when the rule of weft/runtime/
// rejoin_estimate.h says it pays), and the times that rule weighs.
#include <algorithm>
#include <string>

#include "batch_slot.h"
#include "seconds_since.h"
#include "weft/core/error.h"
#include "weft/runtime/batch_engine.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kBatchRecoveryWhere = "batch";

// Rounds measured on the placement in force before the rule is weighed:
// one interval alone is too noisy (as generate()'s kMinMeasuredTokens).
constexpr int64_t kMinRounds = 2;
// The weight of the newest interval in the moving average: 1/4.
constexpr double kRoundAverage = 4;

}  // namespace

void BatchEngine::set_groups_recovering(int model_slots) {
  for (;;) {  // each recovery drops a device: when none is left, recover throws
    try {
      set_groups(model_slots);
      return;
    } catch (const std::exception& e) {
      const int slots = eval_.recover ? eval_.recover(e) : 0;
      if (slots < 1) throw;
      ++counters_.recoveries;
      placement_lost();
      model_slots = slots;
    }
  }
}

bool BatchEngine::recover(const std::exception& cause) {
  drain();  // the failed model's steps: their logits are lost with its cache
  recovery_error_.clear();
  const Clock::time_point t0 = Clock::now();
  int model_slots = 0;
  try {
    model_slots = eval_.recover ? eval_.recover(cause) : 0;
  } catch (const std::exception& e) {  // nothing left to run on, or the rest cannot hold the model
    recovery_error_ = e.what();
    return false;
  }
  if (model_slots < 1) return false;
  placement_lost();
  try {
    set_groups_recovering(model_slots);  // its reserve may meet another loss
  } catch (const std::exception& e) {
    recovery_error_ = e.what();
    return false;
  }
  times_.reload_seconds = seconds_since(t0);
  replay_jobs();
  ++counters_.recoveries;
  return true;
}

void BatchEngine::placement_lost() {
  if (times_.full) times_.full_round_seconds = times_.rounds >= kMinRounds ? times_.round_seconds : -1;
  times_.full = false;
  times_.rounds = 0;
}

void BatchEngine::replay_jobs() {
  times_.replaying = 0;
  times_.replay_tokens = 0;
  times_.replay_start = Clock::now();
  times_.rounds = 0;
  for (auto& s : slots_) {
    s->stepping = false;
    s->cached.clear();
    s->timed = s->replaying = false;
    if (!s->busy()) continue;
    // Everything the job had evaluated, and the token it sampled last
    // (fed at its next step): evaluated again, the last row's logits are
    // the next sample's, as they would have been.
    s->feed = s->job.prompt;
    s->feed.insert(s->feed.end(), s->result.tokens.begin(), s->result.tokens.end());
    s->fed = 0;
    s->next = -1;
    s->replaying = true;
    ++times_.replaying;
    times_.replay_tokens += s->feed.size();
    counters_.replayed_tokens += s->feed.size();
  }
  if (times_.replaying == 0) times_.replay_seconds = 0;
}

void BatchEngine::note_token_time(Slot& s) {
  const Clock::time_point now = Clock::now();
  if (s.replaying) {
    s.replaying = false;
    if (--times_.replaying == 0)
      times_.replay_seconds = std::chrono::duration<double>(now - times_.replay_start).count();
  } else if (s.timed) {
    const double interval = std::chrono::duration<double>(now - s.last_token_at).count();
    times_.round_seconds =
        times_.rounds == 0 ? interval : times_.round_seconds + (interval - times_.round_seconds) / kRoundAverage;
    ++times_.rounds;
  }
  s.timed = true;
  s.last_token_at = now;
}

RejoinEstimate BatchEngine::running_estimate() const {
  RejoinEstimate e;
  e.seconds_per_token_now = times_.round_seconds;
  e.seconds_per_token_with = times_.full_round_seconds;
  uint64_t held = 0;  // tokens the jobs hold now: what a move has them evaluate again
  for (const auto& s : slots_) {
    if (!s->busy()) continue;
    const int64_t generated = static_cast<int64_t>(s->result.tokens.size());
    const int64_t room = slot_ctx_ - static_cast<int64_t>(s->job.prompt.size()) - generated;
    e.remaining_tokens = std::max(e.remaining_tokens, std::min<int64_t>(s->job.options.max_tokens - generated, room));
    held += s->job.prompt.size() + s->result.tokens.size();
  }
  e.move_seconds = times_.reload_seconds;
  if (times_.replay_tokens > 0)
    e.move_seconds += times_.replay_seconds * static_cast<double>(held) / static_cast<double>(times_.replay_tokens);
  return e;
}

int BatchEngine::call_rejoin(const RejoinEstimate* running) {
  try {
    return eval_.rejoin(running);
  } catch (const std::exception& e) {  // a returning worker gone again part-way: placed as after a loss
    if (!recover(e))
      fail(ErrorKind::disconnected, kBatchRecoveryWhere,
           "taking a worker back failed: " + std::string(e.what()) +
               (recovery_error_.empty() ? "" : "; recovery failed: " + recovery_error_));
    return 0;
  }
}

bool BatchEngine::rejoin() {
  if (!eval_.rejoin || busy() || stepping()) return false;
  const int model_slots = call_rejoin(nullptr);
  if (model_slots < 1) return false;
  placement_replaced(model_slots);
  ++counters_.rejoins;
  return true;
}

void BatchEngine::placement_replaced(int model_slots) {
  if (busy() || stepping())
    fail(ErrorKind::invalid_input, kBatchRecoveryWhere, "the model was placed again while a job runs");
  for (auto& s : slots_) s->cached.clear();  // the model's cache is new
  set_groups_recovering(model_slots);
  times_ = PlacementTimes{};  // between jobs: nothing to weigh against yet
}

bool BatchEngine::rejoin_running() {
  if (!eval_.rejoin || !eval_.rejoin_ready || !busy() || !eval_.rejoin_ready()) return false;
  if (times_.rounds < kMinRounds || times_.replaying > 0) return false;  // measure first
  const RejoinEstimate e = running_estimate();
  if (e.seconds_per_token_with >= 0 && e.pays()) {
    while (collect()) {
    }                           // the steps in flight finish and their tokens are sampled: nothing is lost
    if (!busy()) return false;  // they were the last: nothing left to speed up
  }
  const Clock::time_point t0 = Clock::now();
  const int model_slots = call_rejoin(&e);  // declines (reported once) unless it pays
  if (model_slots < 1) return false;
  set_groups_recovering(model_slots);
  times_.full = true;
  times_.reload_seconds = seconds_since(t0);  // a move's cost, the next one's estimate
  replay_jobs();
  ++counters_.rejoins;
  return true;
}

}  // namespace weft
