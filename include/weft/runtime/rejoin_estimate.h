// The rule that decides a rejoin (weft/runtime/rejoin.h, docs/recovery.md
// "Rejoin"), apart from the watch so that the batched engine can weigh it
// without the RPC client's headers.
#pragma once

#include <cstdint>

namespace weft {

// The rule that decides a rejoin. Time saved: the time per token measured
// since the placement last changed, less the time per token measured on the
// placement that held the lost workers (the one before the first loss),
// times the tokens left to generate. Cost: what moving back takes, predicted
// from the last recovery (its reload, and its re-prefill scaled to the
// history now). The workers come back when the time saved exceeds the cost.
struct RejoinEstimate {
  double seconds_per_token_now = 0;   // measured without the lost workers
  double seconds_per_token_with = 0;  // measured with them
  int64_t remaining_tokens = 0;       // at most this many tokens are still to come
  double move_seconds = 0;            // predicted: load with them again and re-evaluate the history
  double gain_seconds() const {
    return (seconds_per_token_now - seconds_per_token_with) * static_cast<double>(remaining_tokens);
  }
  bool pays() const { return remaining_tokens > 0 && gain_seconds() > move_seconds; }
};

}  // namespace weft
