// Sampler (include/weft/model/sampler.h): repetition, frequency and presence
// penalties, greedy or top-k -> softmax(temperature) -> top-p -> min-p -> one
// draw. The one sampler of weft: `weft run`, `weft chat` and the server's
// engine all draw through it.
#include "weft/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "weft/core/error.h"

namespace weft::model {
namespace {

[[noreturn]] void bad(const std::string& what) {
  fail(ErrorKind::invalid_input, "sampler", what);
}

// Larger logit first; the lower id first on ties, so greedy and top_k=1 agree.
bool before(float la, int ia, float lb, int ib) {
  return la > lb || (la == lb && ia < ib);
}

}  // namespace

Sampler::Sampler(SamplerOptions options) : options_(options), rng_(options.seed) {
  const SamplerOptions& o = options_;
  if (!(o.temperature >= 0.f)) bad("temperature " + std::to_string(o.temperature) + " is negative or NaN");
  if (o.top_k < 0) bad("top_k " + std::to_string(o.top_k) + " is negative");
  if (!(o.top_p > 0.f && o.top_p <= 1.f)) bad("top_p " + std::to_string(o.top_p) + " is outside (0, 1]");
  if (!(o.min_p >= 0.f && o.min_p <= 1.f)) bad("min_p " + std::to_string(o.min_p) + " is outside [0, 1]");
  if (!(o.repetition_penalty > 0.f) || std::isinf(o.repetition_penalty))
    bad("repetition_penalty " + std::to_string(o.repetition_penalty) + " is not a positive finite number");
  if (o.repetition_window < 0) bad("repetition_window " + std::to_string(o.repetition_window) + " is negative");
  if (!std::isfinite(o.presence_penalty)) bad("presence_penalty " + std::to_string(o.presence_penalty) + " is not finite");
  if (!std::isfinite(o.frequency_penalty))
    bad("frequency_penalty " + std::to_string(o.frequency_penalty) + " is not finite");
}

void Sampler::accept(int token) {
  if (token < 0) bad("accept: token " + std::to_string(token) + " is negative");
  if (options_.repetition_window == 0) return;
  recent_.push_back(token);
  while (recent_.size() > static_cast<size_t>(options_.repetition_window)) recent_.pop_front();
}

void Sampler::reset() {
  recent_.clear();
  rng_.seed(options_.seed);
}

int Sampler::sample(std::span<const float> logits) {
  filter(logits);
  return greedy_ ? cands_[0].id : draw();
}

std::vector<Sampler::Choice> Sampler::distribution(std::span<const float> logits) {
  filter(logits);
  double total = 0;
  for (double p : probs_) total += p;
  std::vector<Choice> out;
  for (size_t i = 0; i < cands_.size(); ++i) out.push_back({cands_[i].id, probs_[i] / total});
  return out;
}

void Sampler::filter(std::span<const float> logits) {
  if (logits.empty()) bad("logits are empty");
  const size_t n = logits.size();
  cands_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == INFINITY) bad("logits[" + std::to_string(i) + "] is " + std::to_string(l));
    cands_[i] = {l, static_cast<int>(i)};
  }

  // Penalties, once per distinct recent token with its count (llama.cpp).
  const float pen = options_.repetition_penalty;
  const float freq = options_.frequency_penalty, presence = options_.presence_penalty;
  if ((pen != 1.f || freq != 0.f || presence != 0.f) && !recent_.empty()) {
    std::unordered_map<int, int> counts;
    for (int t : recent_)
      if (static_cast<size_t>(t) < n) ++counts[t];
    for (const auto& [t, c] : counts) {
      float& l = cands_[static_cast<size_t>(t)].logit;
      if (pen != 1.f) l = l > 0.f ? l / pen : l * pen;
      l -= static_cast<float>(c) * freq + presence;
      if (l == INFINITY) l = std::numeric_limits<float>::max();  // a large negative penalty: finite, the top
    }
  }

  auto order = [](const Candidate& a, const Candidate& b) { return before(a.logit, a.id, b.logit, b.id); };
  const Candidate best = *std::min_element(cands_.begin(), cands_.end(), order);
  greedy_ = options_.temperature <= 0.f || best.logit == -INFINITY;
  if (greedy_) {
    cands_.assign(1, best);
    probs_.assign(1, 1.0);
    return;
  }

  // Top-k; also sort when top-p needs the candidates in order.
  const int k = options_.top_k;
  if (k > 0 && static_cast<size_t>(k) < n) {
    std::partial_sort(cands_.begin(), cands_.begin() + k, cands_.end(), order);
    cands_.resize(static_cast<size_t>(k));
  } else if (options_.top_p < 1.f) {
    std::sort(cands_.begin(), cands_.end(), order);
  }

  // Softmax at temperature, shifted by the max logit so exp() cannot overflow.
  const double max_logit = best.logit;
  const double inv_t = 1.0 / options_.temperature;
  probs_.resize(cands_.size());
  double sum = 0;
  for (size_t i = 0; i < cands_.size(); ++i) sum += probs_[i] = std::exp((cands_[i].logit - max_logit) * inv_t);
  for (double& p : probs_) p /= sum;

  // Top-p: the shortest sorted prefix reaching top_p, at least one token.
  if (options_.top_p < 1.f) {
    double cum = 0;
    size_t keep = 0;
    while (keep < probs_.size()) {
      cum += probs_[keep++];
      if (cum >= options_.top_p) break;
    }
    cands_.resize(keep);
    probs_.resize(keep);
  }

  // Min-p: the max-logit token has probability 1 / sum and always survives.
  if (options_.min_p > 0.f) {
    const double threshold = options_.min_p * (1.0 / sum);
    size_t out = 0;
    for (size_t i = 0; i < probs_.size(); ++i) {
      if (probs_[i] < threshold) continue;
      cands_[out] = cands_[i];
      probs_[out++] = probs_[i];
    }
    cands_.resize(out);
    probs_.resize(out);
  }
}

int Sampler::draw() {
  double total = 0;
  for (double p : probs_) total += p;
  // 53 random bits -> u in [0, 1): identical on every standard library.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double cum = 0;
  for (size_t i = 0; i < probs_.size(); ++i) {
    cum += probs_[i];
    if (u < cum) return cands_[i].id;
  }
  return cands_.back().id;  // rounding left u at the very top
}

}  // namespace weft::model
