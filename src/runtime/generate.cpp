// The generation loop (include/weft/runtime/generate.h).
#include "weft/runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "generate_step.h"
#include "seconds_since.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kGenerateWhere = "generate";

// Checks the eval's answer: the last token's logits.
std::span<const float> checked(const std::vector<float>& logits, int64_t n_vocab) {
  if (logits.size() != static_cast<size_t>(n_vocab))
    fail(ErrorKind::invalid_input, kGenerateWhere,
         "eval returned " + std::to_string(logits.size()) + " logits for the last token of a " +
             std::to_string(n_vocab) + "-token vocabulary");
  return logits;
}

}  // namespace

namespace detail {

void check_generation_arguments(const GenerationModel& model, std::span<const int32_t> prompt,
                                const GenerateOptions& options) {
  if (options.max_tokens < 0)
    fail(ErrorKind::invalid_input, kGenerateWhere, "max_tokens " + std::to_string(options.max_tokens) + " (>= 0)");
  if (prompt.empty()) fail(ErrorKind::invalid_input, kGenerateWhere, "the prompt is empty");
  if (model.n_vocab <= 0) fail(ErrorKind::invalid_input, kGenerateWhere, "a model without a vocabulary");
  if (options.start < 0 || options.start > model.n_ctx)
    fail(ErrorKind::invalid_input, kGenerateWhere,
         "start " + std::to_string(options.start) + " is outside the context of " + std::to_string(model.n_ctx));
  if (static_cast<int64_t>(prompt.size()) > model.n_ctx - options.start)
    fail(ErrorKind::invalid_input, kGenerateWhere,
         "prompt of " + std::to_string(prompt.size()) + " tokens exceeds the context of " +
             std::to_string(model.n_ctx) +
             (options.start > 0 ? " after " + std::to_string(options.start) + " positions" : ""));
}

std::optional<StopReason> take_token(int32_t next, int64_t n_past, int64_t n_ctx, const GenerationModel& model,
                                     const GenerateOptions& options, model::Sampler& sampler, GenerateResult& r,
                                     const TokenCallback& emit) {
  if (options.stop_at_end_of_generation && model.is_end_of_generation && model.is_end_of_generation(next))
    return StopReason::end_of_generation;
  if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), next) != options.stop_tokens.end())
    return StopReason::stop_token;
  sampler.accept(next);
  r.tokens.push_back(next);
  if (emit && !emit(next)) return StopReason::callback;
  if (static_cast<int>(r.tokens.size()) >= options.max_tokens) return StopReason::max_tokens;
  if (n_past >= n_ctx) return StopReason::context_full;  // no position left for the token just emitted
  return std::nullopt;
}

}  // namespace detail

void accept_prompt_tail(model::Sampler& sampler, std::span<const int32_t> prompt) {
  const size_t window = static_cast<size_t>(sampler.options().repetition_window);
  for (size_t i = prompt.size() - std::min(window, prompt.size()); i < prompt.size(); ++i) sampler.accept(prompt[i]);
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::end_of_generation: return "end_of_generation";
    case StopReason::stop_token: return "stop_token";
    case StopReason::context_full: return "context_full";
    case StopReason::callback: return "callback";
    case StopReason::cancelled: return "cancelled";
    case StopReason::failed: return "failed";
  }
  return "unknown";
}

double GenerateResult::decode_tokens_per_second() const {
  const double decode = total_seconds - prompt_seconds;
  return tokens.size() > 1 && decode > 0 ? static_cast<double>(tokens.size() - 1) / decode : 0.0;
}

GenerateResult run_generation(const EvalFn& eval, const GenerationModel& model, std::span<const int32_t> prompt,
                              const GenerateOptions& options, const TokenCallback& on_token) {
  detail::check_generation_arguments(model, prompt, options);
  model::Sampler sampler(options.sampler);
  detail::GrammarStep grammar(options, model.n_vocab);
  accept_prompt_tail(sampler, prompt);
  GenerateResult r;
  const auto t0 = Clock::now();
  std::vector<float> logits;
  eval(prompt, options.start, logits);
  std::span<const float> row = checked(logits, model.n_vocab);
  r.prompt_seconds = seconds_since(t0);
  if (options.max_tokens == 0) {  // the prompt alone: its keys and values are in the cache
    r.total_seconds = r.prompt_seconds;
    return r;
  }
  int64_t n_past = options.start + static_cast<int64_t>(prompt.size());
  while (true) {
    const int32_t next = grammar.sample(sampler, row);
    if (auto stop = detail::take_token(next, n_past, model.n_ctx, model, options, sampler, r, on_token)) {
      r.stop = *stop;
      break;
    }
    if (grammar.take(next)) {  // the grammar is complete: nothing else may follow
      r.stop = StopReason::end_of_generation;
      break;
    }
    eval(std::span<const int32_t>(&next, 1), n_past++, logits);
    row = checked(logits, model.n_vocab);
  }
  r.total_seconds = seconds_since(t0);
  r.grammar_seconds = grammar.seconds();
  return r;
}

}  // namespace weft
