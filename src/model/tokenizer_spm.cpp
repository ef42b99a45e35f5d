// SentencePiece-style encoding (tokenizer.ggml.model = llama): spaces become
// U+2581, the text is split into UTF-8 characters, and the adjacent pair whose
// concatenation is a normal or user-defined token with the highest score is
// merged until none is left (ties go to the leftmost pair). A final symbol
// that is no such token becomes its bytes as <0xXX> tokens (or the unknown
// token). Control, unknown, unused and byte tokens are never merged into, as
// in SentencePiece, so plain text cannot spell them.
#include <queue>

#include "tokenizer_impl.h"

namespace weft::model::detail {

namespace {


// The token spelled s that merging may produce, or -1.
int32_t find_piece(const TokenizerData& d, std::string_view s) {
  const int32_t id = d.find(s);
  return id >= 0 && (d.has_type(id, TokenType::normal) || d.has_type(id, TokenType::user_defined)) ? id : -1;
}

struct Symbol {
  int prev, next;   // -1 at the ends
  size_t pos, len;  // into the normalised text; len 0 once merged away
};

struct Bigram {
  int left, right;
  float score;
  size_t len;                              // of the merged piece, to notice a pair that changed since
  bool operator<(const Bigram& o) const {  // priority_queue: the top is the largest
    if (score != o.score) return score < o.score;
    return left > o.left;
  }
};

}  // namespace

std::vector<int32_t> spm_encode(const TokenizerData& d, std::string_view text) {
  std::vector<int32_t> out;
  if (text.empty()) return out;
  std::string s;
  s.reserve(text.size() * 3 + 3);
  if (d.add_space_prefix) s += kPhantomSpace;
  for (char c : text) {
    if (c == ' ')
      s += kPhantomSpace;
    else
      s += c;
  }

  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = std::min(utf8_len(static_cast<unsigned char>(s[pos])), s.size() - pos);
    int i = static_cast<int>(sym.size());
    sym.push_back({i - 1, -1, pos, len});
    if (i > 0) sym[i - 1].next = i;
    pos += len;
  }

  std::priority_queue<Bigram> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string_view piece(s.data() + sym[left].pos, sym[left].len + sym[right].len);
    int32_t id = find_piece(d, piece);
    if (id < 0) return;
    queue.push({left, right, d.scores[id], piece.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len || l.next != b.right) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }

  for (int i = 0; i >= 0 && !sym.empty(); i = sym[i].next) {
    std::string_view piece(s.data() + sym[i].pos, sym[i].len);
    int32_t id = find_piece(d, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      int32_t b = d.byte_ids[static_cast<unsigned char>(c)];
      if (b >= 0)
        out.push_back(b);
      else if (d.unk >= 0)
        out.push_back(d.unk);
    }
  }
  return out;
}

std::string spm_decode_token(const TokenizerData& d, int32_t id) {
  const std::string& t = d.tokens[id];
  if (d.types[id] == static_cast<int32_t>(TokenType::byte)) {
    // "<0xXX>"
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                    : -1;
    };
    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0)
      return std::string(1, static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
    return t;
  }
  return phantom_to_spaces(t);
}

std::string phantom_to_spaces(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, kPhantomSpace.size(), kPhantomSpace) == 0) {
      out += ' ';
      i += kPhantomSpace.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

}  // namespace weft::model::detail
