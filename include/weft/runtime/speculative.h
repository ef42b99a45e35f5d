// Speculative decoding: a small draft model proposes up to draft_max tokens
// one at a time; the target model evaluates them all in one forward step
// (its logits for every position), and the loop keeps the longest run the
// target agrees with plus one token of the target's own. Over a pipeline of
// workers that turns draft_max sequential trips into one per accepted run.
//
//   weft::Session target({.model = "big.gguf", .devices = {...}});
//   weft::Session draft({.model = "small.gguf"});
//   weft::check_same_vocabulary(target.tokenizer(), draft.tokenizer());
//   target.load(n_ctx); draft.load(n_ctx);
//   weft::SpeculativeResult r = weft::generate_speculative(target, draft, prompt, {.max_tokens = 64},
//                                                          {.draft_max = 8}, on_token);
//   // r.generation.tokens, r.counts.acceptance()
//
// What is guaranteed (docs/speculative.md): every emitted token is drawn
// from the target's distribution after the sampler chain (penalties, top-k,
// temperature, top-p, min-p: model::Sampler::distribution) given the
// tokens before it. Greedy (temperature 0): token for token the text plain
// decoding gives, as long as the target's logits for a position do not
// depend on how many tokens were evaluated with it beyond rounding that
// changes no choice (two logits within that rounding may swap).
// Sampled: a draft token x, drawn from the draft's distribution q, is kept
// with probability min(1, p(x) / q(x)), p the target's; at the first
// rejection the token is drawn from max(0, p - q) renormalized; after a
// run accepted whole, one more from p. The output then has the target's
// distribution, though not the same tokens as a plain run with the same
// seed (the draws differ).
//
// The KV caches need no rewind: a forward step at position n writes rows
// n.. and attends to rows [0, n + tokens) only (model::fill_causal_mask),
// so after a rejection the next step simply starts at the accepted length
// and overwrites what the rejected tokens left. A sliding-window ring
// (model::sliding_ring_rows) holds steps of up to its step size, so
// draft_max + 1 must not exceed that (512 by default; checked).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "weft/model/sampler.h"
#include "weft/model/tokenizer.h"
#include "weft/runtime/generate.h"

namespace weft {

class Session;

struct SpeculativeOptions {
  int draft_max = 8;  // tokens the draft proposes per target step, >= 1
};

// What the rounds did.
struct SpeculativeCounts {
  int64_t target_steps = 0;  // the target's forward steps after the prompt
  int64_t drafted = 0;       // draft tokens the target judged
  int64_t accepted = 0;      // of those, kept
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0; }
};

struct SpeculativeResult {
  GenerateResult generation;  // as run_generation's (prompt_seconds: both models' prompt evals)
  SpeculativeCounts counts;
};

// Evaluates tokens at positions n_past.. and writes their logits into
// logits: every token's (token-major, tokens.size() * n_vocab floats), or
// with LogitRows::last the last one's.
using EvalRowsFn = std::function<void(std::span<const int32_t> tokens, int64_t n_past, model::LogitRows rows,
                                      std::vector<float>& logits)>;

// Throws Error(invalid_input) unless draft's vocabulary is target's: the
// same size and the same string for every id; the message names both sizes,
// or the first id whose strings differ and both strings.
void check_same_vocabulary(const model::Tokenizer& target, const model::Tokenizer& draft);

// The accept/reject rule for one draft token, on distributions as
// Sampler::distribution gives them (ids with probabilities summing to 1;
// ids absent have probability 0). u and v are uniform in [0, 1): u decides
// acceptance, v draws the replacement. Returns drafted when kept, else a
// token drawn from normalize(max(0, p - q)) (from p itself when that is all
// zero, which a rejection cannot reach with exact arithmetic). Greedy
// distributions (one token each) keep the draft iff it is the target's
// token, else give the target's token.
int32_t speculative_pick(std::span<const model::Sampler::Choice> target, std::span<const model::Sampler::Choice> draft,
                         int32_t drafted, double u, double v);

// The generation loop (run_generation's contract and stop conditions, the
// prompt at options.start) with a draft. target_eval gives the rows asked
// for; draft_eval the last row (EvalFn). The draft's cache must hold what
// the target's does before options.start. Both models must share n_vocab;
// the context is the smaller of the two. Each round the draft proposes up
// to draft_max tokens (fewer near max_tokens or the context's end, or where
// options.grammar ends), and the target evaluates its pending token and the
// proposals in one call. With a grammar the proposals follow it and are
// judged against what a plain step draws from (GrammarStep::distribution):
// greedy output is run_generation's under the same grammar. Throws
// Error(invalid_input) as run_generation does, for draft_max < 1 or above
// 511, and vocabularies of different sizes.
SpeculativeResult run_speculative_generation(const EvalRowsFn& target_eval, const GenerationModel& target,
                                             const EvalFn& draft_eval, const GenerationModel& draft,
                                             std::span<const int32_t> prompt, const GenerateOptions& options,
                                             const SpeculativeOptions& speculative,
                                             const TokenCallback& on_token = {});

// run_speculative_generation over two loaded Sessions (Session::eval for
// both; the target's single-sequence history kept as generate() keeps it,
// but a worker's death ends the generation: no recovery with a draft).
// Checks the vocabularies first (check_same_vocabulary).
SpeculativeResult generate_speculative(Session& target, Session& draft, std::span<const int32_t> prompt,
                                       const GenerateOptions& options, const SpeculativeOptions& speculative,
                                       const TokenCallback& on_token = {});

}  // namespace weft
