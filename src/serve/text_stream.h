// The text a request receives as tokens come: decoded bytes are handed over
// only once they are whole UTF-8 characters and cannot be the start of a
// stop string; a stop string ends the text before its first occurrence.
//
//   TextStream t({"\n\n"});
//   bool stop = t.append(tokenizer.decode_token(id));  // true: a stop string came
//   send(t.take_ready());                               // what is final so far
//   send(t.take_all());                                 // at the end: the rest
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace weft::serve {

class TextStream {
 public:
  TextStream() = default;
  // Empty stop strings are ignored.
  explicit TextStream(std::vector<std::string> stop);

  // Adds decoded bytes. Returns true when the text now contains a stop
  // string: everything from its first occurrence on is dropped, and the
  // stream takes nothing more (append returns true again).
  bool append(std::string_view bytes);
  bool stopped() const { return stopped_; }
  // The text that is final: not an incomplete UTF-8 sequence at the end,
  // not a suffix that could begin a stop string. Removed from the stream.
  std::string take_ready();
  // Everything held (at the end of a request), ready or not.
  std::string take_all();

 private:
  std::vector<std::string> stop_;
  std::string held_;
  bool stopped_ = false;
};

// Bytes at the end of s that begin a UTF-8 sequence not yet complete (0-3).
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace weft::serve
