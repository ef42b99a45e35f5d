// Tokenizer against small vocabularies written into GGUF files here: exact
// ids worked out by hand from the merge rules in FACTS.md ("Tokenizers in
// GGUF"), the pre-tokenizer splits, byte fallback, and round trips.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/tokenizer_impl.h"
#include "model/tokenizer_pre.h"
#include "test_tokenizer_util.h"
#include "weft/core/error.h"

namespace {

using namespace tokenizer_test;
using weft::model::detail::PreTokenizerRule;

// The split of tokenizer.ggml.pre value pre.
std::vector<std::string> split_by(const char* pre, std::string_view text) {
  const PreTokenizerRule* rule = weft::model::detail::find_pre_tokenizer(pre);
  EXPECT_NE(rule, nullptr) << pre;
  return rule ? weft::model::detail::pretokenize(text, *rule) : std::vector<std::string>{};
}

TEST(TokenizerSpm, HelloWorldMergesByScore) {
  SpmVocab v;
  auto tok = load(v.writer(), "spm_hello");
  EXPECT_EQ(tok->vocab_size(), v.tokens.size());
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  // or, ll, llo, He, Hello, ▁w, ▁wor, ld, ▁world; ▁H is stale by then, ▁Hello last.
  EXPECT_EQ(tok->encode("Hello world", false), (Ids{v.id(kS + "Hello"), v.id(kS + "world")}));
  EXPECT_EQ(tok->encode("Hello world", true), (Ids{1, v.id(kS + "Hello"), v.id(kS + "world")}));
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true)), "Hello world");
  EXPECT_EQ(tok->decode_token(v.id(kS + "world")), " world");
  EXPECT_EQ(tok->decode_token(1), "");
  EXPECT_EQ(tok->encode("", false), Ids{});
  EXPECT_EQ(tok->encode("", true), Ids{1});
}

TEST(TokenizerSpm, TiesGoLeftmost) {
  SpmVocab v;
  auto tok = load(v.writer(), "spm_tie");
  // "ab" and "bc" score the same: the left pair wins.
  EXPECT_EQ(tok->encode("abc", false), (Ids{v.id(kS), v.id("ab"), v.id("c")}));
}

TEST(TokenizerSpm, WhitespaceRuns) {
  SpmVocab v;
  auto tok = load(v.writer(), "spm_ws");
  const int32_t s = v.id(kS), ss = v.id(kS + kS), a = v.id("a"), b = v.id("b");
  EXPECT_EQ(tok->encode("a b", false), (Ids{s, a, s, b}));
  EXPECT_EQ(tok->encode("a  b", false), (Ids{s, a, ss, b}));
  EXPECT_EQ(tok->encode("a   b", false), (Ids{s, a, ss, s, b}));  // leftmost ▁▁ first
  EXPECT_EQ(tok->encode(" a", false), (Ids{ss, a}));
  EXPECT_EQ(tok->decode(Ids{ss, a}), " a");
}

TEST(TokenizerSpm, ByteFallback) {
  SpmVocab v;
  auto tok = load(v.writer(), "spm_bytes");
  // é is C3 A9 and not in the vocabulary; so is the 4-byte 😀 (F0 9F 98 80).
  EXPECT_EQ(tok->encode("Hello \xC3\xA9", false), (Ids{v.id(kS + "Hello"), v.id(kS), kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(tok->encode("\xF0\x9F\x98\x80", false),
            (Ids{v.id(kS), kByte0 + 0xF0, kByte0 + 0x9F, kByte0 + 0x98, kByte0 + 0x80}));
  EXPECT_EQ(tok->decode_token(kByte0 + 0x41), "A");
  EXPECT_EQ(tok->decode(Ids{v.id(kS), kByte0 + 0xC3, kByte0 + 0xA9}), "\xC3\xA9");
}

TEST(TokenizerSpm, RoundTrip) {
  SpmVocab v;
  auto tok = load(v.writer(), "spm_round");
  for (const char* text :
       {"Hello world", "hello   world  ", "  leading", "tab\there\nnew line\r\n", "int main() { return 42; }",
        "3.14159 + 2e10 = ?", "\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC", "emoji \xF0\x9F\x98\x80!", "x", " ",
        "abcabc bca"}) {
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text) << text;
  }
}

TEST(TokenizerSpm, NoSpacePrefix) {
  SpmVocab v;
  weft::GgufWriter w = v.writer();
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  auto tok = load(w, "spm_noprefix");
  EXPECT_EQ(tok->encode("Hello world", false), (Ids{v.id("Hello"), v.id(kS + "world")}));
  EXPECT_EQ(tok->decode(tok->encode(" Hello", false)), " Hello");
}

TEST(TokenizerSpm, Errors) {
  SpmVocab v;
  auto kind_of = [](auto&& fn) {
    try {
      fn();
    } catch (const weft::Error& e) {
      return std::make_pair(e.kind(), std::string(e.what()));
    }
    return std::make_pair(weft::ErrorKind::internal, std::string("no error"));
  };
  {
    weft::GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    auto [k, msg] = kind_of([&] { load(w, "err_notokens"); });
    EXPECT_EQ(k, weft::ErrorKind::invalid_input);
    EXPECT_NE(msg.find("tokenizer.ggml.tokens"), std::string::npos) << msg;
  }
  {
    weft::GgufWriter w = v.writer();
    w.set_string("tokenizer.ggml.model", "wordpiece");
    auto [k, msg] = kind_of([&] { load(w, "err_model"); });
    EXPECT_EQ(k, weft::ErrorKind::invalid_input);
    EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
  }
  {
    weft::GgufWriter w = v.writer();
    w.set_u32("tokenizer.ggml.bos_token_id", 100000);
    auto [k, msg] = kind_of([&] { load(w, "err_bos"); });
    EXPECT_EQ(k, weft::ErrorKind::invalid_input);
    EXPECT_NE(msg.find("tokenizer.ggml.bos_token_id"), std::string::npos) << msg;
  }
  {
    weft::GgufWriter w = v.writer();
    w.set_array("tokenizer.ggml.scores", std::vector<float>{1.f});
    auto [k, msg] = kind_of([&] { load(w, "err_scores"); });
    EXPECT_EQ(k, weft::ErrorKind::invalid_input);
    EXPECT_NE(msg.find("tokenizer.ggml.scores"), std::string::npos) << msg;
  }
  auto tok = load(v.writer(), "err_ok");
  auto [k, msg] = kind_of([&] { tok->decode_token(static_cast<int32_t>(v.tokens.size())); });
  EXPECT_EQ(k, weft::ErrorKind::invalid_input);
  EXPECT_EQ(kind_of([&] { tok->decode(Ids{-1}); }).first, weft::ErrorKind::invalid_input);
}

// --- GPT-2 byte-level BPE ---------------------------------------------------

TEST(TokenizerBpe, MergeOrder) {
  BpeVocab v;
  auto tok = load(v.writer("gpt2"), "bpe_order");
  // h e l l o: "l o" (rank 0) before "l l" (rank 1), so hello builds up whole...
  EXPECT_EQ(tok->encode("hello", false), Ids{v.id("hello")});
  // ...while in "hell" the "l l" merge wins and "he ll" is no merge.
  EXPECT_EQ(tok->encode("hell", false), (Ids{v.id("he"), v.id("ll")}));
  EXPECT_EQ(tok->encode("hello hello", false), (Ids{v.id("hello"), v.id(byte_symbol(' ') + "hello")}));
  EXPECT_EQ(tok->encode("lol", false), (Ids{v.id("lo"), 'l'}));
  EXPECT_EQ(tok->encode("lllll", false), (Ids{v.id("ll"), v.id("ll"), 'l'}));  // ties go leftmost
  EXPECT_EQ(tok->encode("hi", true), (Ids{tok->bos(), 'h', 'i'}));
  EXPECT_EQ(tok->decode(tok->encode("hi", true)), "hi");
  EXPECT_EQ(tok->decode_token(v.id(byte_symbol(' ') + "hello")), " hello");
  EXPECT_EQ(tok->decode_token('\n'), "\n");
}

TEST(TokenizerBpe, Llama3TakesWholeTokensWithoutMerging) {
  BpeVocab v;
  v.add("lol", 1);  // no merge makes it
  EXPECT_EQ(load(v.writer("llama-bpe"), "bpe_ignore_l3")->encode("lol lol", false),
            (Ids{v.id("lol"), ' ', v.id("lo"), 'l'}));
  EXPECT_EQ(load(v.writer("gpt2"), "bpe_ignore_g2")->encode("lol", false), (Ids{v.id("lo"), 'l'}));
  EXPECT_EQ(load(v.writer("qwen2"), "bpe_ignore_qw")->encode("lol", false), (Ids{v.id("lo"), 'l'}));
}

TEST(TokenizerBpe, DigitsByPreTokenizer) {
  BpeVocab v;
  const int32_t t123 = v.id("123"), t12 = v.id("12");
  EXPECT_EQ(load(v.writer("llama-bpe"), "bpe_l3")->encode("12312", false), (Ids{t123, t12}));
  EXPECT_EQ(load(v.writer("qwen2"), "bpe_qw")->encode("12312", false), (Ids{'1', '2', '3', '1', '2'}));
  EXPECT_EQ(load(v.writer("gpt2"), "bpe_g2")->encode("123123", false), (Ids{t123, t123}));
}

using Pieces = std::vector<std::string>;

TEST(TokenizerBpe, PreTokenizerLlama3) {
  auto split = [](const char* s) { return split_by("llama3", s); };
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("I'm here, they'LL go"), (Pieces{"I", "'m", " here", ",", " they", "'LL", " go"}));
  EXPECT_EQ(split("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("x 12345"), (Pieces{"x", " ", "123", "45"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("hi!!\nok"), (Pieces{"hi", "!!\n", "ok"}));
  EXPECT_EQ(split("(word) end  "), (Pieces{"(word", ")", " end", "  "}));
  EXPECT_EQ(split("f(x) = y;"), (Pieces{"f", "(x", ")", " =", " y", ";"}));
  EXPECT_EQ(split("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"), (Pieces{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  // Combining marks (U+0301) and the zero-width joiner (U+200D) are not \p{L}.
  EXPECT_EQ(split("e\xCC\x81 x"), (Pieces{"e", "\xCC\x81", " x"}));
  EXPECT_EQ(split("a\xE2\x80\x8D\xF0\x9F\x91\xA9"), (Pieces{"a", "\xE2\x80\x8D\xF0\x9F\x91\xA9"}));
}

TEST(TokenizerBpe, PreTokenizerQwen2AndGpt2) {
  auto qwen = [](const char* s) { return split_by("qwen2", s); };
  auto gpt2 = [](const char* s) { return split_by("gpt2", s); };
  EXPECT_EQ(qwen("a 123"), (Pieces{"a", " ", "1", "2", "3"}));
  EXPECT_EQ(qwen("I'M"), (Pieces{"I", "'M"}));
  EXPECT_EQ(gpt2("I'M"), (Pieces{"I", "'", "M"}));  // gpt2's contractions are case-sensitive
  EXPECT_EQ(gpt2("I'm 12345 (word)"), (Pieces{"I", "'m", " 12345", " (", "word", ")"}));
  EXPECT_EQ(gpt2("a  b\n"), (Pieces{"a", " ", " b", "\n"}));
  EXPECT_EQ(gpt2("hi!!\nok"), (Pieces{"hi", "!!", "\n", "ok"}));
}

// smollm, starcoder, ...: each \p{N} alone, then gpt2's pattern on each run
// between them as a text of its own.
TEST(TokenizerBpe, PreTokenizerDigitsGpt2) {
  auto split = [](const char* s) { return split_by("smollm", s); };
  EXPECT_EQ(split("abc 12345 de'll"), (Pieces{"abc", " ", "1", "2", "3", "4", "5", " de", "'ll"}));
  EXPECT_EQ(split("Hello world! 123"), (Pieces{"Hello", " world", "!", " ", "1", "2", "3"}));
  EXPECT_EQ(split("  multiple   spaces"), (Pieces{" ", " multiple", "  ", " spaces"}));
  // The run before a digit ends there: its trailing spaces stay together
  // (gpt2 alone gives "a", " ", " 1").
  EXPECT_EQ(split("a  1"), (Pieces{"a", "  ", "1"}));
  EXPECT_EQ(split("x1y 3.14"), (Pieces{"x", "1", "y", " ", "3", ".", "1", "4"}));
  EXPECT_EQ(split("hi!!\n12"), (Pieces{"hi", "!!", "\n", "1", "2"}));
  EXPECT_EQ(split("I'M i'm"), (Pieces{"I", "'", "M", " i", "'m"}));  // contractions are case-sensitive
  // \p{N} beyond ASCII: Arabic-Indic digits (Nd) and vulgar fraction one half (No).
  EXPECT_EQ(split("\xD9\xA3\xD9\xA4 x\xC2\xBD"), (Pieces{"\xD9\xA3", "\xD9\xA4", " x", "\xC2\xBD"}));
  EXPECT_EQ(split("42"), (Pieces{"4", "2"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(TokenizerBpe, PreTokenizerNames) {
  using weft::model::detail::TokenizerData;
  auto rule_of = [](const std::string& name) {
    TokenizerData d;
    weft::model::detail::bpe_load(d, {}, name);
    return std::make_pair(std::string(d.pre->name), d.warning.empty());
  };
  using R = std::pair<std::string, bool>;
  for (const char* name : {"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais"})
    EXPECT_EQ(rule_of(name), R("gpt2", true)) << name;
  for (const char* name : {"llama-bpe", "llama3", "llama-v3"}) EXPECT_EQ(rule_of(name), R("llama3", true)) << name;
  for (const char* name : {"dbrx", "smaug-bpe"}) EXPECT_EQ(rule_of(name), R("llama3-merges", true)) << name;
  for (const char* name : {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})
    EXPECT_EQ(rule_of(name), R("qwen2", true)) << name;
  for (const char* name : {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})
    EXPECT_EQ(rule_of(name), R("digits-gpt2", true)) << name;
  for (const char* name : {"gpt-4o", "llama4"}) EXPECT_EQ(rule_of(name), R("gpt-4o", true)) << name;
  for (const char* name : {"bloom", "poro-chat"}) EXPECT_EQ(rule_of(name), R("bloom", true)) << name;
  for (const char* name :
       {"falcon", "deepseek-llm", "deepseek-coder", "deepseek-v3", "tekken", "viking", "chameleon", "seed-coder"})
    EXPECT_EQ(rule_of(name), R(name, true)) << name;
  for (const char* name : {"", "default"}) EXPECT_EQ(rule_of(name), R("default", false)) << name;
  for (const char* name : {"SMOLLM", "kimi-k2", "no-such-thing"}) EXPECT_EQ(rule_of(name), R("gpt2", false)) << name;
}

// Every pattern in the table compiles (CpRegex refuses what it cannot run),
// and every name reaches a rule of its own name's family.
TEST(TokenizerBpe, EveryPreTokenizerCompiles) {
  const auto names = weft::model::detail::pre_tokenizer_names();
  EXPECT_GE(names.size(), 80u);
  for (const auto& [name, rule] : names) {
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(weft::model::detail::find_pre_tokenizer(name), rule) << name;
    EXPECT_FALSE(rule->steps.empty()) << name;
    // A split covers its text.
    std::string joined;
    for (const std::string& p : weft::model::detail::pretokenize("Hi  there, I'M 12345 \u00e9t\u00e9\n\n!", *rule))
      joined += p;
    EXPECT_EQ(joined, "Hi  there, I'M 12345 \u00e9t\u00e9\n\n!") << name;
  }
}

TEST(TokenizerBpe, SmollmEncodesDigitsOneByOne) {
  BpeVocab v;
  auto tok = load(v.writer("smollm"), "bpe_smollm");
  EXPECT_EQ(tok->warning(), "");
  const int32_t hello = v.id("hello"), s_hello = v.id(byte_symbol(' ') + "hello");
  // "1 2" and "12 3" are merges, but every digit is a piece of its own.
  EXPECT_EQ(tok->encode("12312", false), (Ids{'1', '2', '3', '1', '2'}));
  EXPECT_EQ(tok->encode("hello 12 hello", false), (Ids{hello, ' ', '1', '2', s_hello}));
  EXPECT_EQ(tok->decode(tok->encode("hello 12 hello", true)), "hello 12 hello");
}

TEST(TokenizerBpe, WarningForUnknownPreTokenizer) {
  BpeVocab v;
  const int32_t t123 = v.id("123");
  for (const char* pre : {"gpt2", "llama-bpe", "qwen2", "smollm"})
    EXPECT_EQ(load(v.writer(pre), std::string("bpe_known_") + pre)->warning(), "") << pre;

  auto tok = load(v.writer("foo-9"), "bpe_unknown");
  EXPECT_EQ(tok->warning(),
            "tokenizer.ggml.pre 'foo-9' is not known to weft: using gpt2's pre-tokenizer, so tokens may differ "
            "from the model's own");
  EXPECT_EQ(tok->encode("123123", false), (Ids{t123, t123}));  // still encodes, as gpt2

  const std::string deflt = load(v.writer("default"), "bpe_default")->warning();
  EXPECT_NE(deflt.find("'default'"), std::string::npos) << deflt;
  EXPECT_NE(deflt.find("using llama.cpp's default pre-tokenizer"), std::string::npos) << deflt;

  weft::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_array("tokenizer.ggml.tokens", v.tokens);
  w.set_array("tokenizer.ggml.merges", v.merges);
  const std::string missing = load(w, "bpe_nopre")->warning();
  EXPECT_NE(missing.find("no tokenizer.ggml.pre"), std::string::npos) << missing;

  // SentencePiece files have no pre-tokenizer; converters write "default".
  SpmVocab sv;
  weft::GgufWriter sw = sv.writer();
  EXPECT_EQ(load(sw, "spm_nopre")->warning(), "");
  sw.set_string("tokenizer.ggml.pre", "default");
  EXPECT_EQ(load(sw, "spm_default")->warning(), "");
}

// add_bos(): the file's tokenizer.ggml.add_bos_token, else llama.cpp's
// default for the kind of tokenizer; never without a bos token.
TEST(Tokenizer, AddBosFromTheFileOrTheDefault) {
  BpeVocab v;
  EXPECT_TRUE(load(v.writer("llama-bpe"), "bos_llama3")->add_bos());
  EXPECT_FALSE(load(v.writer("qwen2"), "bos_qwen2")->add_bos());
  EXPECT_FALSE(load(v.writer("gpt2"), "bos_gpt2")->add_bos());
  weft::GgufWriter w = v.writer("qwen2");
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  EXPECT_TRUE(load(w, "bos_qwen2_key")->add_bos());
  w = v.writer("llama-bpe");
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  EXPECT_FALSE(load(w, "bos_llama3_key")->add_bos());

  SpmVocab sv;
  weft::GgufWriter sw = sv.writer();
  EXPECT_TRUE(load(sw, "bos_spm")->add_bos());
  sw.set_bool("tokenizer.ggml.add_bos_token", false);
  EXPECT_FALSE(load(sw, "bos_spm_key")->add_bos());

  weft::GgufWriter nobos;  // asks for bos but names none
  nobos.set_string("tokenizer.ggml.model", "llama");
  nobos.set_array("tokenizer.ggml.tokens", sv.tokens);
  nobos.set_bool("tokenizer.ggml.add_bos_token", true);
  EXPECT_FALSE(load(nobos, "bos_none")->add_bos());
}

TEST(TokenizerBpe, RoundTrip) {
  BpeVocab v;
  for (const char* pre : {"llama-bpe", "qwen2", "gpt2", "smollm"}) {
    auto tok = load(v.writer(pre), std::string("bpe_round_") + pre);
    for (const char* text :
         {"hello hello world", "  spaces   and\ttabs\n\n", "I'm 12345678 years", "int main() { return 0; }\n",
          "\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80", "\xFF\xFE invalid utf-8 \x80", "x"}) {
      EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << pre << ": " << text;
    }
  }
}

TEST(TokenizerBpe, MissingMerges) {
  BpeVocab v;
  weft::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_array("tokenizer.ggml.tokens", v.tokens);
  try {
    load(w, "bpe_nomerges");
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges"), std::string::npos);
  }
}

// --- LLaMA's vocabulary, against llama-tokenizer-js -------------------------

TEST(TokenizerSpm, MatchesLlamaTokenizerJs) {
  std::ifstream in = open_data("llama_spm.txt");
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::pair<std::string, Ids>> cases;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = fields(line, 4);
    if (f[0] == "vocab") {
      size_t n = std::stoul(f[1]);
      tokens.resize(n);
      scores.assign(n, 0.f);
      types.assign(n, 1);
      for (size_t i = 0; i < n; ++i) tokens[i] = "\x01unreachable" + std::to_string(i);
    } else if (f[0] == "token") {
      int32_t id = std::stoi(f[1]);
      ASSERT_LT(static_cast<size_t>(id), tokens.size());
      scores[id] = std::stof(f[2]);
      tokens[id] = f[3];
      types[id] = id == 0 ? 2 : id < 3 ? 3 : id < 259 ? 6 : 1;
    } else if (f[0] == "case") {
      cases.emplace_back(unjson(f[2]), parse_ids(f[1]));
    }
  }
  ASSERT_EQ(tokens.size(), 32000u);
  ASSERT_GE(cases.size(), 20u);

  auto tok = load(spm_writer(tokens, scores, types), "llama_js");
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok->encode(text, true), ids) << text;
    EXPECT_EQ(tok->decode(ids), text) << text;
  }
}

}  // namespace
