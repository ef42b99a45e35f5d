// Sampler against its contract (include/weft/model/sampler.h): greedy ties,
// reproducibility by seed, each filter on its own, the repetition penalty,
// the empirical distribution against a float64 softmax, and option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/sampler.h"

namespace {

using weft::model::Sampler;
using weft::model::SamplerOptions;

// Every filter off: a plain draw from softmax(logits / temperature).
SamplerOptions plain(float temperature, uint64_t seed = 0) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = 0;
  o.top_p = 1.f;
  o.min_p = 0.f;
  o.seed = seed;
  return o;
}

std::vector<int> run(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
  return out;
}

std::vector<float> flat(int n) {
  std::vector<float> l(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) l[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 7);
  return l;
}

void expect_invalid(const SamplerOptions& o, const std::string& name) {
  try {
    Sampler s(o);
    FAIL() << "no error for " << name;
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Sampler, GreedyPicksFirstMax) {
  Sampler s(SamplerOptions{});  // temperature 0 by default
  EXPECT_EQ(s.sample(std::vector<float>{1.f, 3.f, -2.f, 3.f, 0.f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{5.f}), 0);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(s.sample(std::vector<float>{ninf, -1e30f, ninf}), 1);
}

TEST(Sampler, SameSeedReproducesDifferentSeedsDiffer) {
  const std::vector<float> logits = flat(100);
  Sampler a(plain(1.f, 7)), b(plain(1.f, 7)), c(plain(1.f, 8));
  const std::vector<int> sa = run(a, logits, 50);
  EXPECT_EQ(sa, run(b, logits, 50));
  EXPECT_NE(sa, run(c, logits, 50));
  a.reset();  // reseeds
  EXPECT_EQ(sa, run(a, logits, 50));
  // The default chain (top-k 40, top-p, min-p) is seeded the same way.
  SamplerOptions d;
  d.temperature = 0.9f;
  d.seed = 3;
  Sampler x(d), y(d);
  EXPECT_EQ(run(x, logits, 50), run(y, logits, 50));
}

TEST(Sampler, TopK1IsGreedyAtAnyTemperature) {
  const std::vector<float> logits = {0.5f, 2.f, 1.9f, 2.f, -1.f, 1.99f};
  for (float t : {0.1f, 1.f, 10.f, 1000.f}) {
    SamplerOptions o = plain(t, 11);
    o.top_k = 1;
    Sampler s(o);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(s.sample(logits), 1) << "temperature " << t;
  }
}

TEST(Sampler, TinyTopPKeepsOnlyTopToken) {
  const std::vector<float> logits = {0.f, 0.1f, 0.2f, 0.15f, 0.05f};
  SamplerOptions o = plain(1.f, 5);
  o.top_p = 1e-6f;
  Sampler s(o);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(s.sample(logits), 2);
}

TEST(Sampler, MinPRemovesLowTokens) {
  // p(i) / p(max) = exp(l_i - l_max): tokens 2 and 3 fall below 0.1, 0 and 1 do not.
  const std::vector<float> logits = {0.f, -1.f, -3.f, -5.f};
  SamplerOptions o = plain(1.f, 9);
  o.min_p = 0.1f;
  Sampler s(o);
  int seen[4] = {};
  for (int i = 0; i < 10000; ++i) ++seen[s.sample(logits)];
  EXPECT_EQ(seen[2], 0);
  EXPECT_EQ(seen[3], 0);
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
}

TEST(Sampler, RepetitionPenaltyDemotesRepeatedToken) {
  SamplerOptions o;
  o.repetition_penalty = 1.5f;
  o.repetition_window = 3;
  Sampler s(o);
  const std::vector<float> pos = {2.f, 1.9f, 0.f};     // 2 / 1.5 < 1.9
  const std::vector<float> neg = {-1.f, -1.2f, -9.f};  // -1 * 1.5 < -1.2
  EXPECT_EQ(s.sample(pos), 0);
  s.accept(0);
  s.accept(0);  // counted once, as in llama.cpp: still 2 / 1.5, not 2 / 2.25
  EXPECT_EQ(s.sample(pos), 1);
  EXPECT_EQ(s.sample(neg), 1);
  EXPECT_EQ(s.sample(std::vector<float>{2.f, 1.2f, 0.f}), 0);  // 1.33 > 1.2
  for (int t : {2, 2, 2}) s.accept(t);                         // token 0 leaves the window
  EXPECT_EQ(s.sample(pos), 0);
  s.accept(0);
  s.reset();
  EXPECT_EQ(s.sample(pos), 0);
  s.accept(1000);  // beyond this row's vocabulary: ignored
  EXPECT_EQ(s.sample(pos), 0);
}

TEST(Sampler, FrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.f, 2.f, 0.5f, -1.f, 1.5f, 0.f};
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - 2.0);
  Sampler s(plain(1.f, 12345));
  std::vector<int> count(logits.size());
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(s.sample(logits))];
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(static_cast<double>(count[i]) / n, p[i] / sum, 0.02) << "token " << i;
}

// The filtered distribution worked out independently in float64: penalties
// by count, then (temperature > 0) the k largest logits (ties: lower id),
// softmax at temperature, the shortest prefix reaching top_p, and the tokens
// with p >= min_p * p_max, renormalized.
std::map<int, double> reference(const std::vector<float>& logits, const SamplerOptions& o,
                                const std::vector<int>& recent) {
  std::vector<double> l(logits.begin(), logits.end());
  std::map<int, int> count;
  for (int t : recent) ++count[t];
  for (const auto& [t, c] : count) {
    double& v = l[static_cast<size_t>(t)];
    if (o.repetition_penalty != 1.f) v = v > 0 ? v / o.repetition_penalty : v * o.repetition_penalty;
    v -= c * static_cast<double>(o.frequency_penalty) + static_cast<double>(o.presence_penalty);
  }
  std::vector<int> ids(l.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)]; });
  if (o.temperature <= 0) return {{ids[0], 1.0}};
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < ids.size()) ids.resize(static_cast<size_t>(o.top_k));
  std::vector<double> p;
  double sum = 0;
  for (int id : ids) sum += p.emplace_back(std::exp(l[static_cast<size_t>(id)] / o.temperature));
  for (double& x : p) x /= sum;
  size_t keep = ids.size();
  double cum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cum += p[i];
    if (cum >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  std::map<int, double> out;
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    if (p[i] >= o.min_p * p[0]) total += out[ids[i]] = p[i];
  for (auto& [id, q] : out) q /= total;
  return out;
}

TEST(Sampler, DistributionMatchesFloat64Reference) {
  // Logits whose filter thresholds are far from every cut (no ties at a cut).
  const std::vector<float> logits = {1.3f, -0.4f, 2.9f, 0.7f, 2.2f, -3.f, 0.1f, 1.9f, -1.1f, 3.4f, 0.45f, -0.2f};
  struct Case {
    const char* name;
    SamplerOptions o;
    std::vector<int> recent;
  };
  auto with = [](float t, int k, float p, float m) {
    SamplerOptions o = plain(t, 77);
    o.top_k = k;
    o.top_p = p;
    o.min_p = m;
    return o;
  };
  std::vector<Case> cases = {
      {"plain t=1", with(1.f, 0, 1.f, 0.f), {}},
      {"t=0.7", with(0.7f, 0, 1.f, 0.f), {}},
      {"top-k 5", with(1.f, 5, 1.f, 0.f), {}},
      {"top-p 0.8", with(1.f, 0, 0.8f, 0.f), {}},
      {"min-p 0.2", with(1.f, 0, 1.f, 0.2f), {}},
      {"k 8, p 0.9, min-p 0.05, t 1.3", with(1.3f, 8, 0.9f, 0.05f), {}},
      {"greedy", with(0.f, 0, 1.f, 0.f), {}},
  };
  SamplerOptions pen = with(1.f, 6, 0.95f, 0.02f);
  pen.repetition_penalty = 1.3f;
  pen.presence_penalty = 0.4f;
  pen.frequency_penalty = 0.25f;
  pen.repetition_window = 5;
  // The window keeps the last 5: 9 twice, 2, 8 (negative logit) and 4.
  cases.push_back({"penalties", pen, {0, 9, 2, 9, 8, 4}});
  SamplerOptions greedy_pen = pen;
  greedy_pen.temperature = 0;
  greedy_pen.presence_penalty = 1.5f;  // 9: 3.4 / 1.3 - 0.5 - 1.5 = 0.615; 2 and 4 fall too: 7 (1.9) wins
  cases.push_back({"greedy with penalties", greedy_pen, {9, 9, 2, 4}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Sampler s(c.o);
    for (int t : c.recent) s.accept(t);
    const std::vector<int> window(c.recent.end() - std::min<std::ptrdiff_t>(c.o.repetition_window, c.recent.size()),
                                  c.recent.end());
    const std::map<int, double> want = reference(logits, c.o, window);
    const std::vector<Sampler::Choice> got = s.distribution(logits);
    ASSERT_EQ(got.size(), want.size());
    for (const Sampler::Choice& ch : got) {
      ASSERT_TRUE(want.count(ch.id)) << "token " << ch.id << " is not in the reference's set";
      EXPECT_NEAR(ch.probability, want.at(ch.id), 1e-6) << "token " << ch.id;
    }
    // And sample() draws from it: frequencies within 0.02, nothing outside.
    std::map<int, int> seen;
    const int n = c.o.temperature > 0 ? 20000 : 50;
    for (int i = 0; i < n; ++i) ++seen[s.sample(logits)];
    for (const auto& [id, k] : seen) {
      ASSERT_TRUE(want.count(id)) << "sample() drew token " << id;
      EXPECT_NEAR(static_cast<double>(k) / n, want.at(id), 0.02) << "token " << id;
    }
  }
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtractByCount) {
  SamplerOptions o;  // greedy: the largest penalized logit wins
  o.presence_penalty = 0.5f;
  o.frequency_penalty = 0.3f;
  o.repetition_window = 4;
  Sampler s(o);
  // Token 0 seen twice: 3.0 - 0.5 - 2 * 0.3 = 1.9 < 2.0 (token 1).
  for (int t : {0, 0}) s.accept(t);
  EXPECT_EQ(s.sample(std::vector<float>{3.f, 2.f, 0.f}), 1);
  // Once (the window of 4 drops the older ones): 3.0 - 0.5 - 0.3 = 2.2 > 2.0.
  for (int t : {2, 2, 2, 0}) s.accept(t);
  EXPECT_EQ(s.sample(std::vector<float>{3.f, 2.f, 0.f}), 0);
  // A negative penalty promotes: token 2 (seen twice in the window) gains 0.6.
  o.presence_penalty = 0.f;
  o.frequency_penalty = -0.3f;
  Sampler neg(o);
  for (int t : {2, 2}) neg.accept(t);
  EXPECT_EQ(neg.sample(std::vector<float>{0.f, 0.5f, 0.f}), 2);
}

TEST(Sampler, BadOptionsAndLogits) {
  SamplerOptions o;
  o.temperature = -0.5f;
  expect_invalid(o, "temperature");
  o = {};
  o.temperature = std::nanf("");
  expect_invalid(o, "temperature");
  for (float p : {0.f, -0.1f, 1.5f, std::nanf("")}) {
    o = {};
    o.top_p = p;
    expect_invalid(o, "top_p");
  }
  o = {};
  o.top_k = -1;
  expect_invalid(o, "top_k");
  o = {};
  o.min_p = 2.f;
  expect_invalid(o, "min_p");
  o = {};
  o.repetition_penalty = 0.f;
  expect_invalid(o, "repetition_penalty");
  o = {};
  o.repetition_window = -1;
  expect_invalid(o, "repetition_window");
  o = {};
  o.presence_penalty = std::numeric_limits<float>::infinity();
  expect_invalid(o, "presence_penalty");
  o = {};
  o.frequency_penalty = std::nanf("");
  expect_invalid(o, "frequency_penalty");

  Sampler s(plain(1.f));
  EXPECT_THROW(s.sample(std::vector<float>{}), weft::Error);
  EXPECT_THROW(s.sample(std::vector<float>{0.f, std::nanf(""), 1.f}), weft::Error);
  EXPECT_THROW(s.accept(-1), weft::Error);
  try {
    s.sample(std::vector<float>{0.f, std::nanf("")});
    FAIL() << "no error for a NaN logit";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("logits[1]"), std::string::npos) << e.what();
  }
}

}  // namespace
