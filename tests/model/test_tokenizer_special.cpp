// Special tokens inside text (encode's parse_special) and the end-of-generation
// ids, for both tokenizer kinds, on the small vocabularies of
// test_tokenizer_util.h. (Llama 3's own special tokens are checked against
// the reference in test_tokenizer_llama3.cpp.)
#include <gtest/gtest.h>

#include <algorithm>

#include "test_tokenizer_util.h"
#include "weft/core/error.h"

namespace {

using namespace tokenizer_test;

bool has_any(const Ids& ids, std::initializer_list<int32_t> these) {
  return std::any_of(ids.begin(), ids.end(),
                     [&](int32_t id) { return std::find(these.begin(), these.end(), id) != these.end(); });
}

TEST(TokenizerSpecial, SpmRecognisesControlTokensOnlyWhenAsked) {
  SpmVocab v;
  v.add("<tool>", 0, 4);  // user-defined
  auto tok = load(v.writer(), "special_spm");
  const int32_t hello = v.id(kS + "Hello"), world = v.id(kS + "world"), tool = v.id("<tool>");
  // Each text part gets the space prefix, as after a fresh start (llama.cpp).
  EXPECT_EQ(tok->encode("<s>Hello world</s>", false, true), (Ids{1, hello, world, 2}));
  EXPECT_EQ(tok->encode("Hello</s>world", true, true), (Ids{1, hello, 2, world}));
  EXPECT_EQ(tok->encode("<tool><unk></s>", false, true), (Ids{tool, 0, 2}));
  EXPECT_EQ(tok->encode("</s", false, true), tok->encode("</s", false));  // incomplete: plain text
  EXPECT_EQ(tok->encode("", false, true), Ids{});

  // The default: control and unknown tokens' strings are plain text (bytes
  // here) and round-trip; user-defined ones are split out all the same, and
  // the text after one gets the space prefix again, which decodes as a space.
  for (const char* text : {"<s>Hello world</s>", "<unk></s>"}) {
    Ids ids = tok->encode(text, false);
    EXPECT_FALSE(has_any(ids, {0, 1, 2, tool})) << text;
    EXPECT_EQ(tok->decode(ids), text);
  }
  EXPECT_EQ(tok->encode("Hello<tool>world", false), (Ids{hello, tool, world}));
  EXPECT_EQ(tok->decode(Ids{hello, tool, world}), "Hello<tool> world");
  Ids ids = tok->encode("<tool><unk></s>", false);
  EXPECT_EQ(ids.front(), tool);
  EXPECT_FALSE(has_any(ids, {0, 1, 2})) << "<tool><unk></s>";
  EXPECT_EQ(tok->decode(ids), "<tool> <unk></s>");
}

// Merging never produces a control, unknown or byte token, though its text is
// in the vocabulary (SentencePiece merges into normal and user-defined
// pieces only).
TEST(TokenizerSpecial, SpmDoesNotMergeIntoControlTokens) {
  SpmVocab v;
  for (const char* piece : {"<", "</", "s>", "<u", "<un", "<unk", "<0", "<0x", "<0x4", "1>"}) v.add(piece, -1);
  auto tok = load(v.writer(), "special_merge");
  for (const char* text : {"</s>", "<unk>", "<0x41>"}) {
    Ids ids = tok->encode(text, false);
    EXPECT_FALSE(has_any(ids, {0, 1, 2, kByte0 + 0x41})) << text;
    EXPECT_EQ(tok->decode(ids), text);
  }
  EXPECT_EQ(tok->encode("</s>", false), (Ids{v.id(kS), v.id("</"), v.id("s>")}));
  EXPECT_EQ(tok->encode("<0x41>", false), (Ids{v.id(kS), v.id("<0x4"), v.id("1>")}));
}

TEST(TokenizerSpecial, BpeLeftmostLongest) {
  BpeVocab v;
  v.add("<|e", 4);        // user-defined, a prefix of <|end|>
  v.add("<|end|>!!", 4);  // user-defined, longer than <|end|>
  auto tok = load(v.writer("llama-bpe"), "special_bpe");
  const int32_t end = v.id("<|end|>"), e = v.id("<|e"), bang = v.id("<|end|>!!");
  const int32_t G_hello = v.id(byte_symbol(' ') + "hello");
  EXPECT_EQ(tok->encode("<|end|> hello<|end|>", false, true), (Ids{end, G_hello, end}));
  EXPECT_EQ(tok->encode("<|end|>!!<|end|>!", false, true), (Ids{bang, end, '!'}));
  EXPECT_EQ(tok->encode("<|ex", false, true), (Ids{e, 'x'}));
  EXPECT_EQ(tok->encode("<<|end|>", true, true), (Ids{end, '<', end}));
  EXPECT_EQ(tok->decode_token(bang), "<|end|>!!");  // user-defined tokens are plain text
  EXPECT_EQ(tok->decode_token(end), "");            // control tokens decode to nothing

  // Without parse_special only the user-defined ones: "<|end|>" is no match.
  EXPECT_EQ(tok->encode("<|end|>!!<|ex", false), (Ids{bang, e, 'x'}));
  Ids plain = tok->encode("<|end|>!<|ex", false);
  EXPECT_EQ(plain.front(), e);
  EXPECT_FALSE(has_any(plain, {end, bang}));
  EXPECT_EQ(tok->decode(plain), "<|end|>!<|ex");
}

TEST(TokenizerSpecial, EndOfGeneration) {
  SpmVocab v;
  auto spm = load(v.writer(), "eog_spm");
  EXPECT_EQ(spm->eot(), -1);
  EXPECT_TRUE(spm->is_end_of_generation(2));
  EXPECT_FALSE(spm->is_end_of_generation(1));
  EXPECT_FALSE(spm->is_end_of_generation(-1));

  // eot by key, and by name when the key is missing (only as a control or
  // user-defined token); the named end tokens end generation either way.
  BpeVocab b;
  b.add("<|im_end|>", 3);
  b.add("<|eot_id|>", 1);     // normal: not taken by name
  b.add("<|endoftext|>", 4);  // user-defined: taken
  b.add("<|im_start|>", 3);
  weft::GgufWriter w = b.writer("qwen2");
  auto tok = load(w, "eog_byname");
  EXPECT_EQ(tok->eot(), b.id("<|im_end|>"));
  EXPECT_TRUE(tok->is_end_of_generation(b.id("<|im_end|>")));
  EXPECT_TRUE(tok->is_end_of_generation(b.id("<|end|>")));
  EXPECT_TRUE(tok->is_end_of_generation(b.id("<|endoftext|>")));
  EXPECT_FALSE(tok->is_end_of_generation(b.id("<|eot_id|>")));
  EXPECT_FALSE(tok->is_end_of_generation(b.id("<|im_start|>")));
  w.set_u32("tokenizer.ggml.eot_token_id", 'x');
  tok = load(w, "eog_bykey");
  EXPECT_EQ(tok->eot(), 'x');
  EXPECT_TRUE(tok->is_end_of_generation('x'));
  EXPECT_TRUE(tok->is_end_of_generation(b.id("<|im_end|>")));
  EXPECT_FALSE(tok->is_end_of_generation('y'));

  w.set_u32("tokenizer.ggml.eot_token_id", 1000000);
  try {
    load(w, "eog_bad");
    ADD_FAILURE() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.eot_token_id"), std::string::npos) << e.what();
  }
}

}  // namespace
