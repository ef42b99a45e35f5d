// The byte-level BPE tokenizer against an independent reference: Llama 3 ids
// from llama3-tokenizer-js for varied text (tokenizer_data/llama3_bpe.txt,
// written by make_llama3.js with the vocabulary and merges trimmed to what
// those texts use), read through a GGUF file as llama.cpp writes it.
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

TEST(TokenizerLlama3, MatchesLlama3TokenizerJs) {
  const BpeRefData& d = llama3_ref();
  ASSERT_EQ(d.tokens.size(), 128256u);
  auto tok = load(d.writer("llama-bpe"), "llama3_ref");
  EXPECT_EQ(tok->bos(), 128000);
  expect_cases(*tok, d);
  for (const auto& [text, ids] : d.cases)
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text) << text;  // bos decodes to ""
}

TEST(TokenizerLlama3, ParsesSpecialTokensLikeTheReference) {
  const BpeRefData& d = llama3_ref();
  auto tok = load(d.writer("llama-bpe"), "llama3_special");
  expect_specials(*tok, d);
  for (const auto& [text, ids] : d.specials) {
    Ids with_bos = tok->encode(text, true, true);
    EXPECT_EQ(with_bos.front(), d.bos);
    EXPECT_EQ(Ids(with_bos.begin() + 1, with_bos.end()), ids) << text;
  }
}

TEST(TokenizerLlama3, EndOfGeneration) {
  const BpeRefData& d = llama3_ref();
  // A base-model file: eos <|end_of_text|>, no eot key; <|eot_id|> is found by name.
  auto tok = load(d.writer("llama-bpe"), "llama3_eog");
  EXPECT_EQ(tok->eos(), d.eos);
  EXPECT_EQ(tok->eot(), d.eot);
  EXPECT_TRUE(tok->is_end_of_generation(d.eos));
  EXPECT_TRUE(tok->is_end_of_generation(d.eot));
  EXPECT_TRUE(tok->is_end_of_generation(128008));  // <|eom_id|>
  EXPECT_FALSE(tok->is_end_of_generation(d.bos));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  EXPECT_FALSE(tok->is_end_of_generation(9906));

  // An instruct file: eos <|eot_id|>, eot named by its key.
  weft::GgufWriter w = d.writer("llama-bpe");
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(d.eot));
  w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(d.eot));
  tok = load(w, "llama3_eog_instruct");
  EXPECT_EQ(tok->eos(), d.eot);
  EXPECT_EQ(tok->eot(), d.eot);
  EXPECT_TRUE(tok->is_end_of_generation(d.eot));
  // <|end_of_text|> is neither eos nor eot here, and still ends generation
  // (llama.cpp's list; the instruct model's generation_config.json names it).
  EXPECT_TRUE(tok->is_end_of_generation(d.eos));
  EXPECT_TRUE(tok->is_end_of_generation(128008));
  EXPECT_FALSE(tok->is_end_of_generation(128006));  // <|start_header_id|>
}

}  // namespace
