// The SentencePiece-style tokenizer with Phi-3's vocabulary (Llama 2's 32000
// pieces plus Phi-3's added tokens, padded to 32064) against transformers.js
// (tokenizer_data/phi3_spm.txt, written by make_phi3.js), read through a GGUF
// file laid out as llama.cpp's Phi-3 converter writes it. Phi-3's chat tokens
// drop the whitespace after them (rstrip), which a GGUF file does not record:
// weft applies it to Phi-3 files as llama.cpp does (by general.name) and by
// architecture, and to no other file.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

constexpr int32_t kPhi3Unk = 0, kPhi3Bos = 1, kPhi3EosText = 2, kPhi3EndOfText = 32000, kPhi3Assistant = 32001,
                  kPhi3End = 32007, kPhi3User = 32010;

// The reference's file: Phi-3 by its name, as the converter wrote it before
// names came from the model card.
weft::GgufWriter phi3_writer(const SpmRefData& d, const char* name = "Phi3", const char* arch = "phi3") {
  weft::GgufWriter w = d.writer();
  if (*name) w.set_string("general.name", name);
  if (*arch) w.set_string("general.architecture", arch);
  return w;
}

TEST(TokenizerPhi3, MatchesTransformersJs) {
  const SpmRefData& d = phi3_ref();
  ASSERT_EQ(d.tokens.size(), 32064u);
  ASSERT_TRUE(d.add_space_prefix);
  auto tok = load(phi3_writer(d), "phi3_ref");
  EXPECT_EQ(tok->warning(), "");
  expect_spm_reference(*tok, d);
}

// rstrip by the name llama.cpp checks, or by architecture with a `llama`
// vocabulary; not for other files.
TEST(TokenizerPhi3, WhitespaceAfterChatTokensByNameOrArchitecture) {
  const SpmRefData& d = phi3_ref();
  ASSERT_EQ(d.rstrip.size(), 11u);
  const std::string chat = "<|user|>\nHello<|end|>\n<|assistant|>\n";
  const Ids stripped = {kPhi3User, d.id("\xE2\x96\x81Hello"), kPhi3End, kPhi3Assistant};
  using Names = std::vector<std::pair<const char*, const char*>>;  // general.name, general.architecture
  const Names phi3 = {{"Phi3", ""},
                      {"Phi-3-mini-4k-instruct", "llama"},
                      {"phi3 medium", ""},
                      {"Phi 3 Mini 4k Instruct", "phi3"},
                      {"", "phi3"}};
  const Names others = {{"", ""}, {"Llama 2 7B", "llama"}, {"Phi 3 Mini 4k Instruct", "llama"}, {"phi-2", "phi2"}};
  for (auto [name, arch] : phi3) {
    auto tok = load(phi3_writer(d, name, arch), "phi3_strip");
    EXPECT_EQ(tok->encode(chat, false, true), stripped) << name << " / " << arch;
    // <s>, <unk> and <|endoftext|> keep the whitespace after them.
    EXPECT_EQ(tok->encode("<s> x<|endoftext|> y", false, true),
              (Ids{kPhi3Bos, d.id("\xE2\x96\x81"), d.id("\xE2\x96\x81x"), kPhi3EndOfText, d.id("\xE2\x96\x81"),
                   d.id("\xE2\x96\x81y")}))
        << name << " / " << arch;
  }
  for (auto [name, arch] : others) {
    auto tok = load(phi3_writer(d, name, arch), "phi3_keep");
    const Ids ids = tok->encode(chat, false, true);
    EXPECT_NE(ids, stripped) << name << " / " << arch;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), d.id("<0x0A>")), 3) << name << " / " << arch;  // each "\n" kept
  }
}

// </s> is user-defined in Phi-3 files: split out of any text, then its
// whitespace dropped; control tokens only when parsed.
TEST(TokenizerPhi3, SpecialTokensInPlainText) {
  const SpmRefData& d = phi3_ref();
  auto tok = load(phi3_writer(d), "phi3_plain");
  EXPECT_EQ(d.types[kPhi3EosText], 4);
  EXPECT_EQ(d.types[kPhi3Unk], 3);
  const Ids plain = tok->encode("<|user|>hi<|end|><s></s>  x", false);
  for (int32_t id : plain) EXPECT_NE(d.types[id], 3) << id;
  EXPECT_EQ(plain.back(), d.id("\xE2\x96\x81x"));
  EXPECT_EQ(plain[plain.size() - 2], kPhi3EosText);
  EXPECT_EQ(tok->decode(plain), "<|user|>hi<|end|><s></s> x");
  EXPECT_EQ(tok->decode_token(kPhi3EosText), "</s>");
  EXPECT_EQ(tok->decode_token(kPhi3End), "");
}

TEST(TokenizerPhi3, EndOfGeneration) {
  const SpmRefData& d = phi3_ref();
  auto check = [&](const Tokenizer& tok, const char* what) {
    EXPECT_EQ(tok.eos(), kPhi3EndOfText) << what;
    EXPECT_EQ(tok.eot(), kPhi3End) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kPhi3End)) << what;
    EXPECT_TRUE(tok.is_end_of_generation(kPhi3EndOfText)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kPhi3User)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kPhi3Assistant)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(kPhi3Bos)) << what;
    EXPECT_FALSE(tok.is_end_of_generation(d.id("\xE2\x96\x81Hello"))) << what;
    EXPECT_EQ(tok.bos(), kPhi3Bos) << what;
  };
  weft::GgufWriter w = phi3_writer(d);
  check(*load(w, "phi3_eog"), "by name");
  w.set_u32("tokenizer.ggml.eot_token_id", kPhi3End);
  check(*load(w, "phi3_eog_key"), "by key");
}

}  // namespace
