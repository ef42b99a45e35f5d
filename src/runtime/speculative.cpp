// The speculative generation loop (include/weft/runtime/speculative.h).
//
// Positions: n_past_ is how many positions of the target's cache hold
// accepted tokens; the pending token (sampled from the target, already
// emitted) goes at n_past_. Each round the draft catches up to the pending
// token, proposes k tokens, and the target evaluates [pending, d1..dk] at
// n_past_: its row j judges d(j+1), its row k gives the token after a run
// kept whole. The first token the target does not keep from the draft
// (its replacement, or that last one) is the next pending token.
#include "weft/runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>

#include "generate_step.h"
#include "seconds_since.h"
#include "speculative_draw.h"
#include "weft/core/error.h"
#include "weft/runtime/session.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kSpeculativeWhere = "speculative";
constexpr int kMaxDraft = static_cast<int>(model::kSlidingRingStep) - 1;  // a round's step fits a sliding ring

using detail::draw_from;
using detail::speculative_uniform;

void check_rows(const std::vector<float>& logits, size_t rows, int64_t n_vocab, const char* who) {
  if (logits.size() != rows * static_cast<size_t>(n_vocab))
    fail(ErrorKind::invalid_input, kSpeculativeWhere,
         std::string(who) + "'s eval returned " + std::to_string(logits.size()) + " logits for " +
             std::to_string(rows) + " rows of a " + std::to_string(n_vocab) + "-token vocabulary");
}

void check_arguments(const GenerationModel& target, const GenerationModel& draft, const GenerateOptions& options,
                     const SpeculativeOptions& speculative) {
  if (speculative.draft_max < 1 || speculative.draft_max > kMaxDraft)
    fail(ErrorKind::invalid_input, kSpeculativeWhere,
         "draft_max " + std::to_string(speculative.draft_max) + " (1 to " + std::to_string(kMaxDraft) + ")");
  if (target.n_vocab != draft.n_vocab)
    fail(ErrorKind::invalid_input, kSpeculativeWhere,
         "the draft model has " + std::to_string(draft.n_vocab) + " logits per token, the target " +
             std::to_string(target.n_vocab));
}

// One speculative generation: the state the rounds share.
class SpeculativeLoop {
 public:
  SpeculativeLoop(const EvalRowsFn& target_eval, const EvalFn& draft_eval, const GenerationModel& model,
                  const GenerateOptions& options, int draft_max, const TokenCallback& on_token)
      : target_eval_(target_eval),
        draft_eval_(draft_eval),
        model_(model),
        options_(options),
        draft_max_(draft_max),
        on_token_(on_token),
        sampler_(options.sampler),
        draft_sampler_(options.sampler),
        grammar_(options, model.n_vocab),
        rng_(options.sampler.seed ^ 0x5eed5eed5eed5eedULL),
        n_vocab_(model.n_vocab) {}
  SpeculativeLoop(const SpeculativeLoop&) = delete;
  SpeculativeLoop& operator=(const SpeculativeLoop&) = delete;

  SpeculativeResult run(std::span<const int32_t> prompt);

 private:
  // Emits token (take_token's stops); nullopt: go on. The token's position
  // is `position` (where it would be evaluated).
  std::optional<StopReason> emit(int32_t token, int64_t position);
  // The draft's catch-up and its k proposals into drafts_ and their
  // distributions into draft_dists_.
  void propose(int k);
  // One round from the pending token; a stop when generation ends.
  std::optional<StopReason> round();

  const EvalRowsFn& target_eval_;
  const EvalFn& draft_eval_;
  const GenerationModel& model_;  // the target's, n_ctx the smaller context
  const GenerateOptions& options_;
  const int draft_max_;
  const TokenCallback& on_token_;
  model::Sampler sampler_;        // the target's chain: every emitted token accepted
  model::Sampler draft_sampler_;  // the draft's chain, the same tokens accepted (its distributions only: no draws)
  // The output's grammar (GenerateOptions::grammar), following every
  // emitted token; the draft proposes within it and each proposal is judged
  // against what a plain step draws from (GrammarStep::distribution).
  detail::GrammarStep grammar_;
  std::mt19937_64 rng_;           // the drafts' draws, and the rule's two uniforms per judged token
  const int64_t n_vocab_;
  GenerateResult r_;
  SpeculativeCounts counts_;
  std::vector<int32_t> history_;  // every token from position options.start: the prompt, then emitted
  int64_t n_past_ = 0;            // target positions holding accepted tokens
  int64_t draft_len_ = 0;         // draft positions holding accepted tokens
  int32_t pending_ = 0;
  std::vector<float> target_logits_, draft_logits_;
  std::vector<int32_t> drafts_;
  std::vector<std::vector<model::Sampler::Choice>> draft_dists_;
};

std::optional<StopReason> SpeculativeLoop::emit(int32_t token, int64_t position) {
  const size_t before = r_.tokens.size();
  std::optional<StopReason> stop =
      detail::take_token(token, position, model_.n_ctx, model_, options_, sampler_, r_, on_token_);
  if (r_.tokens.size() > before) {
    draft_sampler_.accept(token);
    history_.push_back(token);
  }
  if (!stop && grammar_.take(token)) stop = StopReason::end_of_generation;  // nothing else may follow
  return stop;
}

void SpeculativeLoop::propose(int k) {
  drafts_.clear();
  draft_dists_.clear();
  if (k == 0) return;
  // The accepted tokens the draft has not seen, through the pending one.
  const int64_t start = options_.start;
  const std::span<const int32_t> unseen(history_.data() + (draft_len_ - start),
                                        static_cast<size_t>(n_past_ + 1 - draft_len_));
  draft_eval_(unseen, draft_len_, draft_logits_);
  draft_len_ = n_past_ + 1;
  model::Sampler proposer = draft_sampler_;  // sees the proposals; forgotten after the round
  detail::GrammarStep grammar = grammar_;    // follows them; forgotten likewise
  for (int i = 0; i < k; ++i) {
    check_rows(draft_logits_, 1, n_vocab_, "the draft");
    try {
      draft_dists_.push_back(grammar.distribution(proposer, draft_logits_));
    } catch (const Error&) {
      break;  // the grammar allows nothing here: the target's row says what comes
    }
    // A draw from that distribution with this loop's generator: the
    // proposer is a copy made each round, and its own generator would
    // repeat the same draws every round (draws tied to what came before
    // would bias the output).
    const int32_t d = draw_from(draft_dists_.back(), speculative_uniform(rng_));
    proposer.accept(d);
    drafts_.push_back(d);
    if (grammar.take(d)) break;  // the grammar is finished: nothing else may follow
    if (i + 1 < k) draft_eval_(std::span<const int32_t>(&drafts_.back(), 1), draft_len_++, draft_logits_);
  }
}

std::optional<StopReason> SpeculativeLoop::round() {
  // Proposals that can be emitted: one fewer than the tokens left (the
  // target adds its own), and the step must fit the context.
  const int64_t left = options_.max_tokens - static_cast<int64_t>(r_.tokens.size());
  propose(
      static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({draft_max_, left - 1, model_.n_ctx - n_past_ - 1}))));
  const int k = static_cast<int>(drafts_.size());  // fewer where a grammar ended them
  std::vector<int32_t> step{pending_};
  step.insert(step.end(), drafts_.begin(), drafts_.end());
  target_eval_(step, n_past_, model::LogitRows::all, target_logits_);
  check_rows(target_logits_, step.size(), n_vocab_, "the target");
  ++counts_.target_steps;
  for (int j = 0; j <= k; ++j) {
    const std::span<const float> row(target_logits_.data() + static_cast<size_t>(j) * n_vocab_,
                                     static_cast<size_t>(n_vocab_));
    int32_t token;
    if (j < k) {
      token = speculative_pick(grammar_.distribution(sampler_, row), draft_dists_[j], drafts_[j],
                               speculative_uniform(rng_), speculative_uniform(rng_));
      ++counts_.drafted;
      if (token == drafts_[j]) ++counts_.accepted;
    } else {
      token = grammar_.sample(sampler_, row);
    }
    const int64_t position = n_past_ + j + 1;
    if (auto stop = emit(token, position)) return stop;
    if (j == k || token != drafts_[j]) {  // the target's own token: pending for the next round
      draft_len_ = std::min(draft_len_, position);
      n_past_ = position;
      pending_ = token;
      return std::nullopt;
    }
  }
  return std::nullopt;  // not reached: the last row always ends the round
}

SpeculativeResult SpeculativeLoop::run(std::span<const int32_t> prompt) {
  accept_prompt_tail(sampler_, prompt);
  accept_prompt_tail(draft_sampler_, prompt);
  history_.assign(prompt.begin(), prompt.end());
  const auto t0 = Clock::now();
  target_eval_(prompt, options_.start, model::LogitRows::last, target_logits_);
  check_rows(target_logits_, 1, n_vocab_, "the target");
  if (options_.max_tokens > 0) {
    draft_eval_(prompt, options_.start, draft_logits_);
    check_rows(draft_logits_, 1, n_vocab_, "the draft");
  }
  r_.prompt_seconds = seconds_since(t0);
  n_past_ = draft_len_ = options_.start + static_cast<int64_t>(prompt.size());
  if (options_.max_tokens == 0) {
    r_.total_seconds = r_.prompt_seconds;
    return {r_, counts_};
  }
  pending_ = grammar_.sample(sampler_, target_logits_);
  std::optional<StopReason> stop = emit(pending_, n_past_);
  while (!stop) stop = round();
  r_.stop = *stop;
  r_.total_seconds = seconds_since(t0);
  return {r_, counts_};
}

}  // namespace

SpeculativeResult run_speculative_generation(const EvalRowsFn& target_eval, const GenerationModel& target,
                                             const EvalFn& draft_eval, const GenerationModel& draft,
                                             std::span<const int32_t> prompt, const GenerateOptions& options,
                                             const SpeculativeOptions& speculative, const TokenCallback& on_token) {
  check_arguments(target, draft, options, speculative);
  GenerationModel model = target;
  model.n_ctx = std::min(target.n_ctx, draft.n_ctx);
  // run_generation's own checks of the prompt, start and max_tokens, on a
  // loop that evaluates nothing.
  detail::check_generation_arguments(model, prompt, options);
  SpeculativeLoop loop(target_eval, draft_eval, model, options, speculative.draft_max, on_token);
  return loop.run(prompt);
}

SpeculativeResult generate_speculative(Session& target, Session& draft, std::span<const int32_t> prompt,
                                       const GenerateOptions& options, const SpeculativeOptions& speculative,
                                       const TokenCallback& on_token) {
  check_same_vocabulary(target.tokenizer(), draft.tokenizer());
  const EvalRowsFn target_eval = [&](std::span<const int32_t> tokens, int64_t n_past, model::LogitRows rows,
                                     std::vector<float>& logits) { logits = target.eval(tokens, n_past, rows); };
  const EvalFn draft_eval = [&](std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits) {
    logits = draft.eval(tokens, n_past, model::LogitRows::last);
  };
  return run_speculative_generation(target_eval, target.generation_model(), draft_eval, draft.generation_model(),
                                    prompt, options, speculative, on_token);
}

}  // namespace weft
