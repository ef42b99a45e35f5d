// GPT-2 byte-level BPE (tokenizer.ggml.model = gpt2): the text is split by
// the pre-tokenizer's pattern (written out by hand below, no regex library),
// each piece's bytes are mapped to printable characters by the GPT-2
// byte-to-unicode table, and adjacent symbols are merged lowest rank first
// (tokenizer.ggml.merges, "a b").
//
// Approximation: \p{L} and \p{N} are exact for ASCII; outside ASCII a code
// point is a digit/number in the common ranges listed in is_number(),
// whitespace per is_space(), punctuation/symbol in the common ranges of
// is_other(), and a letter otherwise. Rare scripts' digits and punctuation
// are therefore taken as letters, which changes where pieces split, never
// the round trip.
#include <array>
#include <climits>

#include "tokenizer_impl.h"

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

// One code point per entry with its byte span; an invalid byte stands alone
// (code point 0xFFFD for classification, its own byte for output).
struct Cp {
  uint32_t cp;
  size_t pos, len;
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
    out.push_back({cp, i, len});
    i += len;
  }
  return out;
}

// --- code point classes (see the approximation above) -----------------------

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_number(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE) ||  // superscripts, fractions
         (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) ||         // Arabic
         (c >= 0x966 && c <= 0x96F) || (c >= 0x9E6 && c <= 0x9EF) ||         // Devanagari, Bengali
         (c >= 0xE50 && c <= 0xE59) ||                                       // Thai
         (c >= 0x2070 && c <= 0x2079) || (c >= 0x2080 && c <= 0x2089) ||     // super/subscripts
         (c >= 0x2150 && c <= 0x2189) || (c >= 0x2460 && c <= 0x249B) ||     // number forms, circled
         (c >= 0x2776 && c <= 0x2793) || c == 0x3007 || (c >= 0x3021 && c <= 0x3029) ||
         (c >= 0xFF10 && c <= 0xFF19);  // fullwidth digits
}

bool is_letter(uint32_t c);

// Neither letter, number nor space.
bool is_other(uint32_t c) {
  if (c < 0x80) return !is_space(c) && !is_number(c) && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  if (is_space(c) || is_number(c)) return false;
  return (c < 0xC0 && c != 0xAA && c != 0xB5 && c != 0xBA) || c == 0xD7 || c == 0xF7 ||  // Latin-1 symbols
         (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) ||                 // general punctuation
         (c >= 0x20A0 && c <= 0x20CF) ||                                                 // currency
         (c >= 0x2190 && c <= 0x245F) || (c >= 0x2500 && c <= 0x2775) ||                 // arrows, math, boxes
         (c >= 0x2794 && c <= 0x2BFF) || (c >= 0x3001 && c <= 0x3006) ||                 // CJK punctuation
         (c >= 0x3008 && c <= 0x3020) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF01 && c <= 0xFF0F) ||
         (c >= 0xFF1A && c <= 0xFF20) ||                 // fullwidth punctuation
         (c >= 0x1F000 && c <= 0x1FAFF) || c == 0xFFFD;  // emoji, replacement
}

bool is_letter(uint32_t c) {
  return !is_space(c) && !is_number(c) && !is_other(c);
}

uint32_t lower_ascii(uint32_t c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

// --- pre-tokenizers ---------------------------------------------------------

// 's 't 're 've 'm 'll 'd at i: the match length, or 0.
size_t match_contraction(const std::vector<Cp>& t, size_t i, bool ignore_case) {
  if (t[i].cp != '\'' || i + 1 >= t.size()) return 0;
  auto at = [&](size_t k) { return k < t.size() ? (ignore_case ? lower_ascii(t[k].cp) : t[k].cp) : 0u; };
  uint32_t a = at(i + 1), b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

// The whitespace alternatives shared by all patterns, at a space code point i:
// \s+(?!\S) then \s+ (llama3/qwen2 first try \s*[\r\n]+).
size_t match_space(const std::vector<Cp>& t, size_t i, bool newline_rule) {
  size_t end = i;
  while (end < t.size() && is_space(t[end].cp)) ++end;
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
size_t match_gpt2(const std::vector<Cp>& t, size_t i) {
  if (size_t n = match_contraction(t, i, false)) return n;
  size_t j = i + (t[i].cp == ' ' && i + 1 < t.size() ? 1 : 0);
  for (bool (*cls)(uint32_t) : {is_letter, is_number, is_other}) {
    if (!cls(t[j].cp)) continue;
    size_t k = j;
    while (k < t.size() && cls(t[k].cp)) ++k;
    return k - i;
  }
  return match_space(t, i, false);
}

// llama3 (digits 3 at a time) and qwen2 (digits 1 at a time):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(const std::vector<Cp>& t, size_t i, size_t max_digits) {
  const size_t n = t.size();
  if (size_t m = match_contraction(t, i, true)) return m;
  const uint32_t c = t[i].cp;
  size_t j = i;
  if (!is_letter(c) && c != '\r' && c != '\n' && !is_number(c) && i + 1 < n && is_letter(t[i + 1].cp)) j = i + 1;
  if (is_letter(t[j].cp)) {
    while (j < n && is_letter(t[j].cp)) ++j;
    return j - i;
  }
  if (is_number(c)) {
    size_t k = i;
    while (k < n && k - i < max_digits && is_number(t[k].cp)) ++k;
    return k - i;
  }
  j = i + (c == ' ' && i + 1 < n ? 1 : 0);
  if (is_other(t[j].cp)) {
    while (j < n && is_other(t[j].cp)) ++j;
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
  static const ByteTable table;
  return table;
}

// Merges one piece's symbols (each a UTF-8 string of stand-ins) lowest rank
// first, leftmost on ties, and appends their ids.
void merge_piece(const TokenizerData& d, std::vector<std::string> sym, std::vector<int32_t>& out) {
  std::string key;
  while (sym.size() > 1) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      key.assign(sym[k]).append(" ").append(sym[k + 1]);
      auto it = d.merge_ranks.find(key);
      if (it != d.merge_ranks.end() && it->second < best) best = it->second, at = k;
    }
    if (best == INT32_MAX) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  for (const std::string& s : sym) {
    int32_t id = d.find(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge whose result is not in the vocabulary: fall back to its characters.
    for (const Cp& c : split_utf8(s)) {
      int32_t cid = d.find(s.substr(c.pos, c.len));
      if (cid >= 0)
        out.push_back(cid);
      else if (d.unk >= 0)
        out.push_back(d.unk);
    }
  }
}

}  // namespace

std::vector<std::string> bpe_pretokenize(std::string_view text, PreTokenizer pre) {
  std::vector<Cp> t = split_utf8(text);
  std::vector<std::string> out;
  for (size_t i = 0; i < t.size();) {
    size_t n = pre == PreTokenizer::gpt2 ? match_gpt2(t, i) : match_llama3(t, i, pre == PreTokenizer::qwen2 ? 1 : 3);
    if (n == 0) n = 1;  // cannot happen with these patterns; never loop
    size_t pos = t[i].pos, end = t[i + n - 1].pos + t[i + n - 1].len;
    out.emplace_back(text.substr(pos, end - pos));
    i += n;
  }
  return out;
}

std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text) {
  const ByteTable& table = byte_table();
  std::vector<int32_t> out;
  for (const std::string& piece : bpe_pretokenize(text, d.pre)) {
    std::vector<std::string> sym;
    sym.reserve(piece.size());
    for (char c : piece) sym.push_back(table.to_unicode[static_cast<unsigned char>(c)]);
    merge_piece(d, std::move(sym), out);
  }
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
