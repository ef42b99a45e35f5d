// What tokenizer.cpp shares with the two encoders (tokenizer_spm.cpp,
// tokenizer_bpe.cpp). Not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::model::detail {

enum class TokenType : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };
enum class TokenizerKind { spm, bpe };
enum class PreTokenizer { gpt2, llama3, qwen2 };

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::spm;
  std::vector<std::string> tokens;
  std::vector<float> scores;                             // one per token (0 when the file has none)
  std::vector<int32_t> types;                            // one per token (normal when the file has none)
  std::unordered_map<std::string, int32_t> ids;          // token text -> id (first wins)
  std::unordered_map<std::string, int32_t> merge_ranks;  // "a b" -> rank (bpe)
  int32_t byte_ids[256];                                 // spm: id of <0xXX>, or -1
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_space_prefix = true;
  PreTokenizer pre = PreTokenizer::gpt2;

  int32_t find(std::string_view s) const {
    auto it = ids.find(std::string(s));
    return it == ids.end() ? -1 : it->second;
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

std::vector<int32_t> spm_encode(const TokenizerData& d, std::string_view text);
std::string spm_decode_token(const TokenizerData& d, int32_t id);

std::vector<int32_t> bpe_encode(const TokenizerData& d, std::string_view text);
std::string bpe_decode_token(const TokenizerData& d, int32_t id);
// The pre-tokenizer's split of text into pieces (exposed for tests).
std::vector<std::string> bpe_pretokenize(std::string_view text, PreTokenizer pre);

}  // namespace weft::model::detail
