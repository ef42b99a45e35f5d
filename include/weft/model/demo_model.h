// The demo model: a llama-architecture GGUF file with deterministic random
// weights and a generated SentencePiece-style vocabulary (real text pieces,
// so its output decodes to text, however meaningless). `weft demo` writes it
// once into a cache folder and runs it split across processes; tests write
// tiny ones (tests/model/write_test_model.cpp).
//
//   weft::model::DemoModelSpec spec;                 // about 100 M parameters
//   weft::model::write_demo_model("/tmp/demo.gguf", spec);
//   auto tok = weft::model::Tokenizer::from_gguf(*weft::GgufFile::open("/tmp/demo.gguf"));
//   auto ids = tok->encode(weft::model::kDemoPrompt, true);   // a few tokens per word
//
// The same spec always gives the same bytes (the generator is our own
// splitmix64, not a standard-library distribution).
//
// The vocabulary (tokenizer.ggml.model = "llama", exactly n_vocab entries, no
// two equal): 0 <unk>, 1 <s> (bos), 2 </s> (eos), 3..258 the byte tokens
// <0x00>..<0xFF>, then "▁" (U+2581) and every printable ASCII character alone
// and after "▁", then common English words (those of kDemoPrompt first) with
// "▁" and their prefixes, then consonant-vowel syllables and pseudo-words
// ("▁ka", "ro", "▁tesu", "mibolu", ...) until n_vocab is reached. Every piece
// longer than one character is the concatenation of two shorter pieces, and a
// piece's score is its length in characters, so the encoder's merges reach the
// longest pieces. The vocabulary does not depend on the seed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::model {

// The smallest n_vocab write_demo_model accepts: 3 special tokens, 256 byte
// tokens, "▁", and the 94 printable ASCII characters alone and after "▁".
inline constexpr int64_t kDemoMinVocab = 3 + 256 + 1 + 2 * 94;  // 448

// The prompt `weft demo` generates from. With n_vocab >= kDemoPromptVocab
// each of its words is one piece: it encodes to 15 tokens with <s>.
inline constexpr const char* kDemoPrompt = "The quick brown fox jumps over the lazy dog. Once upon a time";
inline constexpr int64_t kDemoPromptVocab = kDemoMinVocab + 35;  // the prompt words' pieces and their prefixes

struct DemoModelSpec {
  int64_t n_vocab = 32000;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_head_kv = 4;
  int64_t n_ff = 2048;
  int64_t n_ctx = 2048;  // context_length
  bool tied = true;      // output reuses token_embd (no output.weight)
  uint64_t seed = 42;
  // Mixture of experts (Mixtral layout) when n_expert > 0: each layer's
  // feed-forward is a router and n_expert experts of n_ff, n_expert_used of
  // them per token (0 < n_expert_used <= n_expert). 0: dense layers.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  // Written as tokenizer.chat_template when not empty (`weft chat` tests).
  std::string chat_template;
};

// A tiny model for tests (tests/model/write_test_model.cpp's defaults):
// 2 layers, n_embd 64, 4 heads with 2 KV heads, n_ff 128, n_vocab 600
// (every kDemoPrompt word a piece), context 512.
inline DemoModelSpec tiny_demo_spec() {
  DemoModelSpec s;
  s.n_vocab = 600;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.n_ctx = 512;
  return s;
}

// Parameters of the model spec describes (norm weights included).
int64_t demo_model_params(const DemoModelSpec& spec);

// Writes the model to path (through a temporary file and a rename): matrices
// q8_0, norms f32, the vocabulary above. Throws Error(invalid_input) for a
// spec whose matrix rows are not multiples of 32, whose heads do not divide
// n_embd, whose n_layer or n_ctx is not positive, whose expert counts are not
// as DemoModelSpec says, or whose n_vocab is outside [kDemoMinVocab, 1000000].
// A dense spec gives the same bytes as before experts existed.
void write_demo_model(const std::string& path, const DemoModelSpec& spec = {});

// text (UTF-8 from a tokenizer's decode) made safe to print on one terminal
// line: each byte that is not part of a valid UTF-8 sequence (a stray
// continuation, a truncated or overlong sequence, a surrogate, above U+10FFFF)
// and each control character (C0 including newline and tab, DEL, C1) becomes
// U+FFFD. Valid printable text is returned unchanged.
std::string printable_text(std::string_view text);

}  // namespace weft::model
