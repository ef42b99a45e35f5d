// The pre-tokenizer rules (src/model/tokenizer_pre.cpp) against JavaScript's
// RegExp running the same patterns: tokenizer_data/pre_splits.txt, written
// by make_pre_splits.js from pre_rules.mjs. Also the regex matcher's subset
// and its refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/tokenizer_pre.h"
#include "model/tokenizer_regex.h"
#include "test_tokenizer_util.h"
#include "weft/core/error.h"

namespace {

using namespace tokenizer_test;
using weft::model::detail::BuiltinSplit;
using weft::model::detail::CpRegex;
using weft::model::detail::PreTokenizerRule;

// The strings of a JSON array of strings, as JSON.stringify writes it.
std::vector<std::string> json_strings(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '"') continue;
    size_t j = i + 1;
    while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
    out.push_back(unjson(s.substr(i, j - i + 1)));
    i = j;
  }
  return out;
}

const PreTokenizerRule* rule_by_name(const std::string& name) {
  if (name == "default") return &weft::model::detail::default_pre_tokenizer();
  for (const auto& [pre, rule] : weft::model::detail::pre_tokenizer_names())
    if (rule->name == name) return rule;
  return nullptr;
}

std::string step_text(const PreTokenizerRule::Step& s) {
  switch (s.builtin) {
    case BuiltinSplit::gpt2: return "builtin:gpt2";
    case BuiltinSplit::llama3: return "builtin:llama3";
    case BuiltinSplit::qwen2: return "builtin:qwen2";
    case BuiltinSplit::none: break;
  }
  return std::string(s.pattern);
}

TEST(TokenizerPre, EveryRuleSplitsAsJavaScriptDoes) {
  std::ifstream in = open_data("pre_splits.txt");
  std::set<std::string> seen;
  size_t n_splits = 0;
  const PreTokenizerRule* rule = nullptr;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = fields(line, 4);
    if (f[0] == "rule") {
      rule = rule_by_name(f[1]);
      ASSERT_NE(rule, nullptr) << f[1];
      seen.insert(f[1]);
      std::vector<std::string> steps;
      for (const auto& s : rule->steps) steps.push_back(step_text(s));
      EXPECT_EQ(steps, json_strings(f[2])) << "the patterns of " << f[1] << " differ from pre_rules.mjs";
    } else if (f[0] == "split") {
      ASSERT_NE(rule, nullptr);
      ASSERT_EQ(f[1], rule->name);
      const std::string text = unjson(f[2]);
      EXPECT_EQ(weft::model::detail::pretokenize(text, *rule), json_strings(f[3])) << f[1] << ": " << f[2];
      ++n_splits;
    }
  }
  EXPECT_GE(n_splits, 3000u);
  for (const auto& [pre, r] : weft::model::detail::pre_tokenizer_names())
    EXPECT_TRUE(seen.count(std::string(r->name))) << "rule " << r->name << " (" << pre << ") has no reference splits";
}

// Matches at 0 of a pattern on text, in code points (-1: none).
ptrdiff_t match(const char* pattern, const std::string& text, size_t at = 0) {
  return CpRegex(pattern).match_at(weft::model::detail::split_utf8(text), at);
}

TEST(TokenizerPre, RegexSubset) {
  EXPECT_EQ(match(R"(\p{N}{1,3})", "12345"), 3);
  EXPECT_EQ(match(R"(\p{N}{2})", "1x"), -1);
  EXPECT_EQ(match(R"(\p{N}{2,})", "12345x"), 5);
  EXPECT_EQ(match(R"(\s+(?!\S))", "   x"), 2);
  EXPECT_EQ(match(R"(\s+(?=x))", "   x"), 3);
  EXPECT_EQ(match(R"(\s+$)", "   "), 3);
  EXPECT_EQ(match(R"(\s+$)", "  a"), -1);
  EXPECT_EQ(match(R"(ab|a)", "ab"), 2);  // the first alternative that matches,
  EXPECT_EQ(match(R"(a|ab)", "ab"), 1);  // not the longest
  EXPECT_EQ(match(R"((?:a|b)+c)", "abbac"), 5);
  EXPECT_EQ(match(R"([^\s\p{L}]+)", "!?x"), 2);
  EXPECT_EQ(match(R"([\p{Lu}]+)", "ÀBc"), 2);
  EXPECT_EQ(match(R"(\p{Ll}+)", "ǅ"), -1);  // U+01C5 is titlecase (Lt)
  EXPECT_EQ(match(R"(\p{Lt})", "ǅ"), 1);
  EXPECT_EQ(match(R"(\p{M}+)", "\xCC\x81\xCC\x82x"), 2);
  EXPECT_EQ(match(R"(\p{S}\p{P})", "+,"), 2);
  EXPECT_EQ(match(R"([a-c\-]+)", "ab-cd"), 4);
  EXPECT_EQ(match(R"(\P{L}+)", "12a"), 2);
  EXPECT_EQ(match(R"([^(\s|.,)]+)", "ab(c d"), 2);  // ( and | are literal inside [...]
  EXPECT_EQ(match("[一-龥]+", "日本語x"), 3);
  EXPECT_EQ(match("x", "ax", 1), 1);
  EXPECT_EQ(match("x", "ax", 2), -1);
}

TEST(TokenizerPre, RegexRefusesWhatItCannotRun) {
  for (const char* bad :
       {"(?i:a)", "a+?", "a++", "(?:(?=a))*", R"(\d)",   R"(\w)",   R"(\b)", "(a*)*", "(?:a?)+", "[z-a]",
        "(a",     "a)",  "[ab", R"(\p{Xx})",  R"([\S])", "a{2000}", "^a",    ".",     "a{3,1}",  "*a"}) {
    try {
      CpRegex re(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input) << bad;
      EXPECT_NE(std::string(e.what()).find("pattern"), std::string::npos) << e.what();
    }
  }
}

// The splits that made gpt-neox, falcon and the DeepSeek files differ from
// llama.cpp, worked out by hand from their patterns.
TEST(TokenizerPre, SplitsOfTheVocabTestFamilies) {
  auto split = [](const char* pre, const std::string& text) {
    return weft::model::detail::pretokenize(text, *weft::model::detail::find_pre_tokenizer(pre));
  };
  using P = std::vector<std::string>;
  // llama.cpp's default (a file without tokenizer.ggml.pre): punctuation runs
  // first, then gpt2's pattern, then digit runs, then threes.
  EXPECT_EQ(weft::model::detail::pretokenize("a... 12345", weft::model::detail::default_pre_tokenizer()),
            (P{"a", "...", " ", "123", "45"}));
  EXPECT_EQ(split("falcon", "x=1234567 it's"), (P{"x", "=", "123", "456", "7", " it", "'", "s"}));  // ' is \p{P}
  EXPECT_EQ(split("deepseek-coder", "ab 12\ncd!!"), (P{"ab", " ", "1", "2", "\n", "cd", "!!"}));
  EXPECT_EQ(split("deepseek-llm", "ab 12\n\ncd!!"), (P{"ab", " ", "12", "\n", "\n", "cd", "!!"}));
  EXPECT_EQ(split("deepseek-v3", "x.Hello 1234 日本語"), (P{"x", ".Hello", " ", "123", "4", " ", "日本語"}));
}

}  // namespace

namespace {

// Long inputs through every rule: the split covers the text, and the time
// each takes is printed (the regex rules are linear on text like this: each
// match attempt stops at the first code point of another class).
TEST(TokenizerPre, LongTextsThroughEveryRule) {
  std::string words, spaces(50000, ' '), digits(50000, '7');
  while (words.size() < 100000) words += "Hello, world! It's 2024: caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\n  x ";
  std::set<const PreTokenizerRule*> done;
  for (const auto& [pre, rule] : weft::model::detail::pre_tokenizer_names()) {
    if (!done.insert(rule).second) continue;
    for (const std::string* text : {&words, &spaces, &digits}) {
      const auto t0 = std::chrono::steady_clock::now();
      size_t covered = 0;
      weft::model::detail::for_each_piece(*text, *rule, [&](std::string_view p) { covered += p.size(); });
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(covered, text->size()) << rule->name;
      EXPECT_LT(ms, 2000.0) << rule->name;
      if (ms > 50) std::printf("  %s: %zu bytes in %.1f ms\n", std::string(rule->name).c_str(), text->size(), ms);
    }
  }
}

}  // namespace
