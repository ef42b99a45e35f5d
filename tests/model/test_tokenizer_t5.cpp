// Unigram (tokenizer.ggml.model = t5) against SentencePiece itself:
// tokenizer_data/t5_ugm.txt, written by make_t5.js with Debian's spm_train
// and spm_encode (a 700-piece model with T5's special ids and a
// precompiled charsmap of its own rules), read through a GGUF file laid out
// as llama.cpp's converter writes a T5 one. Also the checks on a hostile
// charsmap.
#include <gtest/gtest.h>

#include <limits>

#include "test_tokenizer_util.h"
#include "weft/core/error.h"

namespace {

using namespace tokenizer_test;

struct T5Ref {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<uint8_t> charsmap;
  bool add_space_prefix = true, remove_extra_whitespaces = true;
  std::vector<std::pair<std::string, Ids>> cases;
  T5Ref() {
    std::ifstream in = open_data("t5_ugm.txt");
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = fields(line, 5);
      if (f[0] == "token" && f.size() == 5) {
        EXPECT_EQ(std::stoul(f[1]), tokens.size());
        types.push_back(std::stoi(f[2]));
        scores.push_back(std::stof(f[3]));
        tokens.push_back(unjson(f[4]));
      } else if (f[0] == "charsmap") {
        for (size_t i = 0; i + 1 < f[1].size(); i += 2)
          charsmap.push_back(static_cast<uint8_t>(std::stoul(f[1].substr(i, 2), nullptr, 16)));
      } else if (f[0] == "add_space_prefix") {
        add_space_prefix = f[1] == "1";
      } else if (f[0] == "remove_extra_whitespaces") {
        remove_extra_whitespaces = f[1] == "1";
      } else if (f[0] == "case") {
        cases.emplace_back(unjson(f[2]), f[1].empty() ? Ids{} : parse_ids(f[1]));
      }
    }
  }
  weft::GgufWriter writer(const std::vector<uint8_t>& map) const {
    weft::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "t5");
    w.set_array("tokenizer.ggml.tokens", tokens);
    w.set_array("tokenizer.ggml.scores", scores);
    w.set_array("tokenizer.ggml.token_type", types);
    w.set_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
    w.set_bool("tokenizer.ggml.remove_extra_whitespaces", remove_extra_whitespaces);
    weft::GgufValue v;
    v.type = weft::GgufType::array;
    v.arr = weft::GgufArray::packed(weft::GgufType::u8, map.data(), map.size());
    w.set_value("tokenizer.ggml.precompiled_charsmap", v);
    return w;
  }
};

const T5Ref& t5_ref() {
  static const T5Ref d;
  return d;
}

TEST(TokenizerT5, MatchesSentencePiece) {
  const T5Ref& d = t5_ref();
  ASSERT_EQ(d.tokens.size(), 700u);
  ASSERT_GE(d.cases.size(), 80u);
  ASSERT_GT(d.charsmap.size(), 100u);
  auto tok = load(d.writer(d.charsmap), "t5_ref");
  EXPECT_EQ(tok->warning(), "");
  EXPECT_EQ(tok->eos(), 1);  // llama.cpp's defaults: </s> 1, <unk> 2, no bos
  EXPECT_FALSE(tok->add_bos());
  for (const auto& [text, ids] : d.cases) {
    EXPECT_EQ(tok->encode(text, false), ids) << text;
    Ids with_eos = ids;
    with_eos.push_back(1);
    EXPECT_EQ(tok->encode_with_specials(text), with_eos) << text;
  }
}

// The charsmap matters: without it full-width letters, ligatures and the
// like are not mapped and the ids differ.
TEST(TokenizerT5, CharsmapIsUsed) {
  const T5Ref& d = t5_ref();
  auto with = load(d.writer(d.charsmap), "t5_with");
  auto without = load(d.writer({}), "t5_without");
  for (const char* text : {"\xEF\xBC\xA6\xEF\xBC\xB5\xEF\xBC\xAC\xEF\xBC\xAC", "\xEF\xAC\x81ne"})  // ＦＵＬＬ, ﬁne
    EXPECT_NE(with->encode(text, false), without->encode(text, false)) << text;
  EXPECT_EQ(with->encode("\xEF\xAC\x81ne", false), with->encode("fine", false));
}

TEST(TokenizerT5, HostileCharsmapIsRefused) {
  const T5Ref& d = t5_ref();
  auto refused = [&](std::vector<uint8_t> map, const char* what, bool at_load) {
    try {
      auto tok = load(d.writer(map), "t5_bad");
      if (at_load) {
        ADD_FAILURE() << what << ": loaded";
        return;
      }
      tok->encode("\xEF\xBC\xA6 abc \xEF\xAC\x81", false);
      ADD_FAILURE() << what << ": encoded";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input) << what;
      EXPECT_NE(std::string(e.what()).find("precompiled_charsmap"), std::string::npos) << e.what();
    }
  };
  refused({1, 2}, "shorter than its header", true);
  refused({0xFF, 0xFF, 0, 0, 1, 2, 3}, "double array past the end", true);
  refused({8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "no room for replacement strings", true);
  // A root whose BASE points past the array: the first lookup meets it.
  std::vector<uint8_t> far = {8, 0, 0, 0, 0, 0xFC, 0xFF, 0x7F, 0, 0, 0, 0, 'x', 0};
  refused(far, "node outside the array", false);
  // A replacement offset past the strings: take the real map and cut its strings.
  std::vector<uint8_t> cut(d.charsmap.begin(), d.charsmap.end());
  const uint32_t blob = cut[0] | cut[1] << 8 | cut[2] << 16 | static_cast<uint32_t>(cut[3]) << 24;
  cut.resize(4 + blob + 1);
  cut.back() = 0;
  refused(cut, "replacement outside the strings", false);
  // Strings without their terminating NUL.
  std::vector<uint8_t> open(d.charsmap.begin(), d.charsmap.end());
  while (!open.empty() && open.back() == 0) open.pop_back();
  for (size_t i = 4 + blob; i < open.size(); ++i)
    if (open[i] == 0) open[i] = 'x';
  refused(open, "no terminating NUL", false);
}

// Scores that are not numbers, infinite, or a piece far longer than any
// text: encoding still ends with ids inside the vocabulary.
TEST(TokenizerT5, HostileScoresStillEncode) {
  const std::string S = "\xE2\x96\x81";
  const std::vector<std::string> tokens = {"<pad>", "</s>", "<unk>", S, "a", S + "a", "b", std::string(5000, 'a')};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& scores :
       {std::vector<float>{0, 0, 0, nan, nan, nan, -1, 0}, std::vector<float>{0, 0, 0, -inf, inf, -inf, nan, inf},
        std::vector<float>{0, 0, 0, -inf, -inf, -inf, -inf, -inf}}) {
    weft::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "t5");
    w.set_array("tokenizer.ggml.tokens", tokens);
    w.set_array("tokenizer.ggml.scores", scores);
    w.set_array("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 2, 1, 1, 1, 1, 1});
    w.set_bool("tokenizer.ggml.add_space_prefix", true);
    auto tok = load(w, "t5_hostile");
    for (const std::string& text : {std::string("a b ab"), std::string("zzz"), std::string(6000, 'a')}) {
      const Ids ids = tok->encode(text, false);
      EXPECT_FALSE(ids.empty()) << text;
      for (int32_t id : ids) EXPECT_TRUE(id >= 0 && static_cast<size_t>(id) < tokens.size()) << text;
    }
    EXPECT_EQ(tok->encode("", false), Ids{});
  }
}

}  // namespace
