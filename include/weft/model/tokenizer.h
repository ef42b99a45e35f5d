// Tokenizers read from GGUF metadata (docs/models.md, "Tokenizers"):
// `llama` (SentencePiece-style: score-greedy merges with <0xXX> byte fallback),
// `gpt2` (byte-level BPE: a pre-tokenizer split, then merges by rank),
// `bert` (WordPiece: BERT's normalizer and word split, then the longest
// vocabulary entries) and `t5` (Unigram: the precompiled charsmap, then the
// segmentation with the highest total score). docs/models.md lists what
// each was checked against.
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

  // Text is UTF-8; invalid bytes are passed through as single bytes.
  //
  // The literal text of a user-defined token (token_type 4: Gemma's runs of
  // spaces, newlines and tabs and its HTML tags, Qwen's <think> and
  // <tool_call>, Phi-3's </s>) is always recognised and emits its id, as in
  // llama.cpp and transformers; the text between such tokens encodes as
  // plain text, each part separately (for `llama` each part gets the space
  // prefix when add_space_prefix, as in llama.cpp).
  // parse_special = false (the default, and the only safe choice for text
  // from users or documents): control and unknown tokens' strings such as
  // "<|eot_id|>", "<start_of_turn>" or "<s>" inside text are not recognised
  // and encode as plain text (merging never produces a control token), so
  // text cannot forge them.
  // parse_special = true (for prompt templates the caller writes): control
  // and unknown tokens' strings (token_type 3, 2) are recognised as well.
  // Matches are leftmost first and the longest where several start at one
  // place. In Phi-3 files (general.name holding "phi-3" or "phi3", as
  // llama.cpp checks, or architecture phi3 with a `llama` vocabulary) every
  // such token but <unk>, <s> and <|endoftext|> drops the ASCII whitespace
  // after it (rstrip in Phi-3's tokenizer_config.json), so "<|user|>\nHi"
  // encodes as "<|user|>Hi". decode() does not invert this: control tokens
  // decode to "".
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
  // The model's input for text, as llama.cpp's tokenize with add_special
  // makes it: bos when add_bos(), the text, then the separator when the file
  // asks for it (tokenizer.ggml.add_sep_token; by default for `bert`: BERT's
  // [CLS] text [SEP]) and eos when it asks for that (add_eos_token; by
  // default for `t5`: text </s>).
  std::vector<int32_t> encode_with_specials(std::string_view text, bool parse_special = false) const;
  // One token's bytes (control tokens give ""); throws Error(invalid_input)
  // for an id outside [0, vocab_size()).
  std::string decode_token(int32_t id) const;
  // The vocabulary's string for id as the file spells it ("<s>",
  // "<|im_end|>", "▁the", "Ġthe"): what chat templates call bos_token and
  // eos_token. Throws Error(invalid_input) for an id outside the vocabulary.
  const std::string& token_text(int32_t id) const;
  // Tokens decoded as a sequence from the start of a text: for `llama`, the
  // space that add_space_prefix put before the first piece is removed.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t bos() const;  // -1 when the file names none
  // Whether a text should start with bos (the encode() argument callers
  // should pass): tokenizer.ggml.add_bos_token, or when the file lacks the
  // key, llama.cpp's default (yes for `llama`, `bert` ([CLS]) and the gpt2
  // pre-tokenizers of Llama 3, Tekken and Chameleon, no for other gpt2 files
  // such as Qwen2's and for `t5`); never without a bos token.
  bool add_bos() const;
  int32_t eos() const;  // -1 when the file names none
  // End of turn: tokenizer.ggml.eot_token_id, or when the file has no such
  // key, the first control or user-defined token spelled <|eot_id|>,
  // <|im_end|>, <|end|> or <end_of_turn>; -1 when none. (Llama 3 instruct
  // files name <|eot_id|> or <|end_of_text|> as eos.)
  int32_t eot() const;
  // Whether generation should stop at id: it is eos, eot, end of message
  // (tokenizer.ggml.eom_token_id, or else <|eom_id|>), or a control or
  // user-defined token spelled as one of llama.cpp's end-of-generation
  // tokens (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>,
  // <|endoftext|>, <|end_of_text|>, <EOT>, _<EOT>, <end_of_utterance>) or
  // <eos>, whatever the keys say: a Qwen3 instruct file names <|im_end|> as
  // eos and the model may still end with <|endoftext|>; a Gemma 3 file names
  // <end_of_turn> and the model may end with <eos>.
  bool is_end_of_generation(int32_t id) const;
  size_t vocab_size() const;
  // What a user should be told about this tokenizer, as one sentence without
  // a trailing newline, or "" when there is nothing. Not empty when a `gpt2`
  // file's tokenizer.ggml.pre is missing or "default" (its text is then
  // split as llama.cpp splits such files: its "default" rule) or a name weft
  // does not know (split with GPT-2's pattern), which may differ from the
  // model's own split, e.g. "tokenizer.ggml.pre 'foo' is not known to weft:
  // using gpt2's pre-tokenizer, so tokens may differ from the model's own".
  // Encoding still works. (`llama`, `bert` and `t5` files never warn: they
  // have no pre-tokenizer name.)
  const std::string& warning() const;

 private:
  explicit Tokenizer(std::unique_ptr<detail::TokenizerData> data);
  std::unique_ptr<detail::TokenizerData> d_;
};

}  // namespace weft::model
