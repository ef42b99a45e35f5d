// Lexer: splits the source into text and tags, applies whitespace control,
// and tokenizes the expressions inside tags.
#include "serve/template/jinja_lexer.h"

#include <cctype>

#include "weft/core/error.h"

namespace weft::serve::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

[[noreturn]] void syntax_error(int line, const std::string& what) {
  fail(ErrorKind::invalid_input, "chat_template", "line " + std::to_string(line) + ": " + what);
}

// Appends the UTF-8 encoding of code point cp.
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      std::size_t tag = find_tag(pos_);
      emit_text(pos_, tag);
      if (tag == src_.size()) break;
      lex_tag(tag);
    }
    push(Token::Kind::eof, "");
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  // The text [begin, end) before a tag at `end`, with the previous tag's
  // right-side rule and this tag's left-side rule applied.
  void emit_text(std::size_t begin, std::size_t end) {
    if (strip_next_) {
      while (begin < end && is_space(src_[begin])) ++begin;
    } else if (trim_newline_ && begin < end && src_[begin] == '\n') {
      ++begin;
    }
    strip_next_ = trim_newline_ = false;
    std::size_t stop = end;
    if (end < src_.size()) {
      char kind = src_[end + 1], modifier = end + 2 < src_.size() ? src_[end + 2] : '\0';
      if (modifier == '-') {
        while (stop > begin && is_space(src_[stop - 1])) --stop;
      } else if (modifier != '+' && (kind == '%' || kind == '#')) {  // lstrip_blocks
        std::size_t s = stop;
        while (s > begin && (src_[s - 1] == ' ' || src_[s - 1] == '\t')) --s;
        if ((s > begin && src_[s - 1] == '\n') || (s == begin && (s == 0 || src_[s - 1] == '\n'))) stop = s;
      }
    }
    if (stop > begin) push(Token::Kind::text, src_.substr(begin, stop - begin));
    line_ += count_lines(pos_, end);
    pos_ = end;
  }

  int count_lines(std::size_t a, std::size_t b) const {
    int n = 0;
    for (std::size_t i = a; i < b && i < src_.size(); ++i) n += src_[i] == '\n';
    return n;
  }

  void lex_tag(std::size_t at) {
    char kind = src_[at + 1];
    pos_ = at + 2;
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    if (kind == '#') {
      std::size_t close = src_.find("#}", pos_);
      if (close == std::string::npos) syntax_error(line_, "unterminated comment");
      line_ += count_lines(pos_, close);
      finish_tag(close, close + 2, true);
      return;
    }
    std::size_t first = tokens_.size();
    push(kind == '{' ? Token::Kind::var_begin : Token::Kind::block_begin, "");
    int start_line = line_;
    lex_expression(kind == '{' ? '}' : '%', start_line);
    if (kind == '%' && tokens_.size() == first + 3 && tokens_[first + 1].kind == Token::Kind::name &&
        tokens_[first + 1].text == "raw") {
      tokens_.resize(first);
      lex_raw_body(start_line);
    }
  }

  // Records the tag end: close is where the closer ("}}", "%}", "#}") starts,
  // after its end; the char before close may be a '-' or '+' modifier.
  void finish_tag(std::size_t close, std::size_t after, bool block_like) {
    char modifier = close > 0 ? src_[close - 1] : '\0';
    if (modifier == '-') strip_next_ = true;
    else if (block_like && modifier != '+') trim_newline_ = true;
    pos_ = after;
  }

  void lex_raw_body(int start_line) {
    std::size_t body = pos_;
    for (std::size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 2)) {
      std::size_t p = at + 2;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      if (src_.compare(p, 2, "%}") != 0) continue;
      emit_text(body, at);
      line_ += count_lines(at, p);
      finish_tag(p, p + 2, true);
      return;
    }
    syntax_error(start_line, "unterminated raw block");
  }

  void lex_expression(char closer, int start_line) {
    int depth = 0;  // open brackets: "}}" inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) syntax_error(start_line, "unterminated tag");
      char c = src_[pos_];
      auto at_close = [&](std::size_t p) { return src_.compare(p, 2, std::string{closer, '}'}) == 0; };
      if ((c == '-' || c == '+') && depth == 0 && at_close(pos_ + 1)) {
        finish_tag(pos_ + 1, pos_ + 3, closer == '%');
        break;
      }
      if (depth == 0 && at_close(pos_)) {
        finish_tag(pos_, pos_ + 2, closer == '%');
        break;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t b = pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        push(Token::Kind::name, src_.substr(b, pos_ - b));
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* const ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        const char* match = nullptr;
        for (const char* op : ops)
          if (src_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
            match = op;
            break;
          }
        if (!match) syntax_error(line_, std::string("unexpected character '") + c + "'");
        std::string op = match;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        push(Token::Kind::op, op);
      }
    }
    push(closer == '}' ? Token::Kind::var_end : Token::Kind::block_end, "");
  }

  void lex_number() {
    std::size_t b = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        is_float = true;
        pos_ = p;
        digits();
      }
    }
    std::string text;
    for (std::size_t i = b; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Token::Kind::floating : Token::Kind::integer, text, line_};
    try {
      if (is_float) t.floating = std::stod(text);
      else t.integer = std::stoll(text);
    } catch (const std::exception&) {
      syntax_error(line_, "number literal out of range: " + text);
    }
    tokens_.push_back(std::move(t));
  }

  void lex_string(char quote) {
    int start_line = line_;
    std::string out;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) syntax_error(start_line, "unterminated string literal");
      char c = src_[pos_++];
      if (c == quote) break;
      line_ += c == '\n';
      if (c != '\\' || pos_ >= src_.size()) {
        out += c;
        continue;
      }
      char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\\': case '\'': case '"': out += e; break;
        case '\n': ++line_; break;  // a line continuation
        case 'x': case 'u': case 'U': {
          std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) syntax_error(line_, "truncated \\" + std::string(1, e) + " escape");
          std::uint32_t cp = 0;
          for (std::size_t i = 0; i < n; ++i) {
            char h = src_[pos_ + i];
            if (!std::isxdigit(static_cast<unsigned char>(h))) syntax_error(line_, "bad \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10ffff) syntax_error(line_, "escape out of range");
          pos_ += n;
          append_utf8(out, cp);
          break;
        }
        default: out += '\\'; out += e;  // Python keeps unknown escapes
      }
    }
    push(Token::Kind::string, std::move(out));
  }

  void push(Token::Kind kind, std::string text) { tokens_.push_back(Token{kind, std::move(text), line_}); }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool strip_next_ = false;    // the previous tag ended with '-'
  bool trim_newline_ = false;  // the previous tag was a block or comment (trim_blocks)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  // As Jinja2 reads a template: newlines normalized to "\n", one trailing newline dropped.
  std::string src;
  src.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace weft::serve::detail
