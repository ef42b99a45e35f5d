// GPT-2 byte-level BPE (tokenizer.ggml.model = gpt2): the text is split by
// the pre-tokenizer's rule (tokenizer_pre.cpp), each piece's bytes are
// mapped to printable characters by the GPT-2 byte-to-unicode table, and
// adjacent symbols are merged lowest rank first, leftmost on ties
// (tokenizer.ggml.merges, "a b"). With some rules (llama3's, tekken's) a
// piece that is a token as a whole is that token without merging
// (ignore_merges, as in those models' tokenizer.json and llama.cpp).
#include <algorithm>
#include <array>
#include <climits>
#include <queue>
#include <span>

#include "tokenizer_impl.h"
#include "tokenizer_pre.h"
#include "weft/core/error.h"

namespace weft::model::detail {

namespace {

// --- UTF-8 ------------------------------------------------------------------


}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<Cp> split_utf8(std::string_view s) {
  std::vector<Cp> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = utf8_len(c);
    uint32_t cp = 0xFFFD;
    bool ok = len <= s.size() - i && (len > 1 || c < 0x80);  // a stray continuation byte is invalid
    if (ok && len == 1) cp = c;
    if (ok && len > 1) {
      cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) {
        unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (cc & 0x3F);
      }
    }
    if (!ok) {
      cp = 0xFFFD;
      len = 1;
    }
    const uint8_t props = cp_props(cp);
    out.push_back({cp, i, len, props, cp_class_of(props)});
    i += len;
  }
  return out;
}

uint8_t cp_props(uint32_t cp) {
  if (cp > 0x10FFFF) return 0;
  const uint32_t* end = kCodePointRuns + kCodePointRunCount;
  const uint32_t* run = std::upper_bound(kCodePointRuns, end, (cp << 5) | 31) - 1;  // entry 0 starts at 0
  return static_cast<uint8_t>(*run & 31);
}

namespace {

// --- the GPT-2 byte <-> unicode table ---------------------------------------

struct ByteTable {
  std::array<std::string, 256> to_unicode;  // byte -> UTF-8 of its printable stand-in
  std::array<int, 0x144> to_byte;           // stand-in code point -> byte, or -1
  ByteTable() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_unicode[b], cp);
      to_byte[cp] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;  // constant after its (thread-safe) construction
  return table;
}

// --- merging ----------------------------------------------------------------

// A symbol of the piece being merged, in a doubly linked list; sym is -1 once
// merged into the symbol before it.
struct Node {
  int32_t sym, prev, next;
};

// An adjacent pair that a merge applies to, as it was when pushed, and the
// symbol the merge makes; popped lowest rank first, leftmost (by the left
// node's index) on ties.
struct Candidate {
  int32_t rank, left, right, left_sym, right_sym, result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

// Appends the ids of one symbol: its token, or when a merge made a string
// that is not a token, the tokens of its characters (or unk).
void emit_symbol(const TokenizerData& d, int32_t sym, std::vector<int32_t>& out) {
  if (static_cast<size_t>(sym) < d.tokens.size()) {
    out.push_back(sym);
    return;
  }
  const std::string& s = d.extra_symbols[sym - d.tokens.size()];
  for (const Cp& c : split_utf8(s)) {
    int32_t id = d.find(std::string_view(s).substr(c.pos, c.len));
    if (id >= 0)
      out.push_back(id);
    else if (d.unk >= 0)
      out.push_back(d.unk);
  }
}

// Merges one piece's bytes and appends the ids. Each step merges the pair
// with the lowest rank, leftmost on ties, among the current adjacent pairs:
// the heap holds every pair made so far, and a popped pair whose nodes have
// changed since it was pushed is skipped. O(n log n) in the piece's length.
void merge_piece(const TokenizerData& d, std::string_view piece, std::vector<Node>& nodes, std::vector<int32_t>& out) {
  nodes.clear();
  for (size_t k = 0; k < piece.size(); ++k) {
    const int32_t k32 = static_cast<int32_t>(k);
    nodes.push_back(
        {d.byte_symbols[static_cast<unsigned char>(piece[k])], k32 - 1, k + 1 < piece.size() ? k32 + 1 : -1});
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    auto it = d.merges.find(TokenizerData::pair_key(nodes[left].sym, nodes[right].sym));
    if (it != d.merges.end())
      heap.push({it->second.rank, left, right, nodes[left].sym, nodes[right].sym, it->second.result});
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(nodes.size()); ++k) push(k, k + 1);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Node& l = nodes[c.left];
    if (l.sym != c.left_sym || l.next != c.right || nodes[c.right].sym != c.right_sym) continue;  // stale
    Node& r = nodes[c.right];
    l.sym = c.result;
    l.next = r.next;
    if (r.next >= 0) nodes[r.next].prev = c.left;
    r.sym = -1;
    push(l.prev, c.left);
    push(c.left, l.next);
  }
  for (int32_t k = nodes.empty() ? -1 : 0; k >= 0; k = nodes[k].next) emit_symbol(d, nodes[k].sym, out);
}

}  // namespace

void bpe_load(TokenizerData& d, const std::vector<std::string>& merges, const std::string& pre) {
  const size_t n = d.tokens.size();
  StringMap extra;  // strings that are not tokens -> symbol id
  auto intern = [&](std::string_view s) {
    if (int32_t id = d.find(s); id >= 0) return id;
    if (auto it = extra.find(s); it != extra.end()) return it->second;
    if (n + d.extra_symbols.size() >= static_cast<size_t>(INT32_MAX))
      fail(ErrorKind::invalid_input, "tokenizer", "tokenizer.ggml.merges name too many symbols");
    const int32_t id = static_cast<int32_t>(n + d.extra_symbols.size());
    d.extra_symbols.emplace_back(s);
    extra.emplace(std::string(s), id);
    return id;
  };
  const ByteTable& table = byte_table();
  for (int b = 0; b < 256; ++b) d.byte_symbols[b] = intern(table.to_unicode[b]);

  d.merges.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || i > static_cast<size_t>(INT32_MAX))
      fail(ErrorKind::invalid_input, "tokenizer",
           "tokenizer.ggml.merges[" + std::to_string(i) + "] '" + m + "' is not 'a b'");
    joined.assign(m, 0, sp).append(m, sp + 1);
    const int32_t left = intern(std::string_view(m).substr(0, sp));
    const int32_t right = intern(std::string_view(m).substr(sp + 1));
    const int32_t result = intern(joined);
    d.merges.emplace(TokenizerData::pair_key(left, right), BpeMerge{static_cast<int32_t>(i), result});  // first wins
  }

  d.warning.clear();
  d.pre = find_pre_tokenizer(pre);
  if (!d.pre) {
    // As llama.cpp: its own "default" rule for a file without the key (or
    // with "default"); for a name it does not know llama.cpp refuses the
    // file, weft splits as GPT-2 does.
    const bool unnamed = pre.empty() || pre == "default";
    d.pre = unnamed ? &default_pre_tokenizer() : &unknown_pre_tokenizer();
    const std::string what = pre.empty()        ? "the file has no tokenizer.ggml.pre"
                             : pre == "default" ? "tokenizer.ggml.pre 'default' does not name the model's pre-tokenizer"
                                                : "tokenizer.ggml.pre '" + pre + "' is not known to weft";
    d.warning = what + ": using " + (unnamed ? "llama.cpp's default" : "gpt2's") +
                " pre-tokenizer, so tokens may differ from the model's own";
  }
  d.ignore_merges = d.pre->ignore_merges;
}

std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text) {
  const ByteTable& table = byte_table();
  std::vector<int32_t> out;
  std::vector<Node> nodes;
  std::string mapped;
  for_each_piece(text, *d.pre, [&](std::string_view piece) {
    if (d.ignore_merges) {
      mapped.clear();
      for (char c : piece) mapped += table.to_unicode[static_cast<unsigned char>(c)];
      if (int32_t id = d.find(mapped); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    merge_piece(d, piece, nodes, out);
  });
  return out;
}

std::string bpe_decode_token(const TokenizerData& d, int32_t id) {
  const std::string& t = d.tokens[id];
  if (d.types[id] == static_cast<int32_t>(TokenType::user_defined)) return t;  // stored as plain text
  const ByteTable& table = byte_table();
  std::string out;
  for (const Cp& c : split_utf8(t)) {
    int b = c.cp < table.to_byte.size() ? table.to_byte[c.cp] : -1;
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(t, c.pos, c.len);  // not a stand-in: pass through
  }
  return out;
}

}  // namespace weft::model::detail
