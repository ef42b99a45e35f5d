// Unigram (tokenizer.ggml.model = t5), as SentencePiece and llama.cpp run
// it: the text is normalized (the file's precompiled charsmap, then spaces to
// U+2581 with the dummy prefix and, when remove_extra_whitespaces, runs of
// spaces collapsed and the ends trimmed), then the segmentation with the
// highest total score is found by Viterbi over the vocabulary's normal,
// user-defined and unused tokens (user-defined ones score 0). A code point
// no token starts with scores as the unknown token, at the lowest normal
// score less 10; neighbouring unknowns become one.
//
// The precompiled charsmap (SentencePiece's normalizer spec, bytes as the
// file holds them): u32 little-endian n, then n bytes of a double array of
// u32 nodes (Darts-clone's packing: BASE in bits 10-30, shifted left 8 more
// when bit 9 is set; LEAF in bit 8; LCHECK, the label, in bits 0-7 and 31; a
// leaf's value in bits 0-30), then NUL-terminated replacement strings the
// leaves' values index. Every index read from it is checked: a charsmap that
// points outside itself is an Error(invalid_input), at load for its header
// and when a lookup meets the bad index.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "tokenizer_impl.h"
#include "weft/core/error.h"

namespace weft::model::detail {

namespace {

constexpr const char* kTokenizerUgmWhere = "tokenizer";
// Pieces longer than this are never matched: Viterbi tries every length up
// to the longest piece at every byte, and a hostile file could name a huge
// one. (SentencePiece's own limit is 16 code points a piece.)
constexpr size_t kMaxPieceBytes = 1024;

[[noreturn]] void bad_charsmap(const std::string& what) {
  fail(ErrorKind::invalid_input, kTokenizerUgmWhere, "tokenizer.ggml.precompiled_charsmap: " + what);
}

struct CharsMap {
  const TokenizerData& d;

  uint32_t node(size_t i) const {
    if (i >= d.xcda_size) bad_charsmap("node " + std::to_string(i) + " is outside its " + std::to_string(d.xcda_size));
    uint32_t v;
    std::memcpy(&v, d.charsmap.data() + 4 + i * 4, 4);  // little-endian hosts only (as GGUF)
    return v;
  }
  uint32_t base(size_t i) const {
    const uint32_t n = node(i);
    return (n >> 10) << ((n & (1u << 9)) >> 6);
  }

  // The longest prefix of s with a replacement: its length (0 if none) and
  // the replacement.
  std::pair<size_t, std::string_view> longest(std::string_view s) const {
    if (d.xcda_size == 0) return {0, {}};
    size_t best_len = 0;
    uint32_t best_value = 0;
    size_t at = base(0);
    for (size_t k = 0; k < s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s[k]);
      if (c == 0) break;
      at ^= c;
      const uint32_t n = node(at);
      if ((n & ((1u << 31) | 0xFFu)) != c) break;  // LCHECK: not a child
      const bool leaf = (n >> 8) & 1u;
      at ^= base(at);
      if (leaf) {
        best_len = k + 1;
        best_value = node(at) & ((1u << 31) - 1);
      }
    }
    if (best_len == 0) return {0, {}};
    const size_t repl_begin = 4 + d.xcda_size * 4, repl_size = d.charsmap.size() - repl_begin;
    if (best_value >= repl_size) bad_charsmap("replacement " + std::to_string(best_value) + " is outside the strings");
    const char* r = d.charsmap.data() + repl_begin + best_value;
    const size_t len = strnlen(r, repl_size - best_value);
    if (len == repl_size - best_value) bad_charsmap("a replacement string has no terminating NUL");
    return {best_len, std::string_view(r, len)};
  }
};

// The longest user-defined token starting s, or 0.
size_t user_defined_prefix(const TokenizerData& d, std::string_view s) {
  for (const SpecialToken& t : d.specials[static_cast<unsigned char>(s[0])])
    if (!t.control && s.starts_with(t.text)) return t.text.size();
  return 0;
}

std::string normalize(const TokenizerData& d, std::string_view text) {
  const CharsMap map{d};
  std::string out;
  const bool merge = d.remove_extra_whitespaces;
  bool in_word = false, prefixed = false;
  auto put = [&](std::string_view chunk) {
    for (char c : chunk) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((d.add_space_prefix && !prefixed) || merge) {  // with merge, one space before every word
            out += kPhantomSpace;
            prefixed = true;
          }
        }
        out += c;
      } else {
        in_word = false;
        if (!merge) out += kPhantomSpace;
      }
    }
  };
  for (size_t pos = 0; pos < text.size();) {
    const std::string_view rest = text.substr(pos);
    if (size_t n = user_defined_prefix(d, rest)) {
      put(rest.substr(0, n));
      pos += n;
      continue;
    }
    if (auto [n, repl] = map.longest(rest); n > 0) {
      put(repl);
      pos += n;
      continue;
    }
    const Cp c = split_utf8(rest.substr(0, std::min<size_t>(4, rest.size())))[0];
    put(c.cp == 0xFFFD && c.len == 1 && static_cast<unsigned char>(rest[0]) >= 0x80 ? "\xEF\xBF\xBD"
                                                                                    : rest.substr(0, c.len));
    pos += c.len;
  }
  return out;
}

}  // namespace

void ugm_load(TokenizerData& d) {
  float lo = FLT_MAX;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (d.has_type(id, TokenType::normal)) lo = std::min(lo, d.scores[i]);
    if (d.has_type(id, TokenType::normal) || d.has_type(id, TokenType::user_defined) ||
        d.has_type(id, TokenType::unused))
      if (d.tokens[i].size() <= kMaxPieceBytes) d.max_token_len = std::max(d.max_token_len, d.tokens[i].size());
  }
  d.unknown_score = (lo == FLT_MAX ? 0.0 : static_cast<double>(lo)) - 10.0;
  if (d.charsmap.empty()) return;
  if (d.charsmap.size() < 4) bad_charsmap("shorter than its 4-byte header");
  uint32_t blob;
  std::memcpy(&blob, d.charsmap.data(), 4);
  if (blob % 4 != 0 || static_cast<uint64_t>(blob) + 4 >= d.charsmap.size())
    bad_charsmap("its double array of " + std::to_string(blob) + " bytes does not fit in " +
                 std::to_string(d.charsmap.size()) + " bytes with the replacement strings");
  d.xcda_size = blob / 4;
}

std::vector<int32_t> ugm_encode(const TokenizerData& d, std::string_view text) {
  const std::string s = normalize(d, text);
  std::vector<int32_t> out;
  if (s.empty()) return out;
  // Scores add up in float, as SentencePiece's own Viterbi does: where two
  // segmentations score the same but for rounding (40 dashes as 4 of "-"
  // and 3 of "------------", in either order) the sums' rounding picks the
  // same one. (llama.cpp and the tokenizers library add in double and can
  // pick the other.)
  struct Best {
    int32_t id;
    size_t from;
    float score;
  };
  std::vector<Best> best(s.size() + 1, {d.unk, 0, -FLT_MAX});
  best[0] = {d.unk, 0, 0.0f};
  for (size_t i = 0; i < s.size();) {
    const size_t cp_len = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    bool whole_cp = false;
    if (best[i].score > -FLT_MAX) {
      for (size_t len = 1; len <= d.max_token_len && i + len <= s.size(); ++len) {
        const int32_t id = d.find(std::string_view(s).substr(i, len));
        if (id < 0 || !(d.has_type(id, TokenType::normal) || d.has_type(id, TokenType::user_defined) ||
                        d.has_type(id, TokenType::unused)))
          continue;
        whole_cp = whole_cp || len == cp_len;
        const float score = best[i].score + (d.has_type(id, TokenType::user_defined) ? 0.0f : d.scores[id]);
        if (score > best[i + len].score) best[i + len] = {id, i, score};
      }
      if (!whole_cp && best[i].score + static_cast<float>(d.unknown_score) > best[i + cp_len].score)
        best[i + cp_len] = {d.unk, i, best[i].score + static_cast<float>(d.unknown_score)};
    }
    i += cp_len;
  }
  bool prev_unknown = false;
  for (size_t at = s.size(); at > 0;) {
    const Best& b = best[at];
    const bool unknown = b.id == d.unk;
    if (!(unknown && prev_unknown)) out.push_back(b.id);
    prev_unknown = unknown;
    at = b.from;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string ugm_decode_token(const TokenizerData& d, int32_t id) {
  return phantom_to_spaces(d.tokens[static_cast<size_t>(id)]);
}

}  // namespace weft::model::detail
