// PerplexityScore: running sums of negative log-likelihoods.
#include "weft/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "weft/error.h"

namespace weft::model {

double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  if (target < 0 || static_cast<size_t>(target) >= logits.size())
    fail(ErrorKind::invalid_input, "perplexity",
         "token " + std::to_string(target) + " is outside a row of " + std::to_string(logits.size()) + " logits");
  double max = -INFINITY;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return std::log(sum) + max - static_cast<double>(logits[static_cast<size_t>(target)]);
}

void PerplexityScore::add(std::span<const float> logits, int32_t target) {
  const double nll = negative_log_likelihood(logits, target);
  sum_ += nll;
  sum_sq_ += nll * nll;
  ++count_;
}

double PerplexityScore::perplexity() const {
  return count_ == 0 ? 0.0 : std::exp(sum_ / static_cast<double>(count_));
}

double PerplexityScore::error() const {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double mean = sum_ / n;
  const double variance = std::max(0.0, sum_sq_ / n - mean * mean) * n / (n - 1);
  return perplexity() * std::sqrt(variance / n);
}

}  // namespace weft::model
