// GrammarStep (generate_step.h): constrained sampling for the generation
// loops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "generate_step.h"
#include "seconds_since.h"
#include "weft/core/error.h"

namespace weft::detail {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

GrammarStep::GrammarStep(const GenerateOptions& options, int64_t n_vocab) {
  if (!options.grammar) return;
  if (!options.token_trie) fail(ErrorKind::invalid_input, "generate", "a grammar without the vocabulary's token trie");
  if (options.token_trie->vocab_size() != static_cast<size_t>(n_vocab))
    fail(ErrorKind::invalid_input, "generate",
         "the token trie covers " + std::to_string(options.token_trie->vocab_size()) + " tokens, the model " +
             std::to_string(n_vocab));
  matcher_.emplace(options.grammar, options.token_trie);
}

int32_t GrammarStep::sample(model::Sampler& sampler, std::span<const float> row) {
  if (!matcher_) return sampler.sample(row);
  // First a draw from the whole row: when the grammar allows that token it
  // is the answer, and no mask is needed (most steps, where the model
  // already follows the grammar). Else a second draw with the forbidden
  // tokens masked. For a plain draw from probabilities p this is exactly a
  // draw from p restricted to the allowed set A: P(t) = p(t) + (1 - p(A))
  // p(t) / p(A) = p(t) / p(A); greedy gives the best allowed token either
  // way. (The sampler's filters, top-k/top-p/min-p, then see the whole row
  // first, as in llama.cpp.)
  auto t0 = Clock::now();
  const int32_t first = sampler.sample(row);
  const bool ok = matcher_->allows(first);
  seconds_ += seconds_since(t0);
  if (ok) return first;
  t0 = Clock::now();
  if (matcher_->allowed_tokens(allowed_) == 0)
    fail(ErrorKind::invalid_input, "generate", "the grammar allows no token of the vocabulary here");
  masked_.resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) masked_[i] = allowed_[i] ? row[i] : -INFINITY;
  seconds_ += seconds_since(t0);
  const int32_t next = sampler.sample(masked_);
  // Every allowed logit may be -inf: sample() then returns the first token,
  // which the grammar may forbid; the first allowed one instead.
  if (!allowed_[static_cast<size_t>(next)])
    for (size_t i = 0; i < allowed_.size(); ++i)
      if (allowed_[i]) return static_cast<int32_t>(i);
  return next;
}

std::vector<model::Sampler::Choice> GrammarStep::distribution(model::Sampler& sampler, std::span<const float> row) {
  using Choice = model::Sampler::Choice;
  std::vector<Choice> p = sampler.distribution(row);
  if (!matcher_) return p;
  const auto t0 = Clock::now();
  double allowed_mass = 0;
  std::vector<Choice> out;
  if (p.size() == 1 && matcher_->allows(p[0].id)) {  // greedy, and the grammar allows its token: no mask
    seconds_ += seconds_since(t0);
    return p;
  }
  if (matcher_->allowed_tokens(allowed_) == 0)
    fail(ErrorKind::invalid_input, "generate", "the grammar allows no token of the vocabulary here");
  for (const Choice& c : p)
    if (allowed_[static_cast<size_t>(c.id)]) {
      out.push_back(c);
      allowed_mass += c.probability;
    }
  if (allowed_mass < 1.0) {  // the second draw's share, over the masked row
    masked_.resize(row.size());
    for (size_t i = 0; i < row.size(); ++i) masked_[i] = allowed_[i] ? row[i] : -INFINITY;
    std::vector<Choice> q = sampler.distribution(masked_);
    std::erase_if(q, [&](const Choice& c) { return !allowed_[static_cast<size_t>(c.id)]; });
    if (q.empty())  // every allowed logit -inf: sample() takes the first allowed token
      q.push_back({static_cast<int>(std::find(allowed_.begin(), allowed_.end(), uint8_t{1}) - allowed_.begin()), 1.0});
    double q_mass = 0;
    for (const Choice& c : q) q_mass += c.probability;
    mix_.assign(row.size(), 0.0);  // by token: the two draws' shares summed
    for (const Choice& c : out) mix_[static_cast<size_t>(c.id)] += c.probability;
    for (const Choice& c : q) mix_[static_cast<size_t>(c.id)] += (1.0 - allowed_mass) * c.probability / q_mass;
    out.clear();
    for (size_t i = 0; i < mix_.size(); ++i)
      if (mix_[i] > 0) out.push_back({static_cast<int>(i), mix_[i]});
  }
  seconds_ += seconds_since(t0);
  return out;
}

bool GrammarStep::take(int32_t next) {
  if (!matcher_) return false;
  const auto t0 = Clock::now();
  matcher_->accept_token(next);
  seconds_ += seconds_since(t0);
  return matcher_->finished();
}

}  // namespace weft::detail
