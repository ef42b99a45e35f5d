// The pre-tokenizers of byte-level BPE files (tokenizer.ggml.model = gpt2):
// how text is split into pieces before each piece's bytes are merged. Not
// part of the public API.
//
// A rule is a sequence of split steps, as a tokenizer.json's Sequence of
// Split pre-tokenizers (behaviour Isolated): each step splits every piece
// the step before made, on its own, into the pattern's matches and the text
// between them. Three patterns used by many models have hand-written
// matchers (gpt2, llama3, qwen2); the others run on CpRegex.
//
//   const PreTokenizerRule* rule = find_pre_tokenizer("deepseek-v3");   // nullptr when unknown
//   std::vector<std::string> pieces = pretokenize("Hello 12345", *rule);
//   // {"Hello", " ", "123", "45"}
//
// Rules are built once, on first use, and immutable afterwards.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_regex.h"

namespace weft::model::detail {

// The hand-written matchers: gpt2 is
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// llama3 is
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and qwen2 is llama3's with \p{N} for \p{N}{1,3}.
enum class BuiltinSplit : uint8_t { none, gpt2, llama3, qwen2 };

struct PreTokenizerRule {
  std::string_view name;  // the rule's own name, as docs/models.md and warnings give it
  struct Step {
    BuiltinSplit builtin;
    std::string_view pattern;  // when builtin is none
  };
  std::vector<Step> steps;
  std::vector<CpRegex> regexes;  // one per step (unused for builtin steps)
  bool ignore_merges = false;    // a piece that is a token as a whole is that token
  bool add_bos = false;          // llama.cpp's add_bos default for these files
};

// The rule llama.cpp (src/llama-vocab.cpp) gives a tokenizer.ggml.pre
// value, or nullptr for a name weft does not know.
const PreTokenizerRule* find_pre_tokenizer(std::string_view name);
// What llama.cpp uses when tokenizer.ggml.pre is missing or "default".
const PreTokenizerRule& default_pre_tokenizer();
// What weft uses for a name it does not know (llama.cpp refuses the file).
const PreTokenizerRule& unknown_pre_tokenizer();
// Every tokenizer.ggml.pre value in the table with its rule (for tests).
std::vector<std::pair<std::string_view, const PreTokenizerRule*>> pre_tokenizer_names();

// Calls fn(piece) for each piece of text in order; the pieces cover text.
void for_each_piece(std::string_view text, const PreTokenizerRule& rule,
                    const std::function<void(std::string_view)>& fn);
std::vector<std::string> pretokenize(std::string_view text, const PreTokenizerRule& rule);

}  // namespace weft::model::detail
