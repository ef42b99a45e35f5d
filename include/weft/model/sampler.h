// Token sampling over one row of logits (llama.cpp's sampler chain, fixed
// order). Pure CPU, no device; a Sampler is per sequence and not thread-safe.
//
//   weft::model::Sampler s({.temperature = 0.8f, .seed = 42});
//   std::vector<float> logits = m.eval(*backend, prompt, 0);
//   int next = s.sample({&logits[(prompt.size() - 1) * vocab], size_t(vocab)});
//   s.accept(next);                          // feeds the repetition penalty
//   logits = m.eval(*backend, {&next, 1}, prompt.size());
//
// sample() order: repetition penalty over the last repetition_window accepted
// tokens; then greedy when temperature <= 0; else top-k, softmax at
// temperature, top-p, min-p, renormalize, and one draw from a
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
  int repetition_window = 64;      // accepted tokens the penalty looks back over; >= 0
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
  int draw();  // one id from cands_ weighted by probs_ (which need not sum to 1)

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::deque<int> recent_;        // last repetition_window accepted tokens, oldest first
  std::vector<Candidate> cands_;  // scratch, reused across calls
  std::vector<double> probs_;     // scratch, parallel to cands_
};

}  // namespace weft::model
