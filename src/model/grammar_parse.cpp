// GBNF text into a Grammar (grammar.h): rules, alternatives, literals,
// character classes, groups and the repetition operators * + ? {m} {m,}
// {m,n}, which become helper rules here. Errors name the line and column.
#include <algorithm>
#include <map>
#include <string>

#include "weft/core/error.h"
#include "weft/model/grammar.h"

namespace weft::model {

namespace {
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
}

bool Grammar::CharClass::contains(uint32_t cp) const {
  bool in;
  if (cp < 128) {
    in = (ascii[cp >> 6] >> (cp & 63)) & 1;
    return in;  // ascii already accounts for negation
  }
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  in = it != ranges.begin() && std::prev(it)->second >= cp;
  return in != negated;
}

bool Grammar::CharClass::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& r : ranges)
      if (r.first <= hi && r.second >= lo) return true;
    return false;
  }
  // Ranges are merged (disjoint, non-adjacent): [lo, hi] lies outside the
  // set only when one range covers it whole.
  for (const auto& r : ranges)
    if (r.first <= lo && r.second >= hi) return false;
  return true;
}

// Builds a Grammar while reading the text (friend of Grammar).
class GrammarBuilder {
 public:
  GrammarBuilder(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {
    g_.reset(new Grammar());
    g_->limits_ = limits;
  }

  std::shared_ptr<const Grammar> build() {
    if (s_.size() > limits_.max_text_bytes)
      error(0, "the grammar is " + std::to_string(s_.size()) + " bytes, more than the limit of " +
                   std::to_string(limits_.max_text_bytes));
    skip_space(true);
    while (p_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    auto root = ids_.find("root");
    if (root == ids_.end() || !defined_[static_cast<size_t>(root->second)]) error(s_.size(), "no rule named 'root'");
    for (size_t r = 0; r < names_.size(); ++r)
      if (!defined_[r]) error(first_use_[r], "rule '" + names_[r] + "' is used but never defined");
    g_->root_ = root->second;
    flatten();
    check_left_recursion();
    return std::move(g_);
  }

 private:
  using Seq = std::vector<Grammar::Element>;

  [[noreturn]] void error(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    fail(ErrorKind::invalid_input, "grammar",
         "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  bool at_end() const { return p_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return p_ + ahead < s_.size() ? s_[p_ + ahead] : '\0'; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) ++p_;
      else if (c == '#') {
        while (!at_end() && s_[p_] != '\n') ++p_;
      } else break;
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = p_;
    while (!at_end() && name_char(s_[p_])) ++p_;
    if (p_ == start) error(p_, std::string("expected a rule name, found ") + describe(peek()));
    return std::string(s_.substr(start, p_ - start));
  }

  static std::string describe(char c) {
    if (c == '\0') return "the end of the text";
    if (c == '\n') return "a newline";
    return std::string("'") + c + "'";
  }

  int32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, fresh] = ids_.emplace(name, static_cast<int32_t>(names_.size()));
    if (fresh) new_rule(name, used_at);
    return it->second;
  }

  int32_t new_rule(const std::string& name, size_t at) {
    names_.push_back(name);
    defined_.push_back(false);
    first_use_.push_back(at);
    rules_.emplace_back();
    return static_cast<int32_t>(names_.size() - 1);
  }

  void count(size_t n, size_t at) {
    elements_ += n;
    if (elements_ > limits_.max_elements)
      error(at, "the grammar compiles to more than " + std::to_string(limits_.max_elements) +
                    " elements (repetition counts multiply rules)");
  }

  void parse_rule() {
    const size_t at = p_;
    const std::string name = parse_name();
    skip_space(false);
    if (s_.substr(p_, 3) != "::=") error(p_, "expected '::=' after rule name '" + name + "'");
    p_ += 3;
    const int32_t id = rule_id(name, at);
    if (defined_[static_cast<size_t>(id)]) error(at, "rule '" + name + "' is defined twice");
    defined_[static_cast<size_t>(id)] = true;
    skip_space(true);
    rules_[static_cast<size_t>(id)] = parse_alternatives(name, 0);
    skip_space(false);
    if (!at_end() && peek() != '\n') error(p_, "expected the end of the line after rule '" + name + "', found " + describe(peek()));
  }

  std::vector<Seq> parse_alternatives(const std::string& rule, int depth) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(rule, depth));
    while (peek() == '|') {
      ++p_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, depth));
    }
    return alts;
  }

  // Reads one character of a literal or class, with the escapes \n \r \t
  // \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; the raw bytes are UTF-8.
  uint32_t parse_char() {
    const size_t at = p_;
    if (at_end()) error(at, "unexpected end of the text inside a literal or class");
    const auto c = static_cast<unsigned char>(s_[p_]);
    if (c == '\\') {
      ++p_;
      const char e = peek();
      ++p_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2, at);
        case 'u': return parse_hex(4, at);
        case 'U': return parse_hex(8, at);
        default: error(at, std::string("unknown escape '\\") + (e ? std::string(1, e) : std::string()) + "'");
      }
    }
    // A UTF-8 character.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || p_ + static_cast<size_t>(len) > s_.size()) error(at, "invalid UTF-8 in the grammar text");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(s_[p_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) error(at, "invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (b & 0x3F);
    }
    p_ += static_cast<size_t>(len);
    return cp;
  }

  uint32_t parse_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++p_) {
      const char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) error(at, "expected " + std::to_string(digits) + " hex digits after the escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint) error(at, "code point beyond U+10FFFF");
    return v;
  }

  int32_t add_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
    std::sort(ranges.begin(), ranges.end());
    Grammar::CharClass c;
    c.negated = negated;
    for (const auto& r : ranges) {  // merge overlapping and adjacent ranges
      if (!c.ranges.empty() && r.first <= c.ranges.back().second + 1)
        c.ranges.back().second = std::max(c.ranges.back().second, r.second);
      else c.ranges.push_back(r);
    }
    for (uint32_t cp = 0; cp < 128; ++cp) {
      bool in = false;
      for (const auto& r : c.ranges) in = in || (cp >= r.first && cp <= r.second);
      if (in != negated) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
    }
    g_->classes_.push_back(std::move(c));
    return static_cast<int32_t>(g_->classes_.size() - 1);
  }

  Grammar::Element chars(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
    return {Grammar::Element::chars, add_class(std::move(ranges), negated)};
  }

  Seq parse_sequence(const std::string& rule, int depth) {
    Seq seq;
    size_t last_start = 0;  // where the last symbol began in seq (what a repetition repeats)
    bool have_symbol = false;
    while (!at_end()) {
      const size_t at = p_;
      const char c = peek();
      if (c == '"') {
        ++p_;
        last_start = seq.size();
        while (peek() != '"') {
          if (at_end() || peek() == '\n') error(at, "unterminated literal");
          const uint32_t cp = parse_char();
          seq.push_back(chars({{cp, cp}}, false));
        }
        ++p_;
        have_symbol = true;
        if (seq.size() == last_start) have_symbol = false;  // "" matches the empty text
      } else if (c == '[') {
        ++p_;
        const bool negated = peek() == '^';
        if (negated) ++p_;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (peek() != ']') {
          if (at_end()) error(at, "unterminated character class");
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && p_ + 1 < s_.size()) {
            ++p_;
            hi = parse_char();
            if (hi < lo) error(at, "character range with its end before its start");
          }
          ranges.emplace_back(lo, hi);
        }
        ++p_;
        last_start = seq.size();
        seq.push_back(chars(std::move(ranges), negated));
        have_symbol = true;
      } else if (c == '.') {
        ++p_;
        last_start = seq.size();
        seq.push_back(chars({}, true));
        have_symbol = true;
      } else if (c == '(') {
        ++p_;
        if (depth + 1 > limits_.max_nesting)
          error(at, "parentheses nested deeper than " + std::to_string(limits_.max_nesting));
        skip_space(true);
        const int32_t sub = new_rule(rule + "-group", at);
        defined_[static_cast<size_t>(sub)] = true;
        rules_[static_cast<size_t>(sub)] = parse_alternatives(rule, depth + 1);
        if (peek() != ')') error(p_, std::string("expected ')' to close the group, found ") + describe(peek()));
        ++p_;
        last_start = seq.size();
        seq.push_back({Grammar::Element::rule, sub});
        have_symbol = true;
      } else if (name_char(c)) {
        const std::string name = parse_name();
        last_start = seq.size();
        seq.push_back({Grammar::Element::rule, rule_id(name, at)});
        have_symbol = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_symbol) error(at, std::string("'") + c + "' repeats nothing");
        repeat(seq, last_start, rule, at);
        have_symbol = false;  // x** is an error, as in llama.cpp
      } else {
        break;
      }
      count(1, at);
      skip_space(depth > 0);
    }
    return seq;
  }

  // Reads the operator at p_ and replaces seq[from..] (the last symbol)
  // with its repetition.
  void repeat(Seq& seq, size_t from, const std::string& rule, size_t at) {
    int min_n = 0, max_n = -1;  // -1: unbounded
    const char op = peek();
    ++p_;
    if (op == '+') min_n = 1;
    else if (op == '?') max_n = 1;
    else if (op == '{') {
      skip_space(false);
      min_n = parse_count(at);
      skip_space(false);
      if (peek() == ',') {
        ++p_;
        skip_space(false);
        if (peek() != '}') max_n = parse_count(at);
      } else max_n = min_n;
      skip_space(false);
      if (peek() != '}') error(p_, std::string("expected '}' to close the repetition, found ") + describe(peek()));
      ++p_;
      if (max_n >= 0 && max_n < min_n) error(at, "repetition {m,n} with n smaller than m");
    }
    // The symbol as one element: a rule of its own unless it is one already.
    Grammar::Element x;
    if (seq.size() - from == 1) x = seq[from];
    else {
      const int32_t sub = new_rule(rule + "-repeat", at);
      defined_[static_cast<size_t>(sub)] = true;
      rules_[static_cast<size_t>(sub)] = {Seq(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end())};
      x = {Grammar::Element::rule, sub};
    }
    seq.resize(from);
    count(static_cast<size_t>(min_n) + 4 * static_cast<size_t>(max_n < 0 ? 1 : max_n - min_n), at);
    for (int i = 0; i < min_n; ++i) seq.push_back(x);
    if (max_n < 0) {  // star ::= x star | ""
      const int32_t star = new_rule(rule + "-star", at);
      defined_[static_cast<size_t>(star)] = true;
      rules_[static_cast<size_t>(star)] = {Seq{x, {Grammar::Element::rule, star}}, Seq{}};
      seq.push_back({Grammar::Element::rule, star});
    } else if (max_n > min_n) {  // opt_k ::= x opt_{k-1} | "", opt_1 ::= x | ""
      int32_t prev = -1;
      for (int k = 1; k <= max_n - min_n; ++k) {
        const int32_t opt = new_rule(rule + "-opt", at);
        defined_[static_cast<size_t>(opt)] = true;
        Seq first{x};
        if (prev >= 0) first.push_back({Grammar::Element::rule, prev});
        rules_[static_cast<size_t>(opt)] = {first, Seq{}};
        prev = opt;
      }
      seq.push_back({Grammar::Element::rule, prev});
    }
  }

  int parse_count(size_t at) {
    if (!(peek() >= '0' && peek() <= '9')) error(p_, std::string("expected a repetition count, found ") + describe(peek()));
    long long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      ++p_;
      if (v > limits_.max_repeat)
        error(at, "repetition count beyond the limit of " + std::to_string(limits_.max_repeat));
    }
    return static_cast<int>(v);
  }

  // rules_ into the grammar's flat element array: each alternative's
  // elements followed by an end element naming its rule.
  void flatten() {
    g_->rule_alts_.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& alt : rules_[r]) {
        g_->rule_alts_[r].push_back(static_cast<int32_t>(g_->elements_.size()));
        g_->elements_.insert(g_->elements_.end(), alt.begin(), alt.end());
        g_->elements_.push_back({Grammar::Element::end, static_cast<int32_t>(r)});
      }
    }
  }

  // A rule that can reach itself before reading a character would make the
  // matcher expand it forever: refused, naming it.
  void check_left_recursion() {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Seq& alt : rules_[r]) {
          bool all = true;
          for (const auto& e : alt) all = all && e.kind == Grammar::Element::rule && nullable[static_cast<size_t>(e.index)];
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Rules each one may start with, then a colouring depth-first search.
    std::vector<std::vector<int32_t>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r])
        for (const auto& e : alt) {
          if (e.kind != Grammar::Element::rule) break;
          first[r].push_back(e.index);
          if (!nullable[static_cast<size_t>(e.index)]) break;
        }
    std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<size_t, size_t>> stack;
    for (size_t start = 0; start < n; ++start) {
      if (colour[start]) continue;
      stack.push_back({start, 0});
      colour[start] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i == first[r].size()) {
          colour[r] = 2;
          stack.pop_back();
          continue;
        }
        const auto next = static_cast<size_t>(first[r][i++]);
        if (colour[next] == 1)
          error(first_use_[next], "rule '" + names_[next] +
                                      "' is left-recursive (it can reach itself before reading a character)");
        if (colour[next] == 0) {
          colour[next] = 1;
          stack.push_back({next, 0});
        }
      }
    }
  }

  std::string_view s_;
  size_t p_ = 0;
  GrammarLimits limits_;
  std::unique_ptr<Grammar> g_;
  std::map<std::string, int32_t> ids_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::vector<std::vector<Seq>> rules_;
  size_t elements_ = 0;
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, const GrammarLimits& limits) {
  return GrammarBuilder(gbnf, limits).build();
}

}  // namespace weft::model
