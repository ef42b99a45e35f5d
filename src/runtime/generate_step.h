// What the generation loops (run_generation, run_parallel_generation) do
// with one sampled token; shared so that one sequence of a parallel run
// stops exactly where a run of it alone would.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "weft/runtime/generate.h"

namespace weft::detail {

// run_generation's checks of its arguments (weft/runtime/generate.h):
// throws Error(invalid_input) for max_tokens < 0, an empty prompt, a model
// without a vocabulary, start outside the context, a prompt that does not
// fit after start. The speculative loop makes the same ones.
void check_generation_arguments(const GenerationModel& model, std::span<const int32_t> prompt,
                                const GenerateOptions& options);

// Takes `next`, sampled for a sequence at position n_past (the position it
// would be evaluated at): stops at an end-of-generation or stop token (not
// emitted); else accepts it into the sampler, appends it to r.tokens and
// hands it to emit (which may be empty), then stops when emit said so, at
// max_tokens, or when no position is left (n_past >= n_ctx). nullopt: go on
// and evaluate it at n_past.
std::optional<StopReason> take_token(int32_t next, int64_t n_past, int64_t n_ctx, const GenerationModel& model,
                                     const GenerateOptions& options, model::Sampler& sampler, GenerateResult& r,
                                     const TokenCallback& emit);

// A sequence's grammar (GenerateOptions::grammar), shared by both loops:
// samples among the tokens the grammar allows and follows the tokens taken.
class GrammarStep {
 public:
  // Throws Error(invalid_input) for a grammar without a token trie, or a
  // trie whose vocabulary is not the model's.
  GrammarStep(const GenerateOptions& options, int64_t n_vocab);
  // A copy follows the same grammar from the same place (a speculative
  // round's proposals, once per round); its vocabulary-sized scratch starts
  // empty rather than copied.
  GrammarStep(const GrammarStep& o) : matcher_(o.matcher_) {}
  GrammarStep& operator=(const GrammarStep&) = delete;
  bool active() const { return matcher_.has_value(); }
  // sampler.sample(row) when inactive; else the same over row with the
  // tokens the grammar forbids at -inf. Throws Error(invalid_input) when the
  // grammar allows no token of the vocabulary here.
  int32_t sample(model::Sampler& sampler, std::span<const float> row);
  // What sample() draws from, as Sampler::distribution gives it (the
  // sampler untouched): with a grammar, p(t) for the allowed tokens t of
  // the whole row's p, plus (1 - p(allowed)) times the masked row's
  // distribution (sample()'s second draw). A speculative round judges a
  // proposal against this, so that its tokens come from what a plain step
  // draws from (greedy: the same token). Throws as sample().
  std::vector<model::Sampler::Choice> distribution(model::Sampler& sampler, std::span<const float> row);
  // After take_token took next and said go on: follows it; true when the
  // grammar is finished (nothing but the end may follow).
  bool take(int32_t next);
  double seconds() const { return seconds_; }  // in sample()'s masking and take()

 private:
  std::optional<model::GrammarMatcher> matcher_;
  std::vector<uint8_t> allowed_;
  std::vector<float> masked_;
  std::vector<double> mix_;  // distribution()'s sum of the two draws, by token
  double seconds_ = 0;
};

}  // namespace weft::detail
