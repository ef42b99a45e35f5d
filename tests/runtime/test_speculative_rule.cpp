// Speculative sampling's accept/reject rule and the loop over toy models
// whose logits are a fixed function of the tokens before them: the output
// distribution must be the target's, checked against the exact target
// distribution computed here in float64 from the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "weft/core/error.h"
#include "weft/runtime/speculative.h"

namespace {

using Choice = weft::model::Sampler::Choice;

// The rule's output distribution for a draft token drawn from q: a midpoint
// grid over u and v (n points each) for each drafted token, weighted by q.
std::vector<double> spec_rule_output(const std::vector<Choice>& p, const std::vector<Choice>& q, int n_vocab, int n) {
  std::vector<double> out(static_cast<size_t>(n_vocab), 0.0);
  for (const Choice& d : q)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const int32_t x = weft::speculative_pick(p, q, d.id, (i + 0.5) / n, (j + 0.5) / n);
        out[static_cast<size_t>(x)] += d.probability / (static_cast<double>(n) * n);
      }
  return out;
}

TEST(SpeculativeRule, OutputHasTheTargetsDistribution) {
  const std::vector<Choice> p{{0, 0.5}, {1, 0.3}, {2, 0.15}, {4, 0.05}};   // no mass on 3
  const std::vector<Choice> q{{1, 0.6}, {3, 0.25}, {0, 0.1}, {2, 0.05}};   // no mass on 4
  const std::vector<double> out = spec_rule_output(p, q, 5, 400);
  std::vector<double> want(5, 0.0);
  for (const Choice& c : p) want[static_cast<size_t>(c.id)] = c.probability;
  for (size_t x = 0; x < want.size(); ++x) EXPECT_NEAR(out[x], want[x], 0.006) << "token " << x;
}

TEST(SpeculativeRule, SameDistributionKeepsEveryDraft) {
  const std::vector<Choice> p{{7, 0.7}, {2, 0.3}};
  EXPECT_EQ(weft::speculative_pick(p, p, 2, 0.999999, 0.5), 2);
  EXPECT_EQ(weft::speculative_pick(p, p, 7, 0.999999, 0.0), 7);
}

TEST(SpeculativeRule, GreedyKeepsTheTargetsTokenOnly) {
  const std::vector<Choice> target{{5, 1.0}};
  EXPECT_EQ(weft::speculative_pick(target, std::vector<Choice>{{5, 1.0}}, 5, 0.0, 0.0), 5);
  EXPECT_EQ(weft::speculative_pick(target, std::vector<Choice>{{3, 1.0}}, 3, 0.0, 0.0), 5);
  EXPECT_EQ(weft::speculative_pick(target, std::vector<Choice>{{3, 1.0}}, 3, 0.5, 0.999), 5);
}

// A toy model over a vocabulary of 4: logits of a position from the tokens
// before it, and a cache of tokens by position, as a KV cache is written
// (a later eval at n_past overwrites from n_past on).
struct SpecToyModel {
  double mix;  // how the history moves the logits: target and draft differ
  std::vector<int32_t> cache;
  static constexpr int64_t kVocab = 4;
  std::vector<float> logits_after(size_t n) const {
    double h = 0;
    for (size_t i = 0; i < n; ++i) h += (cache[i] + 1) * mix * static_cast<double>(i + 1);
    std::vector<float> row(kVocab);
    for (int v = 0; v < kVocab; ++v) row[static_cast<size_t>(v)] = static_cast<float>(1.5 * std::sin(1.7 * v + h));
    return row;
  }
  void eval(std::span<const int32_t> tokens, int64_t n_past, bool all_rows, std::vector<float>& logits) {
    cache.resize(static_cast<size_t>(n_past));
    logits.clear();
    for (size_t i = 0; i < tokens.size(); ++i) {
      cache.push_back(tokens[i]);
      if (all_rows || i + 1 == tokens.size()) {
        const std::vector<float> row = logits_after(cache.size());
        logits.insert(logits.end(), row.begin(), row.end());
      }
    }
  }
};

// Softmax in float64 of the toy's logits (temperature 1, no filters).
std::vector<double> spec_toy_softmax(const std::vector<float>& row) {
  std::vector<double> p(row.size());
  double sum = 0;
  for (size_t i = 0; i < row.size(); ++i) sum += p[i] = std::exp(static_cast<double>(row[i]));
  for (double& x : p) x /= sum;
  return p;
}

TEST(SpeculativeLoop, SampledOutputFollowsTheTarget) {
  SpecToyModel target{0.9, {}}, draft{0.35, {}};
  const weft::GenerationModel gm{.n_vocab = SpecToyModel::kVocab, .n_ctx = 64};
  const weft::EvalRowsFn target_eval = [&](std::span<const int32_t> t, int64_t n_past, weft::model::LogitRows rows,
                                           std::vector<float>& logits) {
    target.eval(t, n_past, rows == weft::model::LogitRows::all, logits);
  };
  const std::vector<int32_t> prompt{1, 2};
  // The draft's cache rolled back right: whatever it holds before n_past
  // that has been accepted is the accepted history (the prompt, then the
  // tokens emitted so far).
  std::vector<int32_t> accepted_history;
  int64_t stale_rows = 0;
  const weft::EvalFn draft_eval = [&](std::span<const int32_t> t, int64_t n_past, std::vector<float>& logits) {
    draft.cache.resize(static_cast<size_t>(n_past));
    const size_t known = std::min(draft.cache.size(), accepted_history.size());
    for (size_t i = 0; i < known; ++i) stale_rows += draft.cache[i] != accepted_history[i];
    draft.eval(t, n_past, false, logits);
  };
  // The first three tokens of a generation of five (draft_max 2): the
  // second comes from a round's verification, the third after a kept or
  // rejected draft; the rounds after run with the draft cache rolled back.
  weft::GenerateOptions o{.max_tokens = 5};
  o.sampler = {.temperature = 1.f, .top_k = 0, .top_p = 1.f, .min_p = 0.f};
  const int runs = 20000;
  std::map<std::vector<int32_t>, int> seen;
  int64_t drafted = 0, accepted = 0;
  for (int s = 0; s < runs; ++s) {
    o.sampler.seed = static_cast<uint64_t>(s);
    accepted_history = prompt;
    const weft::SpeculativeResult r =
        weft::run_speculative_generation(target_eval, gm, draft_eval, gm, prompt, o, {.draft_max = 2}, [&](int32_t t) {
          accepted_history.push_back(t);
          return true;
        });
    ASSERT_EQ(r.generation.tokens.size(), 5u);
    ++seen[std::vector<int32_t>(r.generation.tokens.begin(), r.generation.tokens.begin() + 3)];
    drafted += r.counts.drafted;
    accepted += r.counts.accepted;
  }
  EXPECT_EQ(stale_rows, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);  // the toy draft disagrees often: the rule's rejections are exercised
  // The exact distribution of the three tokens under the target alone.
  SpecToyModel ref{0.9, prompt};
  double worst = 0;
  for (int32_t a = 0; a < 4; ++a)
    for (int32_t b = 0; b < 4; ++b)
      for (int32_t c = 0; c < 4; ++c) {
        ref.cache = {1, 2};
        const double pa = spec_toy_softmax(ref.logits_after(2))[static_cast<size_t>(a)];
        ref.cache.push_back(a);
        const double pb = spec_toy_softmax(ref.logits_after(3))[static_cast<size_t>(b)];
        ref.cache.push_back(b);
        const double pc = spec_toy_softmax(ref.logits_after(4))[static_cast<size_t>(c)];
        const double want = pa * pb * pc;
        const double got = seen[{a, b, c}] / static_cast<double>(runs);
        worst = std::max(worst, std::abs(got - want));
        EXPECT_NEAR(got, want, 4.5 * std::sqrt(want * (1 - want) / runs) + 1e-3) << a << " " << b << " " << c;
      }
  std::printf("worst |frequency - probability| over 64 outcomes: %.4f\n", worst);
}

TEST(SpeculativeLoop, RefusesBadArguments) {
  SpecToyModel m{0.5, {}};
  const weft::EvalRowsFn te = [&](std::span<const int32_t> t, int64_t n, weft::model::LogitRows rows,
                                  std::vector<float>& l) { m.eval(t, n, rows == weft::model::LogitRows::all, l); };
  const weft::EvalFn de = [&](std::span<const int32_t> t, int64_t n, std::vector<float>& l) { m.eval(t, n, false, l); };
  const weft::GenerationModel gm{.n_vocab = 4, .n_ctx = 16};
  const std::vector<int32_t> prompt{1};
  auto message = [&](const weft::GenerationModel& dm, const weft::SpeculativeOptions& so) {
    try {
      weft::run_speculative_generation(te, gm, de, dm, prompt, {.max_tokens = 4}, so);
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(gm, {.draft_max = 0}).find("draft_max 0"), std::string::npos);
  EXPECT_NE(message({.n_vocab = 5, .n_ctx = 16}, {}).find("5 logits per token, the target 4"), std::string::npos);
}

}  // namespace
