// The one bracket scanner of JSON texts that the server reads before any
// parser does (a body's nesting, a tool call's extent in a reply): strings
// are skipped (escapes included), and each bracket outside them is handed
// to on_bracket(index, char) in order until it returns false.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::serve {

template <class F>
void scan_json_brackets(std::string_view text, F&& on_bracket) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[' || c == '}' || c == ']') {
      if (!on_bracket(i, c)) return;
    }
  }
}

}  // namespace weft::serve
