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
#include <functional>
#include <span>
#include <vector>

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

// Perplexity over the first n_chunks chunks of ctx tokens (the convention of
// llama.cpp's perplexity tool, so figures compare): chunk c is tokens
// [c * ctx, (c + 1) * ctx) with its first token replaced by bos when
// bos >= 0, evaluated from position 0 by eval, which returns the logits of
// every position (ctx * n_vocab floats, token-major); rows ctx/2 .. ctx-2
// score tokens ctx/2 + 1 .. ctx-1, so each scored token sees at least ctx/2
// tokens before it. on_chunk (if set) runs after each chunk with the score so
// far. Throws Error(invalid_input) for ctx < 4, too few tokens, logits of the
// wrong size, or a logit that is not finite (naming the chunk and row).
using ChunkEval = std::function<std::vector<float>(std::span<const int32_t> chunk)>;
PerplexityScore chunked_perplexity(std::span<const int32_t> tokens, int64_t ctx, int64_t n_chunks, int32_t bos,
                                   int64_t n_vocab, const ChunkEval& eval,
                                   const std::function<void(int64_t chunk, const PerplexityScore&)>& on_chunk = {});

}  // namespace weft::model
