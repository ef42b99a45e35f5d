// PerplexityScore: running sums of negative log-likelihoods.
#include "weft/model/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "weft/core/error.h"

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

PerplexityScore chunked_perplexity(std::span<const int32_t> tokens, int64_t ctx, int64_t n_chunks, int32_t bos,
                                   int64_t n_vocab, const ChunkEval& eval,
                                   const std::function<void(int64_t, const PerplexityScore&)>& on_chunk) {
  constexpr const char* kWhere = "perplexity";
  if (ctx < 4 || n_chunks < 1 || n_vocab < 1)
    fail(ErrorKind::invalid_input, kWhere,
         "chunks of " + std::to_string(ctx) + " tokens (at least 4), " + std::to_string(n_chunks) +
             " chunks (at least 1), vocabulary of " + std::to_string(n_vocab));
  if (static_cast<uint64_t>(tokens.size()) / static_cast<uint64_t>(ctx) < static_cast<uint64_t>(n_chunks))
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(tokens.size()) + " tokens do not make " + std::to_string(n_chunks) + " chunks of " +
             std::to_string(ctx));
  const size_t n = static_cast<size_t>(ctx);
  const size_t vocab = static_cast<size_t>(n_vocab);
  PerplexityScore score;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(c) * n),
                               tokens.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(c + 1) * n));
    if (bos >= 0) chunk[0] = bos;
    const std::vector<float> logits = eval(chunk);
    if (logits.size() != n * vocab)
      fail(ErrorKind::invalid_input, kWhere,
           "chunk " + std::to_string(c) + ": " + std::to_string(logits.size()) + " logits, want " + std::to_string(n) +
               " x " + std::to_string(vocab));
    for (size_t i = n / 2; i + 1 < n; ++i) {  // row i predicts token i + 1
      const std::span<const float> row(&logits[i * vocab], vocab);
      for (float x : row)
        if (!std::isfinite(x))
          fail(ErrorKind::invalid_input, kWhere,
               "chunk " + std::to_string(c) + ", position " + std::to_string(i) + ": a logit is " + std::to_string(x));
      score.add(row, chunk[i + 1]);
    }
    if (on_chunk) on_chunk(c, score);
  }
  return score;
}

}  // namespace weft::model
