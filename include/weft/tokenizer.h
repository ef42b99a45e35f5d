// Tokenizers read from GGUF metadata (FACTS.md, "Tokenizers in GGUF"):
// `llama` (SentencePiece-style: score-greedy merges with <0xXX> byte fallback)
// and `gpt2` (byte-level BPE: a pre-tokenizer split, then merges by rank).
//
//   auto f = weft::GgufFile::open("model.gguf");
//   auto tok = weft::model::Tokenizer::from_gguf(*f);   // throws weft::Error
//   std::vector<int32_t> ids = tok->encode("Hello world", /*add_bos=*/true);
//   std::string text = tok->decode(ids);                // "Hello world"
//
// A Tokenizer copies what it needs out of the file; the GgufFile may close
// afterwards. Const methods are safe to call from several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {
class GgufFile;
}

namespace weft::model {

namespace detail {
struct TokenizerData;
}

class Tokenizer {
 public:
  // Reads tokenizer.ggml.*; throws Error(invalid_input) naming the key when
  // tokens are missing, the model type is unknown, arrays disagree in length
  // or a special token id is out of range.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text is UTF-8; invalid bytes are passed through as single bytes. Special
  // token strings inside text are not recognised (they encode as plain text).
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // One token's bytes (control tokens give ""); throws Error(invalid_input)
  // for an id outside [0, vocab_size()).
  std::string decode_token(int32_t id) const;
  // Tokens decoded as a sequence from the start of a text: for `llama`, the
  // space that add_space_prefix put before the first piece is removed.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t bos() const;  // -1 when the file names none
  int32_t eos() const;  // -1 when the file names none
  size_t vocab_size() const;

 private:
  explicit Tokenizer(std::unique_ptr<detail::TokenizerData> data);
  std::unique_ptr<detail::TokenizerData> d_;
};

}  // namespace weft::model
