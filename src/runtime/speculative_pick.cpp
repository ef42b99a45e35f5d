// The accept/reject rule of speculative sampling, and the vocabulary check
// (include/weft/runtime/speculative.h).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "speculative_draw.h"
#include "weft/core/error.h"
#include "weft/runtime/speculative.h"

namespace weft {

double detail::speculative_uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int32_t detail::draw_from(std::span<const model::Sampler::Choice> d, double v) {
  double sum = 0;
  for (const model::Sampler::Choice& c : d) {
    sum += c.probability;
    if (v < sum) return c.id;
  }
  return d.back().id;
}
namespace {

// Probability of id in a distribution (0 when absent).
double probability_of(std::span<const model::Sampler::Choice> d, int32_t id) {
  for (const model::Sampler::Choice& c : d)
    if (c.id == id) return c.probability;
  return 0.0;
}

// One id drawn with weights w (over ids), v uniform in [0, 1); the last id
// of positive weight when rounding leaves the walk short. -1 when every
// weight is 0.
int32_t draw_weighted(const std::vector<std::pair<int32_t, double>>& w, double v) {
  double total = 0;
  for (const auto& [id, weight] : w) total += weight;
  if (!(total > 0)) return -1;
  const double target = v * total;
  double sum = 0;
  int32_t last = -1;
  for (const auto& [id, weight] : w) {
    if (weight <= 0) continue;
    sum += weight;
    last = id;
    if (target < sum) return id;
  }
  return last;
}

}  // namespace

void check_same_vocabulary(const model::Tokenizer& target, const model::Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size())
    fail(ErrorKind::invalid_input, "speculative",
         "the draft model's vocabulary has " + std::to_string(draft.vocab_size()) + " tokens, the target's " +
             std::to_string(target.vocab_size()) + ": a draft must share the target's vocabulary");
  for (size_t i = 0; i < target.vocab_size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (target.token_text(id) != draft.token_text(id))
      fail(ErrorKind::invalid_input, "speculative",
           "token " + std::to_string(id) + " is '" + draft.token_text(id) + "' in the draft model's vocabulary, '" +
               target.token_text(id) + "' in the target's: a draft must share the target's vocabulary");
  }
}

int32_t speculative_pick(std::span<const model::Sampler::Choice> target, std::span<const model::Sampler::Choice> draft,
                         int32_t drafted, double u, double v) {
  const double p = probability_of(target, drafted);
  const double q = probability_of(draft, drafted);
  // Kept with probability min(1, p / q): u < p / q, written without the
  // division (q may be 0 when the caller's draft did not come from q).
  if (u * q < p) return drafted;
  // The residual max(0, p - q) over the target's ids (where p is 0 it is 0).
  std::unordered_map<int32_t, double> q_of;
  q_of.reserve(draft.size());
  for (const model::Sampler::Choice& c : draft) q_of[c.id] += c.probability;
  std::vector<std::pair<int32_t, double>> residual;
  residual.reserve(target.size());
  for (const model::Sampler::Choice& c : target) {
    const auto at = q_of.find(c.id);
    residual.emplace_back(c.id, std::max(0.0, c.probability - (at == q_of.end() ? 0.0 : at->second)));
  }
  int32_t id = draw_weighted(residual, v);
  if (id >= 0) return id;
  residual.clear();
  for (const model::Sampler::Choice& c : target) residual.emplace_back(c.id, c.probability);
  id = draw_weighted(residual, v);
  if (id < 0) fail(ErrorKind::invalid_input, "speculative", "the target's distribution has no token of positive probability");
  return id;
}

}  // namespace weft
