// The generation loop, apart from any model: prompt, then one token at a
// time, sampled, handed to a callback, until a stop condition. The Session
// runs it over its model; tests run it over any eval function.
//
//   GenerateResult r = weft::run_generation(eval, {.n_vocab = v, .n_ctx = 512}, prompt,
//                                           {.max_tokens = 32}, on_token);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "weft/model/sampler.h"

namespace weft {

struct GenerateOptions {
  int max_tokens = 64;                  // tokens to generate, >= 0 (0: evaluate the prompt only)
  model::SamplerOptions sampler;        // default: greedy
  bool stop_at_end_of_generation = true;  // the model's end-of-generation tokens end it (not emitted)
  std::vector<int32_t> stop_tokens;     // more ids that end it (not emitted)
};

enum class StopReason {
  max_tokens,         // max_tokens were emitted
  end_of_generation,  // the model's end-of-generation token came
  stop_token,         // one of options.stop_tokens came
  context_full,       // the next token would not fit n_ctx
  callback,           // on_token returned false
};
const char* stop_reason_name(StopReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // emitted, in order (never the stop token)
  StopReason stop = StopReason::max_tokens;
  double prompt_seconds = 0;    // the prompt's eval, up to the first token's logits
  double total_seconds = 0;     // every eval and sample
  // Tokens per second after the first (the decode speed); 0 below two tokens.
  double decode_tokens_per_second() const;
};

// Called with each emitted token; false stops after it.
using TokenCallback = std::function<bool(int32_t token)>;
// Evaluates tokens at positions n_past.. and writes the last one's logits
// (n_vocab floats) into logits, a vector the loop keeps between calls: a
// model that computes the output product for that token alone and writes
// in place allocates nothing per token (Session::generate: LlamaModel::eval
// with LogitRows::last).
using EvalFn = std::function<void(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits)>;

struct GenerationModel {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;  // positions the eval can hold
  std::function<bool(int32_t)> is_end_of_generation;  // null: none
};

// Evaluates the prompt at position 0, then repeats: sample the last row,
// stop if it is an end-of-generation or stop token, emit it (on_token), stop
// at max_tokens or when the callback says so, stop when the context is
// full, else evaluate it at the next position. Throws Error(invalid_input)
// for an empty prompt, one that does not fit n_ctx, max_tokens < 0, or an
// eval returning the wrong number of logits.
GenerateResult run_generation(const EvalFn& eval, const GenerationModel& model, std::span<const int32_t> prompt,
                              const GenerateOptions& options, const TokenCallback& on_token = {});

}  // namespace weft
