// What tokenizer.cpp shares with the four encoders (tokenizer_spm.cpp,
// tokenizer_bpe.cpp with the pre-tokenizers of tokenizer_pre.cpp,
// tokenizer_wpm.cpp, tokenizer_ugm.cpp) and the code point table
// (tokenizer_unicode.cpp). Not part of the public API. Everything here is filled once by
// Tokenizer::from_gguf and read-only afterwards, so encoding from several
// threads needs no locks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::model::detail {

enum class TokenType : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };
// spm: tokenizer.ggml.model llama; bpe: gpt2; wpm: bert (WordPiece); ugm: t5 (Unigram).
enum class TokenizerKind { spm, bpe, wpm, ugm };
struct PreTokenizerRule;  // tokenizer_pre.cpp: how a gpt2 file's text is split before merging

// Hashes std::string and std::string_view alike, so maps keyed by string can
// be searched with a view (no allocation per lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A bpe merge of two adjacent symbols: its rank (lower merges first) and the
// symbol it makes.
struct BpeMerge {
  int32_t rank;
  int32_t result;
};

// A token whose literal text encode() recognises inside text: a user-defined
// one always, a control or unknown one only with parse_special.
struct SpecialToken {
  std::string text;
  int32_t id;
  bool control;  // control or unknown
  bool rstrip;   // the ASCII whitespace after it is dropped (Phi-3's chat tokens)
};

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::spm;
  std::vector<std::string> tokens;
  std::vector<float> scores;   // one per token (0 when the file has none)
  std::vector<int32_t> types;  // one per token (normal when the file has none)
  StringMap ids;               // token text -> id (first wins)
  int32_t byte_ids[256];       // spm: id of <0xXX>, or -1
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  std::vector<int32_t> eog;  // the ids that end generation, sorted
  bool add_space_prefix = true;
  bool add_bos = true;

  // bpe: symbols are token ids, plus ids from tokens.size() up for strings a
  // merge names that are not tokens (extra_symbols[id - tokens.size()]).
  // merges maps pair_key(left, right) to the merge; byte_symbols[b] is the
  // symbol of byte b's printable stand-in.
  const PreTokenizerRule* pre = nullptr;  // set by bpe_load
  std::string warning;                    // Tokenizer::warning(): set when tokenizer.ggml.pre is not known
  bool ignore_merges = false;             // a piece that is a token as a whole is that token (llama3)
  std::unordered_map<uint64_t, BpeMerge> merges;
  std::vector<std::string> extra_symbols;
  std::array<int32_t, 256> byte_symbols{};

  // wpm: BERT's normalizer options (tokenizer.ggml.normalizer.*); the
  // longest token in bytes (wpm, ugm).
  bool lowercase = true, strip_accents = true;
  size_t max_token_len = 0;
  // wpm and ugm: the separator and whether encode_special adds it and eos.
  int32_t sep = -1;
  bool add_sep = false, add_eos = false;
  // ugm: tokenizer.ggml.precompiled_charsmap as the file holds it (checked by
  // ugm_load), its double array's node count, the score of an unknown code
  // point, and tokenizer.ggml.remove_extra_whitespaces.
  std::vector<char> charsmap;
  size_t xcda_size = 0;
  double unknown_score = 0;
  bool remove_extra_whitespaces = false;

  // Control, user-defined and unknown tokens by their text's first byte,
  // longest first (for encode); whether any is user-defined.
  std::array<std::vector<SpecialToken>, 256> specials;
  bool has_user_defined = false;

  int32_t find(std::string_view s) const {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  }
  bool has_type(int32_t id, TokenType t) const { return types[id] == static_cast<int32_t>(t); }
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
};

// Length of the UTF-8 sequence starting with lead byte c (1 for an invalid lead).
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// The Unicode properties the pre-tokenizer patterns name: a code point's
// general category (\p{Lu} ... \p{S}; \p{M} is Mn, or Mc and Me together;
// other is C* and Z*, and since every Z* code point is White_Space, other
// without White_Space is exactly C*) and whether it is White_Space (\s).
// Exact for the Unicode version named in tokenizer_unicode.cpp.
enum class CpCategory : uint8_t {
  other = 0,
  Lu = 1,
  Ll = 2,
  Lt = 3,
  Lm = 4,
  Lo = 5,
  Mn = 6,
  N = 7,
  P = 8,
  S = 9,
  Mc_Me = 10
};
constexpr uint8_t kWhiteSpaceBit = 16;
// The category in the low four bits, kWhiteSpaceBit when White_Space.
uint8_t cp_props(uint32_t cp);
inline CpCategory cp_category(uint8_t props) {
  return static_cast<CpCategory>(props & 15);
}
inline bool cp_is_letter(uint8_t props) {
  const auto c = cp_category(props);
  return c >= CpCategory::Lu && c <= CpCategory::Lo;
}

// The classes the gpt2/llama3 patterns name: \p{L}, \p{N}, \s, and
// everything else.
enum class CpClass : uint8_t { other = 0, letter = 1, number = 2, space = 3 };
inline CpClass cp_class_of(uint8_t props) {
  return cp_is_letter(props)                   ? CpClass::letter
         : cp_category(props) == CpCategory::N ? CpClass::number
         : (props & kWhiteSpaceBit)            ? CpClass::space
                                               : CpClass::other;
}

// The table behind cp_props (generated into tokenizer_unicode.cpp): sorted
// entries (first << 5) | props, each starting a run of code points with
// those properties that lasts until the next entry's first; the first entry
// starts at 0.
extern const uint32_t kCodePointRuns[];
extern const size_t kCodePointRunCount;

// One code point of a text with its byte span and properties; an invalid
// byte stands alone (code point 0xFFFD for classification, its own byte for
// output).
struct Cp {
  uint32_t cp;
  size_t pos, len;
  uint8_t props;
  CpClass cls;
};
std::vector<Cp> split_utf8(std::string_view s);
// Appends code point cp (<= 0x10FFFF) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// SentencePiece's space, U+2581 ("▁"), which spm, ugm and wpm pieces carry.
inline constexpr std::string_view kPhantomSpace = "\xE2\x96\x81";
// t with every kPhantomSpace turned back into ' ' (a piece's text).
std::string phantom_to_spaces(std::string_view t);

// Encodes text with no special tokens in it. spm adds the space prefix when
// d.add_space_prefix and merges into normal and user-defined tokens only (as
// SentencePiece: never into a control, unknown, unused or byte token).
std::vector<int32_t> spm_encode(const TokenizerData& d, std::string_view text);
std::string spm_decode_token(const TokenizerData& d, int32_t id);

// WordPiece (tokenizer_wpm.cpp): d.unk must be a token.
std::vector<int32_t> wpm_encode(const TokenizerData& d, std::string_view text);
std::string wpm_decode_token(const TokenizerData& d, int32_t id);

// Unigram (tokenizer_ugm.cpp): ugm_load checks d.charsmap's header and sets
// the scores and lengths ugm_encode needs (throws Error(invalid_input));
// d.unk must be a token.
void ugm_load(TokenizerData& d);
std::vector<int32_t> ugm_encode(const TokenizerData& d, std::string_view text);
std::string ugm_decode_token(const TokenizerData& d, int32_t id);

// Reads tokenizer.ggml.merges and tokenizer.ggml.pre into d (tokens and ids
// already filled); throws Error(invalid_input) for a merge that is not "a b".
// pre is "" when the file has no tokenizer.ggml.pre; "", "default" or a name
// not in tokenizer_pre.cpp's table get a fallback rule and set d.warning.
void bpe_load(TokenizerData& d, const std::vector<std::string>& merges, const std::string& pre);
std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text);
std::string bpe_decode_token(const TokenizerData& d, int32_t id);

}  // namespace weft::model::detail
