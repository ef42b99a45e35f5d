// A small regular-expression matcher over code points, for the pre-tokenizer
// patterns of tokenizer_pre.cpp (the Split patterns of the models'
// tokenizer.json files). Not part of the public API.
//
//   CpRegex re(R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+)");   // throws Error(invalid_input)
//   std::vector<Cp> t = split_utf8(" 12345!");
//   re.match_at(t, 0);   // 0: no match at " " (the space is not [^\s...])
//   re.match_at(t, 1);   // 3: "123"
//
// The subset, which is what those patterns use: literals (UTF-8); escapes
// \r \n \t \f \v \\ and any escaped punctuation; \s \S (Unicode White_Space);
// \p{..} and \P{..} for L Lu Ll Lt Lm Lo M N P S; classes [...] with ranges,
// escapes, \s and \p{..}, negated with ^; groups (...) and (?:...), both
// non-capturing; lookahead (?=...) and (?!...); the quantifiers ? * + {n}
// {n,} {n,m} (greedy); alternation |; and $ (end of the matched text). No
// backreferences, lazy or possessive quantifiers, case-insensitive groups or
// \d \w \b: a pattern using them is refused when it is compiled.
//
// Matching is backtracking with Perl's priorities (leftmost alternative
// first, quantifiers greedy), the semantics of Oniguruma, which the
// tokenizers library runs these patterns with. The text ends where the span
// ends: a pre-tokenizer splits each piece on its own, so $ and lookahead see
// the piece's end. A quantified group that can match nothing is refused (it
// could loop). Immutable after construction: safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_impl.h"

namespace weft::model::detail {

class CpRegex {
 public:
  explicit CpRegex(std::string_view pattern);

  // The length in code points of the match that starts at t[i], or -1 when
  // none does (a match may be empty only if the pattern allows it).
  ptrdiff_t match_at(std::span<const Cp> t, size_t i) const;

  struct Class {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive, any order
    uint32_t categories = 0;                            // bit c: CpCategory c; bit 16: White_Space
    bool negated = false;
    bool contains(uint32_t cp, uint8_t props) const;
  };
  enum class Op : uint8_t { cls, split, jmp, look, end, match };
  struct Inst {
    Op op;
    bool negative = false;  // look: (?!...)
    int32_t x = 0, y = 0;   // cls: class index; split: first, second choice; jmp: target; look: sub-program, next
  };

 private:
  bool run(int32_t pc, std::span<const Cp> t, size_t pos, size_t& end) const;

  std::vector<Class> classes_;
  std::vector<Inst> prog_;
};

}  // namespace weft::model::detail
