// CpRegex: a pattern is parsed into a tree, the tree is compiled into a
// program for a backtracking machine (one instruction per class test,
// choice, jump, lookahead or end test), and the machine runs it with an
// explicit stack of choices still to try.
#include "tokenizer_regex.h"

#include <algorithm>

#include "weft/core/error.h"

namespace weft::model::detail {

namespace {

constexpr const char* kTokenizerRegexWhere = "tokenizer.regex";
constexpr int32_t kUnbounded = -1;
constexpr int32_t kMaxRepeat = 1024;  // {n,m} bounds: the program holds m copies

struct RegexNode {
  enum Kind { cls, seq, alt, repeat, look, end } kind;
  int32_t cls_index = 0;
  std::vector<RegexNode> kids;
  int32_t min = 0, max = 0;  // repeat
  bool negative = false;     // look
};

bool nullable(const RegexNode& n) {
  switch (n.kind) {
    case RegexNode::cls: return false;
    case RegexNode::seq: return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case RegexNode::alt: return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case RegexNode::repeat: return n.min == 0 || nullable(n.kids[0]);
    case RegexNode::look:
    case RegexNode::end: return true;
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<CpRegex::Class>& classes) : pattern_(pattern), classes_(classes) {
    for (const Cp& c : split_utf8(pattern)) cps_.push_back(c.cp);
  }

  RegexNode parse() {
    RegexNode n = alternation();
    if (pos_ != cps_.size()) bad("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(ErrorKind::invalid_input, kTokenizerRegexWhere,
         "pattern '" + std::string(pattern_) + "': " + what + " at code point " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek() const { return at_end() ? 0 : cps_[pos_]; }
  uint32_t next() {
    if (at_end()) bad("unexpected end");
    return cps_[pos_++];
  }
  bool eat(uint32_t c) {
    if (at_end() || cps_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  int32_t add_class(CpRegex::Class c) {
    classes_.push_back(std::move(c));
    return static_cast<int32_t>(classes_.size() - 1);
  }
  RegexNode class_node(CpRegex::Class c) { return RegexNode{RegexNode::cls, add_class(std::move(c)), {}, 0, 0, false}; }

  RegexNode alternation() {
    RegexNode alt{RegexNode::alt, 0, {}, 0, 0, false};
    alt.kids.push_back(sequence());
    while (eat('|')) alt.kids.push_back(sequence());
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  RegexNode sequence() {
    RegexNode seq{RegexNode::seq, 0, {}, 0, 0, false};
    while (!at_end() && peek() != '|' && peek() != ')') seq.kids.push_back(quantified(atom()));
    return seq;
  }

  // A number of a {n,m} quantifier.
  int32_t number() {
    int32_t v = 0;
    if (peek() < '0' || peek() > '9') bad("expected a number");
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<int32_t>(next() - '0');
      if (v > kMaxRepeat) bad("repeat count over " + std::to_string(kMaxRepeat));
    }
    return v;
  }

  RegexNode quantified(RegexNode atom) {
    int32_t min = 0, max = 0;
    if (eat('?')) {
      min = 0, max = 1;
    } else if (eat('*')) {
      min = 0, max = kUnbounded;
    } else if (eat('+')) {
      min = 1, max = kUnbounded;
    } else if (eat('{')) {
      min = max = number();
      if (eat(',')) max = peek() == '}' ? kUnbounded : number();
      if (!eat('}') || (max != kUnbounded && max < min)) bad("bad {n,m}");
    } else {
      return atom;
    }
    if (peek() == '?' || peek() == '+' || peek() == '*') bad("lazy or possessive quantifiers are not supported");
    if (atom.kind == RegexNode::look || atom.kind == RegexNode::end) bad("a quantified assertion");
    if (max == kUnbounded && nullable(atom)) bad("a repeated part that can match nothing");
    RegexNode r{RegexNode::repeat, 0, {}, min, max, false};
    r.kids.push_back(std::move(atom));
    return r;
  }

  RegexNode atom() {
    const uint32_t c = next();
    switch (c) {
      case '(': {
        RegexNode n{RegexNode::seq, 0, {}, 0, 0, false};
        if (eat('?')) {
          const uint32_t k = next();
          if (k == '=' || k == '!') {
            n = RegexNode{RegexNode::look, 0, {}, 0, 0, k == '!'};
            n.kids.push_back(alternation());
          } else if (k == ':') {
            n = alternation();
          } else {
            bad("unsupported group (?" + std::string(1, static_cast<char>(k < 0x80 ? k : '?')));
          }
        } else {
          n = alternation();
        }
        if (!eat(')')) bad("missing ')'");
        return n;
      }
      case '[': return class_node(bracket());
      case '$': return RegexNode{RegexNode::end, 0, {}, 0, 0, false};
      case '\\': return class_node(escape(false));
      case '.':
      case '^':
      case ')':
      case '*':
      case '+':
      case '?':
      case '{': bad("unsupported or misplaced '" + std::string(1, static_cast<char>(c)) + "'");
      default: return class_node(single(c));
    }
  }

  static CpRegex::Class single(uint32_t c) {
    CpRegex::Class k;
    k.ranges.push_back({c, c});
    return k;
  }

  // \p{..} or \P{..} after the p or P.
  uint32_t property() {
    if (!eat('{')) bad("expected '{' after \\p");
    std::string name;
    while (!at_end() && peek() != '}') name += static_cast<char>(next());
    if (!eat('}')) bad("missing '}'");
    auto bit = [](CpCategory c) { return 1u << static_cast<unsigned>(c); };
    if (name == "L")
      return bit(CpCategory::Lu) | bit(CpCategory::Ll) | bit(CpCategory::Lt) | bit(CpCategory::Lm) |
             bit(CpCategory::Lo);
    if (name == "M") return bit(CpCategory::Mn) | bit(CpCategory::Mc_Me);
    static constexpr std::pair<std::string_view, CpCategory> kNames[] = {
        {"Lu", CpCategory::Lu}, {"Ll", CpCategory::Ll}, {"Lt", CpCategory::Lt}, {"Lm", CpCategory::Lm},
        {"Lo", CpCategory::Lo}, {"N", CpCategory::N},   {"P", CpCategory::P},   {"S", CpCategory::S},
    };
    for (const auto& [n, c] : kNames)
      if (n == name) return bit(c);
    bad("unsupported property \\p{" + name + "}");
  }

  // An escape after the backslash; in_class: inside [...], where only
  // positive sets may appear (a negated one would need set difference).
  CpRegex::Class escape(bool in_class) {
    const uint32_t c = next();
    CpRegex::Class k;
    switch (c) {
      case 'r': return single('\r');
      case 'n': return single('\n');
      case 't': return single('\t');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case 's':
      case 'S': k.categories = 1u << 16, k.negated = c == 'S'; break;
      case 'p':
      case 'P': k.categories = property(), k.negated = c == 'P'; break;
      default:
        if (c < 0x80 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
          bad("unsupported escape \\" + std::string(1, static_cast<char>(c)));
        return single(c);
    }
    if (in_class && k.negated) bad("a negated set inside [...]");
    return k;
  }

  // [...] after the '['.
  CpRegex::Class bracket() {
    CpRegex::Class k;
    k.negated = eat('^');
    bool first = true;
    while (first || peek() != ']') {
      first = false;
      uint32_t lo = next();
      if (lo == '[') bad("nested [ in a class");
      if (lo == '\\') {
        CpRegex::Class e = escape(true);
        k.categories |= e.categories;
        if (e.ranges.empty()) continue;
        lo = e.ranges[0].first;
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < cps_.size() && cps_[pos_ + 1] != ']') {
        ++pos_;
        hi = next();
        if (hi == '\\') {
          CpRegex::Class e = escape(true);
          if (e.ranges.empty()) bad("a set as a range's end");
          hi = e.ranges[0].first;
        }
        if (hi < lo) bad("range out of order");
      }
      k.ranges.push_back({lo, hi});
    }
    next();  // ']'
    return k;
  }

  std::string_view pattern_;
  std::vector<CpRegex::Class>& classes_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

// Emits the program for a tree: each emit_* appends instructions and
// leaves targets pointing at the next instruction to come.
class Emitter {
 public:
  explicit Emitter(std::vector<CpRegex::Inst>& prog) : prog_(prog) {}

  void emit(const RegexNode& n) {
    using Op = CpRegex::Op;
    switch (n.kind) {
      case RegexNode::cls: add({Op::cls, false, n.cls_index, 0}); break;
      case RegexNode::seq:
        for (const RegexNode& k : n.kids) emit(k);
        break;
      case RegexNode::alt: {
        std::vector<size_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          size_t split = 0;
          if (i + 1 < n.kids.size()) split = add({Op::split, false, here() + 1, 0});
          emit(n.kids[i]);
          if (i + 1 < n.kids.size()) {
            jumps.push_back(add({Op::jmp, false, 0, 0}));
            prog_[split].y = here();
          }
        }
        for (size_t j : jumps) prog_[j].x = here();
        break;
      }
      case RegexNode::repeat: {
        const RegexNode& body = n.kids[0];
        for (int32_t i = 0; i < n.min; ++i) emit(body);
        if (n.max == kUnbounded) {
          const size_t split = add({Op::split, false, here() + 1, 0});
          emit(body);
          add({Op::jmp, false, static_cast<int32_t>(split), 0});
          prog_[split].y = here();
        } else {
          std::vector<size_t> splits;  // x{n,m}: the optional copies nest, each skipping to the end
          for (int32_t i = n.min; i < n.max; ++i) {
            splits.push_back(add({Op::split, false, here() + 1, 0}));
            emit(body);
          }
          for (size_t s : splits) prog_[s].y = here();
        }
        break;
      }
      case RegexNode::look: {
        const size_t look = add({Op::look, n.negative, here() + 1, 0});
        emit(n.kids[0]);
        add({Op::match, false, 0, 0});
        prog_[look].y = here();
        break;
      }
      case RegexNode::end: add({Op::end, false, 0, 0}); break;
    }
  }

 private:
  int32_t here() const { return static_cast<int32_t>(prog_.size()); }
  size_t add(CpRegex::Inst i) {
    prog_.push_back(i);
    return prog_.size() - 1;
  }
  std::vector<CpRegex::Inst>& prog_;
};

}  // namespace

bool CpRegex::Class::contains(uint32_t cp, uint8_t props) const {
  bool in = (categories >> static_cast<unsigned>(cp_category(props))) & 1u;
  if ((props & kWhiteSpaceBit) && (categories & (1u << 16))) in = true;
  for (size_t i = 0; !in && i < ranges.size(); ++i) in = ranges[i].first <= cp && cp <= ranges[i].second;
  return in != negated;
}

CpRegex::CpRegex(std::string_view pattern) {
  RegexNode root = Parser(pattern, classes_).parse();
  Emitter(prog_).emit(root);
  prog_.push_back({Op::match, false, 0, 0});
}

// Runs the program from pc at t[pos]: true with end set to where the first
// match (by priority) ends. Each choice point pushes its second choice; a
// failed path pops the latest one.
bool CpRegex::run(int32_t pc, std::span<const Cp> t, size_t pos, size_t& end) const {
  std::vector<std::pair<int32_t, size_t>> choices;
  for (;;) {
    const Inst& in = prog_[static_cast<size_t>(pc)];
    bool ok = true;
    switch (in.op) {
      case Op::cls:
        ok = pos < t.size() && classes_[static_cast<size_t>(in.x)].contains(t[pos].cp, t[pos].props);
        if (ok) ++pc, ++pos;
        break;
      case Op::split:
        choices.emplace_back(in.y, pos);
        pc = in.x;
        break;
      case Op::jmp: pc = in.x; break;
      case Op::look: {
        size_t ignored = 0;
        ok = run(in.x, t, pos, ignored) != in.negative;
        pc = in.y;
        break;
      }
      case Op::end:
        ok = pos == t.size();
        ++pc;
        break;
      case Op::match: end = pos; return true;
    }
    if (ok) continue;
    if (choices.empty()) return false;
    std::tie(pc, pos) = choices.back();
    choices.pop_back();
  }
}

ptrdiff_t CpRegex::match_at(std::span<const Cp> t, size_t i) const {
  size_t end = 0;
  if (i > t.size() || !run(0, t, i, end)) return -1;
  return static_cast<ptrdiff_t>(end - i);
}

}  // namespace weft::model::detail
