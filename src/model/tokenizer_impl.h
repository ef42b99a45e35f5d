// What tokenizer.cpp shares with the two encoders (tokenizer_spm.cpp,
// tokenizer_bpe.cpp) and the code point table (tokenizer_unicode.cpp). Not
// part of the public API. Everything here is filled once by
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
enum class TokenizerKind { spm, bpe };
// The pre-tokenizer splits of bpe_load's table (tokenizer_bpe.cpp):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  llama3's with \p{N} for \p{N}{1,3}
//   digits_gpt2: each \p{N} alone, then gpt2's on each run between them
enum class PreTokenizer { gpt2, llama3, qwen2, digits_gpt2 };

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
  PreTokenizer pre = PreTokenizer::gpt2;
  std::string warning;         // Tokenizer::warning(): set when tokenizer.ggml.pre is not known
  bool ignore_merges = false;  // a piece that is a token as a whole is that token (llama3)
  std::unordered_map<uint64_t, BpeMerge> merges;
  std::vector<std::string> extra_symbols;
  std::array<int32_t, 256> byte_symbols{};

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

// The classes the pre-tokenizer patterns name: \p{L}, \p{N}, \s (Unicode
// White_Space), and everything else. Exact for the Unicode version named in
// tokenizer_unicode.cpp.
enum class CpClass : uint8_t { other = 0, letter = 1, number = 2, space = 3 };
CpClass cp_class(uint32_t cp);

// The table behind cp_class (generated into tokenizer_unicode.cpp): sorted
// entries (first << 2) | class, each starting a run of code points of that
// class that lasts until the next entry's first; the first entry starts at 0.
extern const uint32_t kCodePointRuns[];
extern const size_t kCodePointRunCount;

// Encodes text with no special tokens in it. spm adds the space prefix when
// d.add_space_prefix and merges into normal and user-defined tokens only (as
// SentencePiece: never into a control, unknown, unused or byte token).
std::vector<int32_t> spm_encode(const TokenizerData& d, std::string_view text);
std::string spm_decode_token(const TokenizerData& d, int32_t id);

// Reads tokenizer.ggml.merges and tokenizer.ggml.pre into d (tokens and ids
// already filled); throws Error(invalid_input) for a merge that is not "a b".
// pre is "" when the file has no tokenizer.ggml.pre; a name not in the table
// (or "", or "default") gets gpt2's split and sets d.warning.
void bpe_load(TokenizerData& d, const std::vector<std::string>& merges, const std::string& pre);
std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text);
std::string bpe_decode_token(const TokenizerData& d, int32_t id);
// The pre-tokenizer's split of text into pieces (exposed for tests).
std::vector<std::string> bpe_pretokenize(std::string_view text, PreTokenizer pre);

}  // namespace weft::model::detail
