// Tokenizer: loading from GGUF metadata, special tokens, and decode; the
// encoders live in tokenizer_spm.cpp and tokenizer_bpe.cpp.
#include "weft/model/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "tokenizer_impl.h"
#include "tokenizer_pre.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft::model {

using detail::TokenizerData;
using detail::TokenizerKind;
using detail::TokenType;

namespace {

constexpr const char* kTokenizerWhere = "tokenizer";

int32_t read_id(const GgufFile& f, const std::string& key, size_t n_vocab) {
  const GgufValue* v = f.find(key);
  if (!v) return -1;
  std::optional<int64_t> id = f.get_i64(key);
  if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_vocab)
    fail(ErrorKind::invalid_input, kTokenizerWhere,
         key + " = " + (id ? std::to_string(*id) : "?") + " is outside the vocabulary of " + std::to_string(n_vocab));
  return static_cast<int32_t>(*id);
}

// Token texts that end generation wherever a control or user-defined token
// has them, whatever the file's eos and eot keys say: llama.cpp's list (its
// end-of-generation set), and Gemma's <eos>, which Gemma 3 files do not name
// as eos (tokenizer_config.json names <end_of_turn>) though the model's
// generation_config.json lists it beside <end_of_turn>.
constexpr std::string_view kEndOfGeneration[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>",         "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "<end_of_utterance>", "<eos>",
};

bool is_control_or_user_defined(const TokenizerData& d, int32_t id) {
  return d.has_type(id, TokenType::control) || d.has_type(id, TokenType::user_defined);
}

// The first of names that is a control or user-defined token, or -1.
int32_t find_named(const TokenizerData& d, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    int32_t id = d.find(name);
    if (id >= 0 && is_control_or_user_defined(d, id)) return id;
  }
  return -1;
}

// Whether the file is Phi-3's, whose chat tokens drop the whitespace after
// them (rstrip in its tokenizer_config.json). GGUF files do not record
// rstrip: llama.cpp sets it when general.name holds "phi-3" or "phi3" (older
// converters wrote "Phi3"); weft also for architecture phi3 with a `llama`
// vocabulary (Phi-3 and 3.5 files whose name is "Phi 3 Mini ..."; Phi-4's
// files, also phi3, are gpt2 and keep their whitespace).
bool is_phi3(const GgufFile& f, TokenizerKind kind) {
  std::string name = f.get_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) return true;
  return kind == TokenizerKind::spm && f.get_string("general.architecture").value_or("") == "phi3";
}

// Fills d.specials: control, user-defined and unknown tokens with text, by
// first byte, longest first. With rstrip, every one but <unk>, <s> and
// <|endoftext|> drops the whitespace after it (llama.cpp's rule for Phi-3).
void index_specials(TokenizerData& d, bool rstrip) {
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const auto type = static_cast<TokenType>(d.types[i]);
    const std::string& t = d.tokens[i];
    if (t.empty() || (type != TokenType::control && type != TokenType::user_defined && type != TokenType::unknown))
      continue;
    if (d.ids.at(t) != static_cast<int32_t>(i)) continue;  // a duplicate text: the first id wins
    const bool strip = rstrip && t != "<unk>" && t != "<s>" && t != "<|endoftext|>";
    d.specials[static_cast<unsigned char>(t[0])].push_back(
        {t, static_cast<int32_t>(i), type != TokenType::user_defined, strip});
    d.has_user_defined = d.has_user_defined || type == TokenType::user_defined;
  }
  for (auto& bucket : d.specials)
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
}

// The longest special token whose text starts text (a user-defined one, or
// with parse_special any), or nullptr.
const detail::SpecialToken* match_special(const TokenizerData& d, std::string_view text, bool parse_special) {
  for (const detail::SpecialToken& s : d.specials[static_cast<unsigned char>(text[0])])
    if ((parse_special || !s.control) && text.starts_with(s.text)) return &s;
  return nullptr;
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::vector<int32_t> encode_plain(const TokenizerData& d, std::string_view text) {
  switch (d.kind) {
    case TokenizerKind::spm: return detail::spm_encode(d, text);
    case TokenizerKind::bpe: return detail::bpe_encode(d, text);
    case TokenizerKind::wpm: return detail::wpm_encode(d, text);
    case TokenizerKind::ugm: return detail::ugm_encode(d, text);
  }
  return {};
}

// An id llama.cpp assumes for a bert or t5 file without the key, when the
// vocabulary has it.
int32_t default_id(int32_t id, int32_t fallback, size_t n) {
  return id >= 0 ? id : static_cast<size_t>(fallback) < n ? fallback : -1;
}

// The keys of bert (WordPiece) and t5 (Unigram) files beyond the common ones,
// with llama.cpp's defaults: bert's [CLS] 101 as bos, [UNK] 100, [SEP] 102,
// bos and sep added; t5's </s> 1 as eos, <unk> 2, eos added.
void load_wpm_ugm(const GgufFile& f, TokenizerData& d) {
  const size_t n = d.tokens.size();
  const bool bert = d.kind == TokenizerKind::wpm;
  if (bert) {
    d.bos = default_id(d.bos >= 0 ? d.bos : read_id(f, "tokenizer.ggml.cls_token_id", n), 101, n);
    d.unk = default_id(d.unk, 100, n);
    d.sep = default_id(d.sep, 102, n);
    d.lowercase = f.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    d.strip_accents = f.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(d.lowercase);
    for (const std::string& t : d.tokens) d.max_token_len = std::max(d.max_token_len, t.size());
  } else {
    d.eos = default_id(d.eos, 1, n);
    d.unk = default_id(d.unk, 2, n);
    d.remove_extra_whitespaces = f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    if (const GgufValue* v = f.find("tokenizer.ggml.precompiled_charsmap")) {
      if (v->type != GgufType::array || (v->arr.elem_type() != GgufType::u8 && v->arr.elem_type() != GgufType::i8))
        fail(ErrorKind::invalid_input, kTokenizerWhere, "tokenizer.ggml.precompiled_charsmap is not an array of bytes");
      const auto bytes = v->arr.bytes();
      d.charsmap.assign(reinterpret_cast<const char*>(bytes.data()),
                        reinterpret_cast<const char*>(bytes.data()) + bytes.size());
    }
  }
  if (d.unk < 0)
    fail(ErrorKind::invalid_input, kTokenizerWhere,
         std::string("a ") + (bert ? "bert" : "t5") + " tokenizer needs tokenizer.ggml.unknown_token_id");
  d.add_sep = f.get_bool("tokenizer.ggml.add_sep_token").value_or(bert) && d.sep >= 0;
  d.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(!bert) && d.eos >= 0;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  auto d = std::make_unique<TokenizerData>();
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("llama");
  if (model == "llama") {
    d->kind = TokenizerKind::spm;
  } else if (model == "gpt2") {
    d->kind = TokenizerKind::bpe;
  } else if (model == "bert") {
    d->kind = TokenizerKind::wpm;
  } else if (model == "t5") {
    d->kind = TokenizerKind::ugm;
  } else {
    fail(ErrorKind::invalid_input, kTokenizerWhere,
         "tokenizer.ggml.model '" + model + "' is not supported (llama, gpt2, bert, t5)");
  }

  auto tokens = f.get_array_strings("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty())
    fail(ErrorKind::invalid_input, kTokenizerWhere, "tokenizer.ggml.tokens is missing or empty in " + f.path());
  if (tokens->size() > static_cast<size_t>(INT32_MAX))
    fail(ErrorKind::invalid_input, kTokenizerWhere, "tokenizer.ggml.tokens has too many entries");
  d->tokens = std::move(*tokens);
  const size_t n = d->tokens.size();

  d->scores = f.get_array_f32("tokenizer.ggml.scores").value_or(std::vector<float>(n, 0.f));
  if (d->scores.size() != n)
    fail(ErrorKind::invalid_input, kTokenizerWhere,
         "tokenizer.ggml.scores has " + std::to_string(d->scores.size()) + " entries, tokens " + std::to_string(n));
  d->types = f.get_array_i32("tokenizer.ggml.token_type")
                 .value_or(std::vector<int32_t>(n, static_cast<int32_t>(TokenType::normal)));
  if (d->types.size() != n)
    fail(ErrorKind::invalid_input, kTokenizerWhere,
         "tokenizer.ggml.token_type has " + std::to_string(d->types.size()) + " entries, tokens " + std::to_string(n));

  d->ids.reserve(n);
  for (size_t i = 0; i < n; ++i) d->ids.emplace(d->tokens[i], static_cast<int32_t>(i));

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    d->byte_ids[b] = d->find(name);
  }

  if (d->kind == TokenizerKind::bpe) {
    auto merges = f.get_array_strings("tokenizer.ggml.merges");
    if (!merges)
      fail(ErrorKind::invalid_input, kTokenizerWhere, "tokenizer.ggml.merges is missing for a gpt2 tokenizer");
    detail::bpe_load(*d, *merges, f.get_string("tokenizer.ggml.pre").value_or(""));
  }

  d->bos = read_id(f, "tokenizer.ggml.bos_token_id", n);
  d->eos = read_id(f, "tokenizer.ggml.eos_token_id", n);
  d->unk = read_id(f, "tokenizer.ggml.unknown_token_id", n);
  d->sep = read_id(f, "tokenizer.ggml.seperator_token_id", n);  // llama.cpp's spelling
  if (d->kind == TokenizerKind::wpm || d->kind == TokenizerKind::ugm) load_wpm_ugm(f, *d);
  d->eot = read_id(f, "tokenizer.ggml.eot_token_id", n);
  d->eom = read_id(f, "tokenizer.ggml.eom_token_id", n);
  if (d->eot < 0) d->eot = find_named(*d, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"});
  if (d->eom < 0) d->eom = find_named(*d, {"<|eom_id|>"});
  for (int32_t id : {d->eos, d->eot, d->eom})
    if (id >= 0) d->eog.push_back(id);
  for (std::string_view name : kEndOfGeneration)
    if (int32_t id = find_named(*d, {name}); id >= 0) d->eog.push_back(id);
  std::sort(d->eog.begin(), d->eog.end());
  d->eog.erase(std::unique(d->eog.begin(), d->eog.end()), d->eog.end());
  index_specials(*d, is_phi3(f, d->kind));
  d->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(d->kind == TokenizerKind::spm);
  if (d->kind == TokenizerKind::ugm) detail::ugm_load(*d);
  // llama.cpp's defaults when the key is absent: SentencePiece files and
  // some BPE rules (Llama 3's, Tekken's) add bos, other BPE files do not.
  const bool bos_by_default =
      d->kind == TokenizerKind::spm || d->kind == TokenizerKind::wpm || (d->pre && d->pre->add_bos);
  d->add_bos = d->bos >= 0 && f.get_bool("tokenizer.ggml.add_bos_token").value_or(bos_by_default);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(d)));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerData> data) : d_(std::move(data)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos) {
    if (d_->bos < 0)
      fail(ErrorKind::invalid_input, "tokenizer.encode", "add_bos but the file has no tokenizer.ggml.bos_token_id");
    out.push_back(d_->bos);
  }
  auto append_plain = [&](std::string_view part) {
    if (part.empty()) return;
    std::vector<int32_t> ids = encode_plain(*d_, part);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  if (!parse_special && !d_->has_user_defined) {
    append_plain(text);
    return out;
  }
  // Leftmost-longest special tokens (user-defined ones always, control and
  // unknown ones with parse_special); the text between them encodes as plain
  // text (each part on its own, as llama.cpp does: for spm each part gets
  // the space prefix).
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const detail::SpecialToken* s = match_special(*d_, text.substr(pos), parse_special);
    if (!s) {
      ++pos;
      continue;
    }
    append_plain(text.substr(start, pos - start));
    out.push_back(s->id);
    pos += s->text.size();
    if (s->rstrip)
      while (pos < text.size() && is_ascii_space(text[pos])) ++pos;
    start = pos;
  }
  append_plain(text.substr(start));
  return out;
}

std::vector<int32_t> Tokenizer::encode_with_specials(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out = encode(text, add_bos(), parse_special);
  if (d_->add_sep) out.push_back(d_->sep);
  if (d_->add_eos) out.push_back(d_->eos);
  return out;
}

std::string Tokenizer::decode_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= d_->tokens.size())
    fail(ErrorKind::invalid_input, "tokenizer.decode",
         "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(d_->tokens.size()));
  if (d_->types[id] == static_cast<int32_t>(TokenType::control)) return {};
  switch (d_->kind) {
    case TokenizerKind::spm: return detail::spm_decode_token(*d_, id);
    case TokenizerKind::bpe: return detail::bpe_decode_token(*d_, id);
    case TokenizerKind::wpm: return detail::wpm_decode_token(*d_, id);
    case TokenizerKind::ugm: return detail::ugm_decode_token(*d_, id);
  }
  return {};
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= d_->tokens.size())
    fail(ErrorKind::invalid_input, "tokenizer.token_text",
         "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(d_->tokens.size()));
  return d_->tokens[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool first = true;  // no text piece emitted yet
  for (int32_t id : ids) {
    std::string piece = decode_token(id);
    if (piece.empty()) continue;
    // SentencePiece: the prefix space belongs to the first word only when the
    // encoder added it, and decode() always starts at the beginning of a text.
    // WordPiece: a word's first piece decodes with the space before it.
    const bool prefixed = d_->kind == TokenizerKind::wpm ||
                          ((d_->kind == TokenizerKind::spm || d_->kind == TokenizerKind::ugm) && d_->add_space_prefix);
    if (first && prefixed && piece[0] == ' ' && d_->has_type(id, TokenType::normal)) piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::bos() const {
  return d_->bos;
}
bool Tokenizer::add_bos() const {
  return d_->add_bos;
}
int32_t Tokenizer::eos() const {
  return d_->eos;
}
int32_t Tokenizer::eot() const {
  return d_->eot;
}
bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(d_->eog.begin(), d_->eog.end(), id);
}
size_t Tokenizer::vocab_size() const {
  return d_->tokens.size();
}
const std::string& Tokenizer::warning() const {
  return d_->warning;
}

}  // namespace weft::model
