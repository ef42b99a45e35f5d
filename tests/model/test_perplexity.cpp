// PerplexityScore against values computed here by hand, in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "weft/error.h"
#include "weft/perplexity.h"

namespace {

using weft::model::PerplexityScore;

TEST(Perplexity, UniformLogitsGiveTheVocabularySize) {
  PerplexityScore s;
  const std::vector<float> row(1000, 3.25f);
  for (int32_t t : {0, 17, 999}) s.add(row, t);
  EXPECT_NEAR(s.perplexity(), 1000.0, 1e-9);
  EXPECT_EQ(s.error(), 0.0);  // every token equally likely: no spread
  EXPECT_EQ(s.count(), 3);
}

TEST(Perplexity, MatchesAnIndependentComputation) {
  std::mt19937 rng(5);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  std::uniform_int_distribution<int32_t> token(0, 99);
  PerplexityScore s;
  std::vector<long double> nll;
  for (int r = 0; r < 50; ++r) {
    std::vector<float> row(100);
    for (float& x : row) x = logit(rng) + 80.0f;  // large offsets: exp() would overflow float without the max shift
    const int32_t t = token(rng);
    s.add(row, t);
    long double z = 0;
    for (float x : row) z += std::exp(static_cast<long double>(x) - 80.0L);
    nll.push_back(std::log(z) - (static_cast<long double>(row[static_cast<size_t>(t)]) - 80.0L));
  }
  long double mean = 0;
  for (long double v : nll) mean += v;
  mean /= nll.size();
  long double var = 0;
  for (long double v : nll) var += (v - mean) * (v - mean);
  var /= nll.size() - 1;
  const double ppl = static_cast<double>(std::exp(mean));
  EXPECT_NEAR(s.perplexity(), ppl, 1e-9 * ppl);
  EXPECT_NEAR(s.error(), ppl * std::sqrt(static_cast<double>(var / nll.size())), 1e-6 * ppl);
}

TEST(Perplexity, TargetOutsideTheRowIsAnError) {
  PerplexityScore s;
  const std::vector<float> row(10, 0.0f);
  EXPECT_THROW(s.add(row, 10), weft::Error);
  EXPECT_THROW(s.add(row, -1), weft::Error);
  EXPECT_EQ(s.count(), 0);
  EXPECT_EQ(s.perplexity(), 0.0);
}

}  // namespace
