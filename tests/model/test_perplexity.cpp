// PerplexityScore against values computed here by hand, in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/perplexity.h"

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

// A model that predicts "the token after t is t + 1 (mod V)" with logit 10
// (others 0), except in the first half of each chunk, where it predicts
// wrongly. Over tokens 0, 1, 2, ... every correctly scored token has the
// same small negative log-likelihood; scoring a row against the wrong
// target, or a row of the first half, would raise the perplexity.
struct CountingModel {
  static constexpr int64_t kVocab = 7;
  int64_t ctx;
  std::vector<std::vector<int32_t>> chunks_seen;

  std::vector<float> operator()(std::span<const int32_t> chunk) {
    chunks_seen.emplace_back(chunk.begin(), chunk.end());
    std::vector<float> logits(chunk.size() * kVocab, 0.0f);
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t next = (chunk[i] + 1) % kVocab;
      const int64_t predicted = static_cast<int64_t>(i) < ctx / 2 ? (next + 3) % kVocab : next;
      logits[i * kVocab + static_cast<size_t>(predicted)] = 10.0f;
    }
    return logits;
  }
};

TEST(Perplexity, ChunksScoreTheSecondHalfAgainstTheNextToken) {
  const int64_t ctx = 10, n_chunks = 3;
  std::vector<int32_t> tokens(35);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % CountingModel::kVocab);
  CountingModel model{ctx, {}};
  std::vector<double> after_chunk;
  const PerplexityScore s = weft::model::chunked_perplexity(
      tokens, ctx, n_chunks, /*bos=*/6, CountingModel::kVocab, [&](std::span<const int32_t> c) { return model(c); },
      [&](int64_t c, const PerplexityScore& so_far) {
        EXPECT_EQ(c, static_cast<int64_t>(after_chunk.size()));
        after_chunk.push_back(so_far.perplexity());
      });

  // Chunks are consecutive runs of ctx tokens with bos first.
  ASSERT_EQ(model.chunks_seen.size(), 3u);
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> want(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    want[0] = 6;
    EXPECT_EQ(model.chunks_seen[static_cast<size_t>(c)], want) << c;
  }
  // Rows 5..8 of each chunk score tokens 6..9: 4 per chunk, all predicted.
  EXPECT_EQ(s.count(), n_chunks * 4);
  const double nll = std::log(std::exp(10.0) + (CountingModel::kVocab - 1)) - 10.0;
  EXPECT_NEAR(s.perplexity(), std::exp(nll), 1e-12);
  EXPECT_NEAR(s.error(), 0.0, 1e-9);
  EXPECT_EQ(after_chunk.size(), 3u);
}

TEST(Perplexity, ChunksWithoutBosKeepTheirFirstToken) {
  std::vector<int32_t> tokens{3, 4, 5, 6, 0, 1, 2, 3};
  CountingModel model{4, {}};
  weft::model::chunked_perplexity(tokens, 4, 2, /*bos=*/-1, CountingModel::kVocab,
                                  [&](std::span<const int32_t> c) { return model(c); });
  ASSERT_EQ(model.chunks_seen.size(), 2u);
  EXPECT_EQ(model.chunks_seen[0], (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(model.chunks_seen[1], (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(Perplexity, ChunkErrorsNameWhatWasWrong) {
  const std::vector<int32_t> tokens(20, 1);
  auto expect_error = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; wanted " << needle;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto ok = [](std::span<const int32_t> c) { return std::vector<float>(c.size() * 5, 0.0f); };
  expect_error([&] { weft::model::chunked_perplexity(tokens, 8, 3, -1, 5, ok); },
               "20 tokens do not make 3 chunks of 8");
  expect_error([&] { weft::model::chunked_perplexity(tokens, 3, 1, -1, 5, ok); }, "at least 4");
  auto short_eval = [](std::span<const int32_t> c) { return std::vector<float>(c.size() * 4, 0.0f); };
  expect_error([&] { weft::model::chunked_perplexity(tokens, 8, 1, -1, 5, short_eval); }, "32 logits, want 8 x 5");
  auto nan_eval = [](std::span<const int32_t> c) {
    std::vector<float> l(c.size() * 5, 0.0f);
    l[6 * 5 + 2] = NAN;
    return l;
  };
  expect_error([&] { weft::model::chunked_perplexity(tokens, 8, 2, -1, 5, nan_eval); }, "chunk 0, position 6");
}

}  // namespace
