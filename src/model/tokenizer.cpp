// Tokenizer: loading from GGUF metadata, special tokens, and decode; the
// encoders live in tokenizer_spm.cpp and tokenizer_bpe.cpp.
#include "weft/model/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "tokenizer_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft::model {

using detail::TokenizerData;
using detail::TokenizerKind;
using detail::TokenType;

namespace {

constexpr const char* kWhere = "tokenizer";

int32_t read_id(const GgufFile& f, const std::string& key, size_t n_vocab) {
  const GgufValue* v = f.find(key);
  if (!v) return -1;
  std::optional<int64_t> id = f.get_i64(key);
  if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_vocab)
    fail(ErrorKind::invalid_input, kWhere,
         key + " = " + (id ? std::to_string(*id) : "?") + " is outside the vocabulary of " + std::to_string(n_vocab));
  return static_cast<int32_t>(*id);
}

// The first of names that is a control token, or -1.
int32_t find_control(const TokenizerData& d, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    int32_t id = d.find(name);
    if (id >= 0 && d.types[id] == static_cast<int32_t>(TokenType::control)) return id;
  }
  return -1;
}

// Fills d.specials: control, user-defined and unknown tokens with text, by
// first byte, longest first.
void index_specials(TokenizerData& d) {
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const auto type = static_cast<TokenType>(d.types[i]);
    if (d.tokens[i].empty() ||
        (type != TokenType::control && type != TokenType::user_defined && type != TokenType::unknown))
      continue;
    if (d.ids.at(d.tokens[i]) != static_cast<int32_t>(i)) continue;  // a duplicate text: the first id wins
    d.specials[static_cast<unsigned char>(d.tokens[i][0])].push_back({d.tokens[i], static_cast<int32_t>(i)});
  }
  for (auto& bucket : d.specials)
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
}

// The longest special token whose text starts text, or nullptr.
const detail::SpecialToken* match_special(const TokenizerData& d, std::string_view text) {
  for (const detail::SpecialToken& s : d.specials[static_cast<unsigned char>(text[0])])
    if (text.starts_with(s.text)) return &s;
  return nullptr;
}

std::vector<int32_t> encode_plain(const TokenizerData& d, std::string_view text) {
  return d.kind == TokenizerKind::spm ? detail::spm_encode(d, text) : detail::bpe_encode(d, text);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  auto d = std::make_unique<TokenizerData>();
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("llama");
  if (model == "llama") {
    d->kind = TokenizerKind::spm;
  } else if (model == "gpt2") {
    d->kind = TokenizerKind::bpe;
  } else {
    fail(ErrorKind::invalid_input, kWhere, "tokenizer.ggml.model '" + model + "' is not supported (llama, gpt2)");
  }

  auto tokens = f.get_array_strings("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty())
    fail(ErrorKind::invalid_input, kWhere, "tokenizer.ggml.tokens is missing or empty in " + f.path());
  if (tokens->size() > static_cast<size_t>(INT32_MAX))
    fail(ErrorKind::invalid_input, kWhere, "tokenizer.ggml.tokens has too many entries");
  d->tokens = std::move(*tokens);
  const size_t n = d->tokens.size();

  d->scores = f.get_array_f32("tokenizer.ggml.scores").value_or(std::vector<float>(n, 0.f));
  if (d->scores.size() != n)
    fail(ErrorKind::invalid_input, kWhere,
         "tokenizer.ggml.scores has " + std::to_string(d->scores.size()) + " entries, tokens " + std::to_string(n));
  d->types = f.get_array_i32("tokenizer.ggml.token_type")
                 .value_or(std::vector<int32_t>(n, static_cast<int32_t>(TokenType::normal)));
  if (d->types.size() != n)
    fail(ErrorKind::invalid_input, kWhere,
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
    if (!merges) fail(ErrorKind::invalid_input, kWhere, "tokenizer.ggml.merges is missing for a gpt2 tokenizer");
    detail::bpe_load(*d, *merges, f.get_string("tokenizer.ggml.pre").value_or(""));
  }

  d->bos = read_id(f, "tokenizer.ggml.bos_token_id", n);
  d->eos = read_id(f, "tokenizer.ggml.eos_token_id", n);
  d->unk = read_id(f, "tokenizer.ggml.unknown_token_id", n);
  d->eot = read_id(f, "tokenizer.ggml.eot_token_id", n);
  d->eom = read_id(f, "tokenizer.ggml.eom_token_id", n);
  if (d->eot < 0) d->eot = find_control(*d, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"});
  if (d->eom < 0) d->eom = find_control(*d, {"<|eom_id|>"});
  index_specials(*d);
  d->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(d->kind == TokenizerKind::spm);
  // llama.cpp's defaults when the key is absent: SentencePiece files and
  // Llama 3's BPE add bos, other BPE files do not.
  const bool bos_by_default = d->kind == TokenizerKind::spm || d->pre == detail::PreTokenizer::llama3;
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
  if (!parse_special) {
    append_plain(text);
    return out;
  }
  // Leftmost-longest special tokens; the text between them encodes as plain
  // text (each part on its own, as llama.cpp does: for spm each part gets
  // the space prefix).
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const detail::SpecialToken* s = match_special(*d_, text.substr(pos));
    if (!s) {
      ++pos;
      continue;
    }
    append_plain(text.substr(start, pos - start));
    out.push_back(s->id);
    pos += s->text.size();
    start = pos;
  }
  append_plain(text.substr(start));
  return out;
}

std::string Tokenizer::decode_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= d_->tokens.size())
    fail(ErrorKind::invalid_input, "tokenizer.decode",
         "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(d_->tokens.size()));
  if (d_->types[id] == static_cast<int32_t>(TokenType::control)) return {};
  return d_->kind == TokenizerKind::spm ? detail::spm_decode_token(*d_, id) : detail::bpe_decode_token(*d_, id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool first = true;  // no text piece emitted yet
  for (int32_t id : ids) {
    std::string piece = decode_token(id);
    if (piece.empty()) continue;
    // SentencePiece: the prefix space belongs to the first word only when the
    // encoder added it, and decode() always starts at the beginning of a text.
    if (first && d_->kind == TokenizerKind::spm && d_->add_space_prefix && piece[0] == ' ' &&
        d_->types[id] != static_cast<int32_t>(TokenType::byte))
      piece.erase(0, 1);
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
  return id >= 0 && (id == d_->eos || id == d_->eot || id == d_->eom);
}
size_t Tokenizer::vocab_size() const {
  return d_->tokens.size();
}
const std::string& Tokenizer::warning() const {
  return d_->warning;
}

}  // namespace weft::model
