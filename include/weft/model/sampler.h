// Token sampling over one row of logits (llama.cpp's sampler chain, fixed
// order). Pure CPU, no device; a Sampler is per sequence and not thread-safe.
//
//   weft::model::Sampler s({.temperature = 0.8f, .seed = 42});
//   std::vector<float> logits = m.eval(*backend, prompt, 0);
//   int next = s.sample({&logits[(prompt.size() - 1) * vocab], size_t(vocab)});
//   s.accept(next);                          // feeds the repetition penalty
//   logits = m.eval(*backend, {&next, 1}, prompt.size());
//
// sample() order: the penalties over the last repetition_window accepted
// tokens (llama.cpp's order: for each distinct token t seen c times there,
// its logit divided by repetition_penalty when positive, multiplied when
// not, then lowered by c * frequency_penalty + presence_penalty); then
// greedy when temperature <= 0; else top-k, softmax at temperature, top-p,
// min-p, renormalize, and one draw from a
// std::mt19937_64 seeded with seed. The same options, logits and accepted
// tokens give the same sequence on every platform (the draw uses only the
// engine's raw output, never a std:: distribution).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

namespace weft::model {

struct SamplerOptions {
  float temperature = 0.f;         // 0 (or less) = greedy; must not be negative
  int top_k = 40;                  // keep the k largest logits; 0 = off
  float top_p = 0.95f;             // smallest set with probability >= top_p; 1 = off; in (0, 1]
  float min_p = 0.05f;             // drop p < min_p * max p; 0 = off; in [0, 1]
  float repetition_penalty = 1.f;  // > 0; 1 = off
  int repetition_window = 64;      // accepted tokens the penalties look back over; >= 0
  float presence_penalty = 0.f;    // subtracted once from a token in the window; finite; 0 = off
  float frequency_penalty = 0.f;   // subtracted per occurrence in the window; finite; 0 = off
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws Error(invalid_input) naming the first impossible option.
  explicit Sampler(SamplerOptions options);

  // Picks a token id in [0, logits.size()). Throws Error(invalid_input) for
  // empty logits or a NaN / +inf logit. -inf logits are never picked unless
  // every logit is -inf (then the first one is). Does not call accept().
  int sample(std::span<const float> logits);

  // A token sample() may return and its probability.
  struct Choice {
    int id;
    double probability;
  };
  // What sample() would draw from for these logits, in the order it keeps
  // them: every token the penalties and filters leave, with probabilities
  // summing to 1 (greedy: the one token, probability 1). Throws as sample().
  // Draws nothing: the generator is not advanced.
  std::vector<Choice> distribution(std::span<const float> logits);

  // Records a token in the repetition window. Throws invalid_input when
  // token < 0. Ids beyond a later row's vocabulary are ignored there.
  void accept(int token);

  // Forgets the accepted tokens and reseeds the generator with options.seed.
  void reset();

  const SamplerOptions& options() const { return options_; }

 private:
  struct Candidate {
    float logit;
    int id;
  };
  // Penalties and filters into cands_ and probs_ (which need not sum to 1);
  // greedy (temperature <= 0, or every logit -inf): the one best token.
  void filter(std::span<const float> logits);
  int draw();  // one id from cands_ weighted by probs_

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::deque<int> recent_;        // last repetition_window accepted tokens, oldest first
  std::vector<Candidate> cands_;  // scratch, reused across calls
  std::vector<double> probs_;     // scratch, parallel to cands_
  bool greedy_ = false;           // filter() kept the best token alone, without a draw
};

}  // namespace weft::model
