// The SentencePiece-style tokenizer against SentencePiece itself: a BPE model
// trained by SentencePiece's own trainer (its 1,000 pieces with their real
// scores, Llama 2's settings: byte fallback, digits split, identity
// normalisation, a dummy prefix) and the ids its own encoder gives texts with
// runs of spaces, digits, several scripts, characters left out of the
// vocabulary (byte fallback), control tokens written as text, control
// characters and runs of a doubled piece (equal scores side by side: only
// leftmost first agrees) (tokenizer_data/spm_trained.txt, written by
// make_spm_trained.py with Debian's python3-sentencepiece). No part of this
// reference re-implements weft's merging: the other SentencePiece fixtures
// take their scores from merge ranks, these come from a trained model.
#include <gtest/gtest.h>

#include <set>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

const SpmRefData& spm_trained_ref() {
  static const SpmRefData d("spm_trained.txt");
  return d;
}

// The fixture is what the test relies on: the whole vocabulary (no
// placeholders), the 256 byte pieces, and scores that order every merged
// piece (no two alike, so no result depends on a tie).
TEST(TokenizerSpmTrained, FixtureHoldsAWholeTrainedVocabulary) {
  const SpmRefData& d = spm_trained_ref();
  ASSERT_EQ(d.tokens.size(), 1000u);
  ASSERT_GE(d.cases.size(), 40u);
  std::set<float> normal_scores;
  size_t normal = 0;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    EXPECT_EQ(d.tokens[i].rfind("\x01unreachable", 0), std::string::npos) << i;
    if (i >= 3 && i < 259) {
      EXPECT_EQ(d.types[i], 6) << i;
    }
    if (d.types[i] == 1) {
      ++normal;
      normal_scores.insert(d.scores[i]);
    }
  }
  EXPECT_EQ(normal, 1000u - 259u);
  EXPECT_EQ(normal_scores.size(), normal) << "two normal pieces share a score";
  EXPECT_EQ(d.unk, 0);
  EXPECT_EQ(d.bos, 1);
  EXPECT_EQ(d.eos, 2);
}

TEST(TokenizerSpmTrained, EncodesAsSentencePieceDoes) {
  const SpmRefData& d = spm_trained_ref();
  auto tok = load(d.writer(), "spm_trained");
  EXPECT_EQ(tok->vocab_size(), d.tokens.size());
  size_t byte_fallbacks = 0;
  for (const SpmRefData::Case& c : d.cases) {
    const Ids ids = tok->encode(c.text, false);
    EXPECT_EQ(ids, c.ids) << c.text;
    EXPECT_EQ(tok->decode(c.ids), c.decoded) << c.text;
    for (int32_t id : c.ids) byte_fallbacks += id >= 3 && id < 259;
  }
  // The cases reach the byte fallback (characters outside the vocabulary).
  EXPECT_GT(byte_fallbacks, 50u);
}

// With add_bos the ids are SentencePiece's behind <s>.
TEST(TokenizerSpmTrained, AddBosPutsTheBosFirst) {
  const SpmRefData& d = spm_trained_ref();
  auto tok = load(d.writer(), "spm_trained_bos");
  for (const SpmRefData::Case& c : d.cases) {
    Ids want = {d.bos};
    want.insert(want.end(), c.ids.begin(), c.ids.end());
    EXPECT_EQ(tok->encode(c.text, true), want) << c.text;
  }
}

}  // namespace
