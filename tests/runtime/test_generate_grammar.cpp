// Constrained generation (GenerateOptions::grammar) over a fixed fake
// model: greedy picks the best token the grammar allows, and sampled
// tokens follow the softmax restricted to the allowed ones, as computed
// here in float64 — through run_generation and, for the same job, the
// BatchEngine (run_parallel_generation).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/grammar.h"
#include "weft/runtime/generate.h"

namespace {

// Four tokens: "a", "b", "c" and an end token (3); the logits never change.
const std::vector<float> kLogits = {1.f, 5.f, 3.f, 0.f};

weft::GenerationModel grammar_model() {
  return {.n_vocab = 4, .n_ctx = 64, .is_end_of_generation = [](int32_t t) { return t == 3; }};
}

void eval(std::span<const int32_t>, int64_t, std::vector<float>& logits) { logits = kLogits; }

weft::GenerateOptions constrained(const std::string& gbnf) {
  static const std::vector<std::string> bytes = {"a", "b", "c", ""};
  weft::GenerateOptions o;
  o.max_tokens = 8;
  o.grammar = weft::model::Grammar::parse(gbnf);
  o.token_trie = std::make_shared<const weft::model::TokenTrie>(bytes, std::vector<int32_t>{3});
  return o;
}

TEST(GenerateGrammar, GreedyTakesTheBestAllowedToken) {
  // "b" is the best token and never allowed; of "a" and "c", "c" is better.
  const weft::GenerateOptions o = constrained(R"(root ::= ("a" | "c") ("a" | "c"))");
  const std::vector<int32_t> prompt = {0};
  const weft::GenerateResult r = weft::run_generation(eval, grammar_model(), prompt, o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(r.stop, weft::StopReason::end_of_generation);  // the grammar ended it
  // Unconstrained, "b" every time up to max_tokens.
  weft::GenerateOptions plain;
  plain.max_tokens = 2;
  EXPECT_EQ(weft::run_generation(eval, grammar_model(), prompt, plain).tokens, (std::vector<int32_t>{1, 1}));
}

TEST(GenerateGrammar, SampledTokensFollowTheRestrictedSoftmax) {
  // One token from {a, c}, at temperature 1 with the filters off: P(a) =
  // e^1 / (e^1 + e^3) in float64.
  const double pa = std::exp(1.0) / (std::exp(1.0) + std::exp(3.0));
  std::map<int32_t, int> seen;
  const int n = 4000;
  for (int seed = 0; seed < n; ++seed) {
    weft::GenerateOptions o = constrained(R"(root ::= "a" | "c")");
    o.sampler = {.temperature = 1.f, .top_k = 0, .top_p = 1.f, .min_p = 0.f, .seed = static_cast<uint64_t>(seed)};
    const std::vector<int32_t> prompt = {0};
    const weft::GenerateResult r = weft::run_generation(eval, grammar_model(), prompt, o);
    ASSERT_EQ(r.tokens.size(), 1u);
    ++seen[r.tokens[0]];
  }
  EXPECT_EQ(seen[1] + seen[3], 0);
  // Binomial: 4 standard deviations of the count.
  const double sd = std::sqrt(n * pa * (1 - pa));
  EXPECT_NEAR(seen[0], n * pa, 4 * sd) << "a " << seen[0] << " c " << seen[2];
}

TEST(GenerateGrammar, TheBatchEngineConstrainsAsRunGenerationDoes) {
  weft::GenerateOptions o = constrained(R"(root ::= [ac]{3})");
  o.sampler = {.temperature = 1.f, .top_k = 0, .top_p = 1.f, .min_p = 0.f, .seed = 5};
  weft::BatchedEval be;
  be.slots = 1;
  std::vector<size_t> rows;
  be.submit = [&](int, std::span<const weft::model::BatchToken> batch, int64_t) {
    size_t n = 0;
    for (const auto& t : batch) n += t.logits;
    rows.push_back(n);
  };
  be.finish = [&](int, std::vector<float>& logits) {
    logits.clear();
    for (size_t i = 0; i < rows.front(); ++i) logits.insert(logits.end(), kLogits.begin(), kLogits.end());
    rows.erase(rows.begin());
  };
  const std::vector<std::vector<int32_t>> prompts = {{0}, {0, 0}};
  const auto results = weft::run_parallel_generation(be, grammar_model(), prompts, o);
  for (size_t s = 0; s < prompts.size(); ++s) {
    weft::GenerateOptions alone = o;
    alone.sampler.seed += s;  // run_parallel_generation's seed + s
    EXPECT_EQ(results[s].tokens, weft::run_generation(eval, grammar_model(), prompts[s], alone).tokens);
    EXPECT_EQ(results[s].tokens.size(), 3u);
    for (int32_t t : results[s].tokens) EXPECT_TRUE(t == 0 || t == 2);
    EXPECT_EQ(results[s].stop, weft::StopReason::end_of_generation);
  }
  // A grammar without the vocabulary's trie is refused before anything runs.
  weft::GenerateOptions bad = o;
  bad.token_trie = nullptr;
  EXPECT_THROW(weft::run_generation(eval, grammar_model(), prompts[0], bad), weft::Error);
}

}  // namespace
