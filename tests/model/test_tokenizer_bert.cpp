// WordPiece (tokenizer.ggml.model = bert) with bert-base-uncased's
// vocabulary against transformers.js's BertTokenizer:
// tokenizer_data/bert_wpm.txt, written by make_bert.js, read through a GGUF
// file laid out as llama.cpp's converter writes a BERT one (word-initial
// pieces with U+2581, continuations without ##, no special-token keys: the
// ids are llama.cpp's defaults).
#include <gtest/gtest.h>

#include "test_tokenizer_util.h"
#include "weft/core/error.h"

namespace {

using namespace tokenizer_test;

struct BertRef {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::pair<std::string, Ids>> uncased, cased;
  BertRef() {
    std::ifstream in = open_data("bert_wpm.txt");
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = fields(line, 3);
      if (f[0] == "token") {
        tokens.push_back(f[1]);
        types.push_back(1);
      } else if (f[0] == "control") {
        types.at(std::stoul(f[1])) = 3;
      } else if (f[0] == "case" || f[0] == "cased") {
        (f[0] == "case" ? uncased : cased).emplace_back(unjson(f[2]), f[1].empty() ? Ids{} : parse_ids(f[1]));
      }
    }
  }
  weft::GgufWriter writer() const {
    weft::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "bert");
    w.set_array("tokenizer.ggml.tokens", tokens);
    w.set_array("tokenizer.ggml.token_type", types);
    return w;
  }
};

const BertRef& bert_ref() {
  static const BertRef d;
  return d;
}

TEST(TokenizerBert, MatchesTransformersJs) {
  const BertRef& d = bert_ref();
  ASSERT_EQ(d.tokens.size(), 30522u);
  ASSERT_GE(d.uncased.size(), 100u);
  auto tok = load(d.writer(), "bert_uncased");
  EXPECT_EQ(tok->warning(), "");
  EXPECT_EQ(tok->bos(), 101);
  EXPECT_TRUE(tok->add_bos());
  for (const auto& [text, ids] : d.uncased) EXPECT_EQ(tok->encode_with_specials(text), ids) << text;
}

TEST(TokenizerBert, CasedOptionsMatchTransformersJs) {
  const BertRef& d = bert_ref();
  weft::GgufWriter w = d.writer();
  w.set_bool("tokenizer.ggml.normalizer.lowercase", false);
  auto tok = load(w, "bert_cased");
  ASSERT_GE(d.cased.size(), 100u);
  for (const auto& [text, ids] : d.cased) EXPECT_EQ(tok->encode_with_specials(text), ids) << text;
}

TEST(TokenizerBert, KeysAndDecode) {
  const BertRef& d = bert_ref();
  weft::GgufWriter w = d.writer();
  w.set_bool("tokenizer.ggml.add_sep_token", false);
  w.set_u32("tokenizer.ggml.unknown_token_id", 100);
  auto tok = load(w, "bert_keys");
  const Ids ids = tok->encode_with_specials("Hello, unaffable world!");
  EXPECT_EQ(ids.front(), 101);
  EXPECT_NE(ids.back(), 102);
  // Continuations join the piece before; a word's first piece has a space.
  EXPECT_EQ(tok->decode(ids), "hello , unaffable world !");
  EXPECT_EQ(tok->encode("", false), Ids{});

  weft::GgufWriter none;  // no [UNK] anywhere: refused
  none.set_string("tokenizer.ggml.model", "bert");
  none.set_array("tokenizer.ggml.tokens", std::vector<std::string>{"\xE2\x96\x81"
                                                                   "a",
                                                                   "b"});
  try {
    load(none, "bert_nounk");
    ADD_FAILURE() << "accepted a bert vocabulary without [UNK]";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown_token_id"), std::string::npos) << e.what();
  }
}

}  // namespace
