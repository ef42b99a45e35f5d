// The lexer: template source -> a flat token stream, as Jinja2's lexer makes
// it. Text between tags becomes text tokens with Hugging Face's whitespace
// rules already applied (trim_blocks: the newline after a block or comment
// tag goes; lstrip_blocks: spaces and tabs before one on its line go; `-` on a
// tag strips all whitespace on that side, `+` turns the default off). Comments
// vanish and {% raw %} bodies become text. Lines are counted from 1.
//
//   for (const Token& t : lex("Hi {{ name }}!")) ...
//   // text "Hi ", var_begin, name "name", var_end, text "!", eof
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::serve::detail {

struct Token {
  enum class Kind { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Kind kind;
  std::string text;  // the text, name, decoded string literal, or operator
  int line = 1;
  std::int64_t integer = 0;
  double floating = 0;
};

// Throws Error(invalid_input, "[chat_template] line N: ...") on a syntax error
// (an unterminated tag or string, an unknown character).
std::vector<Token> lex(std::string_view source);

}  // namespace weft::serve::detail
