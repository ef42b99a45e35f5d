// BatchEngine's slot (weft/runtime/batch_engine.h), shared by its step
// code (batch_engine.cpp) and its speculative rounds
// (batch_speculative.cpp). Internal to weft_runtime.
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include "generate_step.h"
#include "weft/runtime/batch_engine.h"

namespace weft {

// A sequence of the batch: its part of the KV cache and, while busy, the
// job it runs.
struct BatchEngine::Slot {
  int index = 0;
  std::vector<int32_t> cached;  // tokens whose keys and values are in this slot's rows, in order
  BatchSink* sink = nullptr;    // null: free
  BatchJob job;
  // What the job evaluates before it samples: its prompt, or after a
  // recovery its prompt and the tokens it had generated.
  std::vector<int32_t> feed;
  size_t fed = 0;       // feed tokens in the cache
  int32_t next = -1;    // the sampled token to feed at the next step
  bool prompted = false;  // the prompt's logits came
  int cached_prefix = 0;
  std::optional<model::Sampler> sampler;
  std::optional<detail::GrammarStep> grammar;  // with the job's grammar: its tokens' constraint
  GenerateResult result;  // the tokens taken so far (take_token counts them)
  std::chrono::steady_clock::time_point started, prompt_done;
  bool stepping = false;  // its tokens are in a step in flight
  // The rejoin rule's clock: when its last token came (timed: since the
  // placement last changed), and whether it is evaluating again what it had.
  std::chrono::steady_clock::time_point last_token_at;
  bool timed = false, replaying = false;
  // Speculative rounds: the accept/reject rule's and the drafts' draws
  // (seeded from the job's seed at start), and this job's counts.
  std::mt19937_64 rng;
  int drafted = 0, accepted = 0;
  bool busy() const { return sink != nullptr; }
  bool prefilled() const { return fed == feed.size(); }
};

}  // namespace weft
