// Tokenizer: loading from GGUF metadata, special tokens, and decode; the
// encoders live in tokenizer_spm.cpp and tokenizer_bpe.cpp.
#include "weft/tokenizer.h"

#include <cstdio>

#include "tokenizer_impl.h"
#include "weft/error.h"
#include "weft/gguf.h"

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
    d->merge_ranks.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string& m = (*merges)[i];
      if (m.find(' ', 1) == std::string::npos)
        fail(ErrorKind::invalid_input, kWhere,
             "tokenizer.ggml.merges[" + std::to_string(i) + "] '" + m + "' is not 'a b'");
      d->merge_ranks.emplace(m, static_cast<int32_t>(i));
    }
    const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
    if (pre == "llama-bpe" || pre == "llama3")
      d->pre = detail::PreTokenizer::llama3;
    else if (pre == "qwen2")
      d->pre = detail::PreTokenizer::qwen2;
    else
      d->pre = detail::PreTokenizer::gpt2;  // "default", "gpt2" and names we do not know
  }

  d->bos = read_id(f, "tokenizer.ggml.bos_token_id", n);
  d->eos = read_id(f, "tokenizer.ggml.eos_token_id", n);
  d->unk = read_id(f, "tokenizer.ggml.unknown_token_id", n);
  d->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(d->kind == TokenizerKind::spm);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(d)));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerData> data) : d_(std::move(data)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos) {
    if (d_->bos < 0)
      fail(ErrorKind::invalid_input, "tokenizer.encode", "add_bos but the file has no tokenizer.ggml.bos_token_id");
    out.push_back(d_->bos);
  }
  std::vector<int32_t> body =
      d_->kind == TokenizerKind::spm ? detail::spm_encode(*d_, text) : detail::bpe_encode(*d_, text);
  out.insert(out.end(), body.begin(), body.end());
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
int32_t Tokenizer::eos() const {
  return d_->eos;
}
size_t Tokenizer::vocab_size() const {
  return d_->tokens.size();
}

}  // namespace weft::model
