// The grammar engine (weft/model/grammar.h): GBNF texts accepted and
// rejected as hand-checked against llama.cpp's grammar notation, parse
// errors with their line and column, hostile texts refused, and the
// trie-walked token mask equal to testing every token alone.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/grammar.h"

namespace {

using weft::model::Grammar;
using weft::model::GrammarLimits;
using weft::model::GrammarMatcher;
using weft::model::TokenTrie;

// Whether the whole text is a sentence of the grammar.
bool matches(const std::string& gbnf, const std::string& text) {
  GrammarMatcher m(Grammar::parse(gbnf), nullptr);
  return m.accept_bytes(text) && m.can_end();
}

// Whether text is a prefix of some sentence (the matcher goes on).
bool prefix_ok(const std::string& gbnf, const std::string& text) {
  GrammarMatcher m(Grammar::parse(gbnf), nullptr);
  return m.accept_bytes(text);
}

std::string parse_error(const std::string& gbnf, const GrammarLimits& limits = {}) {
  try {
    Grammar::parse(gbnf, limits);
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Grammar, AlternativesAndLiterals) {
  const std::string g = R"(root ::= "yes" | "no")";
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "no"));
  EXPECT_FALSE(matches(g, "ye"));      // a prefix, not a sentence
  EXPECT_TRUE(prefix_ok(g, "ye"));
  EXPECT_FALSE(prefix_ok(g, "yess"));
  EXPECT_FALSE(prefix_ok(g, "maybe"));
  EXPECT_FALSE(matches(g, ""));
}

TEST(Grammar, ClassesAndRepetitions) {
  EXPECT_TRUE(matches("root ::= [a-c]+ [^x]", "abcz"));
  EXPECT_FALSE(matches("root ::= [a-c]+ [^x]", "abx"));
  EXPECT_FALSE(matches("root ::= [a-c]+ [^x]", "z"));  // + needs one
  const std::string counted = R"(root ::= "a"{2,3} "b")";
  EXPECT_FALSE(matches(counted, "ab"));
  EXPECT_TRUE(matches(counted, "aab"));
  EXPECT_TRUE(matches(counted, "aaab"));
  EXPECT_FALSE(prefix_ok(counted, "aaaa"));
  EXPECT_TRUE(matches(R"(root ::= "x"{2})", "xx"));
  EXPECT_FALSE(matches(R"(root ::= "x"{2})", "xxx"));
  EXPECT_TRUE(matches(R"(root ::= "x"{2,} "y")", "xxxxxy"));
  EXPECT_FALSE(matches(R"(root ::= "x"{2,} "y")", "xy"));
  EXPECT_TRUE(matches(R"(root ::= "ab"? "c")", "c"));
  EXPECT_TRUE(matches(R"(root ::= "ab"? "c")", "abc"));
  EXPECT_FALSE(prefix_ok(R"(root ::= "ab"? "c")", "ac"));  // ? repeats the whole literal
  EXPECT_TRUE(matches(R"(root ::= ("a" | "bc")* "!")", "abcbca!"));
  EXPECT_FALSE(prefix_ok(R"(root ::= ("a" | "bc")* "!")", "ab!"));
  EXPECT_TRUE(matches("root ::= . . .", "a\xC3\xA9z"));  // . is any one character
  EXPECT_TRUE(matches(R"(root ::= [\x41-\x43] "\u00e9" "\n")", "B\xC3\xA9\n"));
  EXPECT_TRUE(matches(R"(root ::= [\]\-] "\"")", "-\""));
}

TEST(Grammar, RulesCommentsAndLines) {
  const std::string g = R"g(# a list of numbers
root ::= "[" ws (num ("," ws num)*)? "]"   # trailing comment
num  ::= "-"? [0-9]+
ws   ::= [ \t\n]*
pair ::= (
  "(" num
    "," num ")" )
)g";
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1,\n -22,3]"));
  EXPECT_FALSE(prefix_ok(g, "[1,,"));
  EXPECT_FALSE(matches(g, "[1,2"));
  // Outside parentheses (and not after ::= or |) a newline ends the rule, as in llama.cpp.
  EXPECT_NE(parse_error("root ::= \"a\"\n  \"b\"").find("line 2, column 3: expected a rule name"), std::string::npos);
}

TEST(Grammar, Utf8AcrossTokens) {
  // Greek small letters are U+03B1..U+03C9: two bytes each (CE/CF lead).
  const std::string g = R"(root ::= [α-ω]+)";
  GrammarMatcher m(Grammar::parse(g), nullptr);
  EXPECT_TRUE(m.accept_bytes("\xCE"));  // the first byte of α..ο
  EXPECT_FALSE(m.can_end());            // inside a character
  EXPECT_TRUE(m.accept_bytes("\xB1"));  // α
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("\xC3"));   // U+00C0..: no Greek letter starts so
  EXPECT_FALSE(m.accept_bytes("\xB1"));   // a continuation byte without a lead
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("\xCF\x89"));  // ω
}

// A partial character is taken only while some valid code point can
// complete it: ED A0..BF can only end in a surrogate (U+D800..DFFF), so a
// class spanning them must not take those bytes (a sequence would then reach
// a state no token continues: seen as "the grammar allows no token" at
// temperature 1 over a byte-fallback vocabulary).
TEST(Grammar, PartialCharactersThatCanOnlyBeSurrogatesAreRefused) {
  const std::string any = R"(root ::= [^"]*)";
  EXPECT_TRUE(prefix_ok(any, "\xED"));          // U+D000..D7FF are still possible
  EXPECT_TRUE(prefix_ok(any, "\xED\x9F"));      // U+D7C0..D7FF
  EXPECT_TRUE(matches(any, "\xED\x9F\xBF"));   // U+D7FF
  EXPECT_FALSE(prefix_ok(any, "\xED\xA0"));     // U+D800..D83F: surrogates only
  EXPECT_FALSE(prefix_ok(any, "\xED\xBF"));     // U+DFC0..DFFF
  EXPECT_TRUE(matches(any, "\xEE\x80\x80"));   // U+E000, just past them
  EXPECT_FALSE(prefix_ok(any, "\xF4\x90"));     // past U+10FFFF
}

TEST(Grammar, ErrorsNameTheFaultAndWhere) {
  EXPECT_NE(parse_error("root ::= foo\n").find("line 1, column 10: rule 'foo' is used but never defined"),
            std::string::npos) << parse_error("root ::= foo\n");
  EXPECT_NE(parse_error("a ::= \"x\"\n").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"x\"\nroot ::= \"y\"").find("line 2, column 1: rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(parse_error("root = \"x\"").find("line 1, column 6: expected '::='"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"abc").find("line 1, column 10: unterminated literal"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [abc").find("unterminated character class"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parse_error("root ::= * \"a\"").find("line 1, column 10: '*' repeats nothing"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,2}").find("n smaller than m"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\" )").find("line 1, column 14: expected the end of the line"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= root \"a\" | \"b\"").find("'root' is left-recursive"), std::string::npos);
  EXPECT_NE(parse_error("root ::= x\nx ::= \"y\"? root").find("left-recursive"), std::string::npos);
  EXPECT_EQ(parse_error("root ::= \"a\" root | \"b\""), "");  // right recursion is fine
}

TEST(Grammar, HostileTextsAreRefused) {
  EXPECT_NE(parse_error("root ::= \"a\"{100000}").find("repetition count beyond the limit of 10000"),
            std::string::npos);
  // Nested repetitions repeat a rule reference, so they grow linearly...
  GrammarLimits small;
  small.max_elements = 5000;
  EXPECT_EQ(parse_error("root ::= ((\"a\"{100}){100}){100}", small), "");
  // ...and long ones together pass the element bound.
  EXPECT_NE(parse_error("root ::= \"a\"{3000} \"b\"{3000}", small).find("more than 5000 elements"),
            std::string::npos);
  std::string deep = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_NE(parse_error(deep).find("parentheses nested deeper than 64"), std::string::npos);
  GrammarLimits tiny_text;
  tiny_text.max_text_bytes = 8;
  EXPECT_NE(parse_error("root ::= \"abcdef\"", tiny_text).find("more than the limit of 8"), std::string::npos);
  // More parse states at once than max_stacks is an error, not a slow crawl.
  GrammarLimits few;
  few.max_stacks = 16;
  std::string wide = "root ::= \"a\" \"0\"";
  for (int i = 1; i < 20; ++i) wide += " | \"a\" \"" + std::to_string(i) + "\"";
  try {
    GrammarMatcher m(Grammar::parse(wide, few), nullptr);
    ADD_FAILURE() << "20 alternatives passed a bound of 16 stacks";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ambiguous beyond 16 parse states"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(GrammarMatcher(Grammar::parse(wide), nullptr));
}

// The mask found by walking the trie equals testing each token's bytes
// alone on a copy of the matcher, at every step of random texts of a JSON-ish
// grammar over a random vocabulary with multi-byte characters.
TEST(Grammar, TrieMaskEqualsEveryTokenTestedAlone) {
  const std::string g = R"(root ::= "{" ws (pair ("," ws pair)*)? ws "}"
pair ::= str ws ":" ws (str | num)
str ::= "\"" [^"\\]{0,6} "\""
num ::= "-"? [0-9]{1,4}
ws ::= " "?)";
  auto grammar = Grammar::parse(g);
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {"{", "}", "\"", ":", ",", " ", "-", "1", "23", "a", "bc", "é",
                                           "\xC3", "\xA9", "\\", "\"a\"", "{\"", "\": ", "9}", "\xCE\xB1"};
  std::vector<std::string> vocab(300);
  for (size_t i = 0; i < vocab.size(); ++i) {
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n; ++k) vocab[i] += pieces[rng() % pieces.size()];
  }
  vocab[0] = "";  // an end token
  vocab[1] = "";  // a control token: never allowed
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{0});
  for (int run = 0; run < 20; ++run) {
    GrammarMatcher m(grammar, trie);
    for (int step = 0; step < 30; ++step) {
      std::vector<uint8_t> allowed;
      const size_t n = m.allowed_tokens(allowed);
      size_t count = 0;
      for (size_t id = 0; id < vocab.size(); ++id) {
        GrammarMatcher copy = m;
        const bool expect = id == 0 ? m.can_end() : !vocab[id].empty() && copy.accept_bytes(vocab[id]);
        ASSERT_EQ(allowed[id] != 0, expect) << "token " << id << " '" << vocab[id] << "' at step " << step;
        ASSERT_EQ(m.allows(static_cast<int32_t>(id)), expect) << "allows(" << id << ") at step " << step;
        count += expect;
      }
      ASSERT_EQ(n, count);
      if (m.finished() || n == 0) break;
      std::vector<int32_t> ok;
      for (size_t id = 1; id < vocab.size(); ++id)
        if (allowed[id]) ok.push_back(static_cast<int32_t>(id));
      if (ok.empty()) break;
      m.accept_token(ok[rng() % ok.size()]);
    }
  }
  GrammarMatcher fresh(grammar, trie);
  EXPECT_THROW(fresh.accept_token(0), weft::Error);  // the end before "{...}"
  EXPECT_THROW(fresh.accept_token(1), weft::Error);  // a control token
}

}  // namespace
