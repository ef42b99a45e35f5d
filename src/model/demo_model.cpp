// write_demo_model: deterministic random weights, scaled so activations stay
// near unit size through the layers (uniform with variance 1 / n_in), and the
// generated vocabulary described in demo_model.h.
#include "weft/model/demo_model.h"

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/core/splitmix64.h"
#include "weft/gguf/gguf.h"

namespace weft::model {
namespace {

// Uniform in [-1, 1) from 24 random bits: exact in float, the same everywhere.
float uniform(uint64_t& state) {
  return static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

struct Writer {
  GgufWriter gguf;
  uint64_t seed;
  std::vector<std::vector<uint8_t>> data;  // kept alive until write()

  // A matrix [n_in, n_out] (n_in fastest) in q8_0, or a norm vector [n] in f32.
  void add(const std::string& name, std::vector<int64_t> ne, bool norm) {
    uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (data.size() + 1));
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> f(static_cast<size_t>(n));
    const float scale = norm ? 0.1f : std::sqrt(3.0f / static_cast<float>(ne[0]));
    for (float& x : f) x = norm ? 1.0f + scale * uniform(state) : scale * uniform(state);
    const DType type = norm ? DType::f32 : DType::q8_0;
    std::vector<uint8_t> bytes(row_bytes(type, n));
    from_f32(type, f.data(), bytes.data(), n);
    data.push_back(std::move(bytes));
    gguf.add_tensor(name, type, ne, data.back().data());
  }
};

// Token types of tokenizer.ggml.token_type (FACTS.md, "Tokenizers in GGUF").
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr int64_t kMaxVocab = 1000000;          // the generator holds about 1.24 M pieces

// Words given whole pieces ("▁" + word, and its prefixes), the prompt's first.
constexpr const char* kWords[] = {
    "The",  "quick", "brown", "fox",  "jumps",  "over",  "the",  "lazy", "dog",  "Once", "upon",   "a",
    "time", "and",   "of",    "to",   "in",     "is",    "was",  "it",   "that", "he",   "she",    "with",
    "for",  "on",    "as",    "his",  "her",    "they",  "at",   "be",   "this", "from", "had",    "not",
    "but",  "what",  "all",   "were", "when",   "there", "can",  "said", "one",  "day",  "little", "girl",
    "boy",  "cat",   "happy", "big",  "friend", "named", "very", "saw",  "went", "play", "Hello",  "world",
    "I",    "you",   "we",    "He",   "She",    "They",  "It",   "A"};

// Syllables are a consonant then a vowel: 17 * 5 = 85 of them.
constexpr std::string_view kConsonants = "bdfghjklmnprstvwz", kVowels = "aeiou";
constexpr uint64_t kSyllables = 17 * 5;
constexpr uint64_t kStride = 7919;  // a prime coprime to 85^L: visits pseudo-words in a scattered order
static_assert(kConsonants.size() * kVowels.size() == kSyllables && std::gcd(kStride, kSyllables) == 1);

// Characters (code points) in a UTF-8 string: the bytes that are not continuations.
float char_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return static_cast<float>(n);
}

struct Vocab {
  size_t limit;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::unordered_set<std::string> seen;

  bool full() const { return tokens.size() >= limit; }
  // Appends piece unless the vocabulary is full or already holds it; normal
  // pieces score their length so the encoder merges toward the longest.
  void add(const std::string& piece, int32_t type = kNormal) {
    if (full() || !seen.insert(piece).second) return;
    tokens.push_back(piece);
    scores.push_back(type == kNormal ? char_count(piece) : 0.f);
    types.push_back(type);
  }
};

// The vocabulary of demo_model.h, in its order. Each level is complete before
// the next starts, which is what makes every piece a concatenation of two
// earlier ones: "▁" + word prefix closure, "▁c" + "v", "▁cv" + "cv", "▁cvcv" + "cv".
Vocab demo_vocabulary(int64_t n_vocab) {
  Vocab v{static_cast<size_t>(n_vocab), {}, {}, {}, {}};
  v.tokens.reserve(v.limit);
  v.add("<unk>", kUnknown);
  v.add("<s>", kControl);
  v.add("</s>", kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.add(name, kByte);
  }
  v.add(kSpace);
  for (char c = '!'; c <= '~'; ++c) v.add(std::string(1, c));
  for (char c = '!'; c <= '~'; ++c) v.add(kSpace + std::string(1, c));
  for (const char* word : kWords) {
    const std::string w = kSpace + std::string(word);
    for (size_t len = 2 + std::string_view(kSpace).size(); len <= w.size(); ++len) v.add(w.substr(0, len));
  }
  for (int level = 1; level <= 3 && !v.full(); ++level) {
    uint64_t n = 1;
    for (int i = 0; i < level; ++i) n *= kSyllables;
    for (uint64_t k = 0; k < n && !v.full(); ++k) {
      std::string word;
      for (uint64_t j = k * kStride % n, i = 0; i < static_cast<uint64_t>(level); ++i, j /= kSyllables)
        word += {kConsonants[j % kSyllables / kVowels.size()], kVowels[j % kVowels.size()]};
      v.add(kSpace + word);
      v.add(word);
    }
  }
  return v;
}

}  // namespace

int64_t demo_model_params(const DemoModelSpec& s) {
  const int64_t head_dim = s.n_embd / s.n_head;
  const int64_t q = s.n_embd * head_dim * s.n_head, kv = s.n_embd * head_dim * s.n_head_kv;
  const int64_t ffn = s.n_expert > 0 ? s.n_expert * (3 * s.n_embd * s.n_ff + s.n_embd) : 3 * s.n_embd * s.n_ff;
  const int64_t layer = 2 * s.n_embd + q + 2 * kv + q + ffn;
  return s.n_vocab * s.n_embd * (s.tied ? 1 : 2) + s.n_embd + s.n_layer * layer;
}

void write_demo_model(const std::string& path, const DemoModelSpec& s) {
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_embd % s.n_head != 0 || s.n_head % s.n_head_kv != 0 ||
      s.n_embd % 32 != 0 || s.n_ff % 32 != 0 || s.n_layer <= 0 || s.n_ctx <= 0)
    fail(ErrorKind::invalid_input, "demo model",
         "spec n_embd " + std::to_string(s.n_embd) + ", n_head " + std::to_string(s.n_head) + ", n_head_kv " +
             std::to_string(s.n_head_kv) + ", n_ff " + std::to_string(s.n_ff) + ", n_layer " +
             std::to_string(s.n_layer) + ", n_ctx " + std::to_string(s.n_ctx) + " is not a valid llama shape");
  if (s.n_expert < 0 || s.n_expert > 1024 ||
      (s.n_expert > 0 ? s.n_expert_used <= 0 || s.n_expert_used > s.n_expert : s.n_expert_used != 0))
    fail(ErrorKind::invalid_input, "demo model",
         "spec n_expert " + std::to_string(s.n_expert) + ", n_expert_used " + std::to_string(s.n_expert_used) +
             " is not 0, 0 (dense) or 0 < used <= n_expert <= 1024");
  if (s.n_vocab < kDemoMinVocab || s.n_vocab > kMaxVocab)
    fail(ErrorKind::invalid_input, "demo model",
         "spec n_vocab " + std::to_string(s.n_vocab) + " is outside [" + std::to_string(kDemoMinVocab) + ", " +
             std::to_string(kMaxVocab) + "] (the generated vocabulary needs 3 special, 256 byte and " +
             std::to_string(kDemoMinVocab - 259) + " character tokens)");
  const Vocab vocab = demo_vocabulary(s.n_vocab);
  if (!vocab.full()) fail(ErrorKind::internal, "demo model", "the vocabulary generator ran out of pieces");
  const int64_t head_dim = s.n_embd / s.n_head;
  Writer w{GgufWriter{}, s.seed, {}};
  w.data.reserve(static_cast<size_t>(3 + 10 * s.n_layer));  // pointers into it must stay valid
  GgufWriter& g = w.gguf;
  g.set_string("general.architecture", "llama");
  g.set_string("general.name", "weft demo llama (random weights)");
  g.set_u32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  g.set_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  g.set_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  g.set_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  g.set_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  g.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  g.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.set_f32("llama.rope.freq_base", 10000.f);
  if (s.n_expert > 0) {
    g.set_u32("llama.expert_count", static_cast<uint32_t>(s.n_expert));
    g.set_u32("llama.expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  }
  g.set_string("tokenizer.ggml.model", "llama");
  g.set_array("tokenizer.ggml.tokens", vocab.tokens);
  g.set_array("tokenizer.ggml.scores", vocab.scores);
  g.set_array("tokenizer.ggml.token_type", vocab.types);
  g.set_u32("tokenizer.ggml.bos_token_id", 1);
  g.set_u32("tokenizer.ggml.eos_token_id", 2);
  g.set_u32("tokenizer.ggml.unknown_token_id", 0);
  g.set_bool("tokenizer.ggml.add_bos_token", true);
  g.set_bool("tokenizer.ggml.add_eos_token", false);
  if (!s.chat_template.empty()) g.set_string("tokenizer.chat_template", s.chat_template);

  w.add("token_embd.weight", {s.n_embd, s.n_vocab}, false);
  w.add("output_norm.weight", {s.n_embd}, true);
  if (!s.tied) w.add("output.weight", {s.n_embd, s.n_vocab}, false);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.add(b + "attn_norm.weight", {s.n_embd}, true);
    w.add(b + "attn_q.weight", {s.n_embd, head_dim * s.n_head}, false);
    w.add(b + "attn_k.weight", {s.n_embd, head_dim * s.n_head_kv}, false);
    w.add(b + "attn_v.weight", {s.n_embd, head_dim * s.n_head_kv}, false);
    w.add(b + "attn_output.weight", {head_dim * s.n_head, s.n_embd}, false);
    w.add(b + "ffn_norm.weight", {s.n_embd}, true);
    if (s.n_expert > 0) {
      w.add(b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, false);
      w.add(b + "ffn_gate_exps.weight", {s.n_embd, s.n_ff, s.n_expert}, false);
      w.add(b + "ffn_up_exps.weight", {s.n_embd, s.n_ff, s.n_expert}, false);
      w.add(b + "ffn_down_exps.weight", {s.n_ff, s.n_embd, s.n_expert}, false);
    } else {
      w.add(b + "ffn_gate.weight", {s.n_embd, s.n_ff}, false);
      w.add(b + "ffn_up.weight", {s.n_embd, s.n_ff}, false);
      w.add(b + "ffn_down.weight", {s.n_ff, s.n_embd}, false);
    }
  }
  g.write(path);
}

std::string printable_text(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    // The sequence's length and the range of its second byte (which excludes
    // overlong forms, surrogates and code points above U+10FFFF); 0: invalid lead.
    const size_t len = b < 0x80                 ? 1
                       : b >= 0xC2 && b <= 0xDF ? 2
                       : b >= 0xE0 && b <= 0xEF ? 3
                       : b >= 0xF0 && b <= 0xF4 ? 4
                                                : 0;
    const unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      ok = k == 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xBF;
    }
    const bool control = ok && (len == 1 ? b < 0x20 || b == 0x7F                                           // C0, DEL
                                         : b == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F);  // C1
    if (!ok || control) {
      out += kReplacement;
      i += ok ? len : 1;  // a bad byte alone; a whole control character
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace weft::model
