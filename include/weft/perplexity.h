// Perplexity of a model over tokens: exp of the mean negative
// log-likelihood of each scored token under the logits that predict it.
//
//   weft::model::PerplexityScore score;
//   for (...) score.add(logits_row, next_token);   // row i predicts token i + 1
//   std::printf("%.4f +/- %.4f\n", score.perplexity(), score.error());
//
// Log-probabilities are computed in double.
#pragma once

#include <cstdint>
#include <span>

namespace weft::model {

class PerplexityScore {
 public:
  // Scores target under logits (one row, n_vocab floats). Throws
  // Error(invalid_input) when target is outside the row.
  void add(std::span<const float> logits, int32_t target);

  int64_t count() const { return count_; }
  // exp(mean negative log-likelihood); 0 before anything is added.
  double perplexity() const;
  // First-order standard error of perplexity(): perplexity() times the
  // standard error of the mean negative log-likelihood (0 below 2 tokens).
  double error() const;

 private:
  double sum_ = 0;
  double sum_sq_ = 0;
  int64_t count_ = 0;
};

// -log softmax(logits)[target], in double.
double negative_log_likelihood(std::span<const float> logits, int32_t target);

}  // namespace weft::model
