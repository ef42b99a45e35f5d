// GPT-2 byte-level BPE (tokenizer.ggml.model = gpt2): the text is split by
// the pre-tokenizer's pattern (written out by hand below, no regex library;
// code point classes from the table in tokenizer_unicode.cpp), each piece's bytes are
// mapped to printable characters by the GPT-2 byte-to-unicode table, and
// adjacent symbols are merged lowest rank first, leftmost on ties
// (tokenizer.ggml.merges, "a b"). With llama3's pre-tokenizer a piece that is
// a token as a whole is that token without merging (ignore_merges, as in the
// Llama 3 tokenizer.json and llama.cpp).
#include <algorithm>
#include <array>
#include <climits>
#include <queue>
#include <span>

#include "tokenizer_impl.h"
#include "weft/core/error.h"

namespace weft::model::detail {

namespace {

// --- UTF-8 ------------------------------------------------------------------

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

// One code point per entry with its byte span and class; an invalid byte
// stands alone (code point 0xFFFD for classification, its own byte for output).
struct Cp {
  uint32_t cp;
  size_t pos, len;
  CpClass cls;
};

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
    out.push_back({cp, i, len, cp_class(cp)});
    i += len;
  }
  return out;
}

}  // namespace

CpClass cp_class(uint32_t cp) {
  if (cp > 0x10FFFF) return CpClass::other;
  const uint32_t* end = kCodePointRuns + kCodePointRunCount;
  const uint32_t* run = std::upper_bound(kCodePointRuns, end, (cp << 2) | 3) - 1;  // entry 0 starts at 0
  return static_cast<CpClass>(*run & 3);
}

namespace {

uint32_t lower_ascii(uint32_t c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

// --- pre-tokenizers ---------------------------------------------------------

// 's 't 're 've 'm 'll 'd at i: the match length, or 0.
size_t match_contraction(std::span<const Cp> t, size_t i, bool ignore_case) {
  if (t[i].cp != '\'' || i + 1 >= t.size()) return 0;
  auto at = [&](size_t k) { return k < t.size() ? (ignore_case ? lower_ascii(t[k].cp) : t[k].cp) : 0u; };
  uint32_t a = at(i + 1), b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

// The whitespace alternatives shared by all patterns, at a space code point i:
// \s+(?!\S) then \s+ (llama3/qwen2 first try \s*[\r\n]+).
size_t match_space(std::span<const Cp> t, size_t i, bool newline_rule) {
  size_t end = i;
  while (end < t.size() && t[end].cls == CpClass::space) ++end;
  if (newline_rule) {
    size_t last_nl = 0;
    for (size_t k = i; k < end; ++k)
      if (t[k].cp == '\r' || t[k].cp == '\n') last_nl = k + 1;
    if (last_nl) return last_nl - i;
  }
  if (end == t.size() || end - i == 1) return end - i;  // (?!\S) holds at the end; a single space falls to \s+
  return end - 1 - i;                                   // leave the last space for the next word
}

// gpt2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(std::span<const Cp> t, size_t i) {
  if (size_t n = match_contraction(t, i, false)) return n;
  size_t j = i + (t[i].cp == ' ' && i + 1 < t.size() ? 1 : 0);
  const CpClass cls = t[j].cls;
  if (cls != CpClass::space) {
    size_t k = j;
    while (k < t.size() && t[k].cls == cls) ++k;
    return k - i;
  }
  return match_space(t, i, false);
}

// llama3 (digits 3 at a time) and qwen2 (digits 1 at a time):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(std::span<const Cp> t, size_t i, size_t max_digits) {
  const size_t n = t.size();
  if (size_t m = match_contraction(t, i, true)) return m;
  const uint32_t c = t[i].cp;
  const CpClass cls = t[i].cls;
  size_t j = i;
  if (cls != CpClass::letter && cls != CpClass::number && c != '\r' && c != '\n' && i + 1 < n &&
      t[i + 1].cls == CpClass::letter)
    j = i + 1;
  if (t[j].cls == CpClass::letter) {
    while (j < n && t[j].cls == CpClass::letter) ++j;
    return j - i;
  }
  if (cls == CpClass::number) {
    size_t k = i;
    while (k < n && k - i < max_digits && t[k].cls == CpClass::number) ++k;
    return k - i;
  }
  j = i + (c == ' ' && i + 1 < n ? 1 : 0);
  if (t[j].cls == CpClass::other) {
    while (j < n && t[j].cls == CpClass::other) ++j;
    while (j < n && (t[j].cp == '\r' || t[j].cp == '\n')) ++j;
    return j - i;
  }
  return match_space(t, i, true);
}

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

// Calls fn(piece) for each piece of text in order; the pieces cover text.
template <typename Fn>
void for_each_piece(std::string_view text, PreTokenizer pre, Fn&& fn) {
  const std::vector<Cp> t = split_utf8(text);
  size_t run_end = 0;  // digits_gpt2: the end of the run without \p{N} that i is in
  for (size_t i = 0; i < t.size();) {
    size_t n = 0;
    switch (pre) {
      case PreTokenizer::gpt2: n = match_gpt2(t, i); break;
      case PreTokenizer::llama3:
      case PreTokenizer::qwen2: n = match_llama3(t, i, pre == PreTokenizer::qwen2 ? 1 : 3); break;
      case PreTokenizer::digits_gpt2:
        // \p{N} first: each number code point is a piece, and the gpt2
        // pattern splits each run between them as a text of its own (so
        // \s+(?!\S) sees the run's end as the end of text).
        if (t[i].cls == CpClass::number) {
          n = 1;
          break;
        }
        if (run_end <= i)
          for (run_end = i; run_end < t.size() && t[run_end].cls != CpClass::number;) ++run_end;
        n = match_gpt2(std::span<const Cp>(t).first(run_end), i);
        break;
    }
    if (n == 0) n = 1;  // cannot happen with these patterns; never loop
    const size_t pos = t[i].pos, end = t[i + n - 1].pos + t[i + n - 1].len;
    fn(text.substr(pos, end - pos));
    i += n;
  }
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

// tokenizer.ggml.pre names with the split llama.cpp (src/llama-vocab.cpp)
// gives them; "gpt2" is weft's own name for GPT-2's pattern.
struct PreTokenizerName {
  std::string_view name;
  PreTokenizer pre;
};
constexpr PreTokenizerName kPreTokenizerNames[] = {
    {"gpt2", PreTokenizer::gpt2},
    {"gpt-2", PreTokenizer::gpt2},
    {"phi-2", PreTokenizer::gpt2},
    {"mpt", PreTokenizer::gpt2},
    {"olmo", PreTokenizer::gpt2},
    {"llama-bpe", PreTokenizer::llama3},
    {"llama3", PreTokenizer::llama3},
    {"llama-v3", PreTokenizer::llama3},
    {"qwen2", PreTokenizer::qwen2},
    {"deepseek-r1-qwen", PreTokenizer::qwen2},
    {"stablelm2", PreTokenizer::qwen2},
    {"smollm", PreTokenizer::digits_gpt2},
    {"starcoder", PreTokenizer::digits_gpt2},
    {"refact", PreTokenizer::digits_gpt2},
    {"command-r", PreTokenizer::digits_gpt2},
    {"codeshell", PreTokenizer::digits_gpt2},
    {"exaone", PreTokenizer::digits_gpt2},
    {"minerva-7b", PreTokenizer::digits_gpt2},
};

const PreTokenizerName* find_pre_tokenizer(std::string_view name) {
  for (const PreTokenizerName& p : kPreTokenizerNames)
    if (p.name == name) return &p;
  return nullptr;
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

  d.pre = PreTokenizer::gpt2;
  d.warning.clear();
  if (const PreTokenizerName* known = find_pre_tokenizer(pre)) {
    d.pre = known->pre;
  } else {
    const std::string what = pre.empty()        ? "the file has no tokenizer.ggml.pre"
                             : pre == "default" ? "tokenizer.ggml.pre 'default' does not name the model's pre-tokenizer"
                                                : "tokenizer.ggml.pre '" + pre + "' is not known to weft";
    d.warning = what + ": using gpt2's pre-tokenizer, so tokens may differ from the model's own";
  }
  d.ignore_merges = d.pre == PreTokenizer::llama3;
}

std::vector<std::string> bpe_pretokenize(std::string_view text, PreTokenizer pre) {
  std::vector<std::string> out;
  for_each_piece(text, pre, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text) {
  const ByteTable& table = byte_table();
  std::vector<int32_t> out;
  std::vector<Node> nodes;
  std::string mapped;
  for_each_piece(text, d.pre, [&](std::string_view piece) {
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
