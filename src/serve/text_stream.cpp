// TextStream (text_stream.h).
#include "serve/text_stream.h"

#include <algorithm>

namespace weft::serve {

TextStream::TextStream(std::vector<std::string> stop) {
  for (std::string& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
}

bool TextStream::append(std::string_view bytes) {
  if (stopped_) return true;
  // Only a match that ends in the new bytes can be new: search from where
  // the longest stop string could begin.
  size_t longest = 0;
  for (const std::string& s : stop_) longest = std::max(longest, s.size());
  const size_t from = held_.size() > longest ? held_.size() - longest : 0;
  held_.append(bytes);
  size_t first = std::string::npos;
  for (const std::string& s : stop_) first = std::min(first, held_.find(s, from));
  if (first == std::string::npos) return false;
  held_.resize(first);
  stopped_ = true;
  return true;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

std::string TextStream::take_ready() {
  size_t keep = stopped_ ? 0 : incomplete_utf8_tail(held_);
  if (!stopped_) {
    // The longest suffix that is a proper prefix of a stop string.
    for (const std::string& s : stop_)
      for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
  }
  std::string ready = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return ready;
}

std::string TextStream::take_all() {
  std::string all = std::move(held_);
  held_.clear();
  return all;
}

}  // namespace weft::serve
