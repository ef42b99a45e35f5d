// Embeddings from a model's hidden states (a decoder's or an encoder's):
// which rows make a vector (pooling), and its L2 normalisation. What
// /v1/embeddings and Ollama's /api/embed return (docs/serve.md, "Embeddings").
//
//   std::vector<std::vector<float>> rows = batch.hidden_states(inputs);  // each n * n_embd, token-major
//   std::vector<float> v = pool_normalized(rows[0], n_embd, Pooling::last);
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::serve {

// How a sequence's hidden rows become one vector: their mean, the first
// row (a BERT-style CLS token), or the last row (decoder models: the only
// token that has seen the whole text).
enum class Pooling { mean, cls, last };

// The pooling of a file's pooling_type (LlamaParams::pooling_type: 1 mean,
// 2 cls, 3 last). A decoder model whose file gives none (-1, absent; or 0,
// none) pools the last row, as decoder embedding models do (docs/serve.md);
// nullopt for 4 (rank: a reranker's score, not an embedding).
std::optional<Pooling> pooling_of_file(int64_t pooling_type);
// "mean", "cls", "last" (a request's `pooling`); nullopt for anything else.
std::optional<Pooling> pooling_named(const std::string& name);
const char* pooling_name(Pooling p);

// rows: n tokens' hidden states, token-major, n_embd floats each (n >= 1).
// Returns the pooled vector scaled to unit L2 norm (accumulated in double);
// an all-zero vector stays zero. Throws Error(invalid_input) when rows is
// empty or not a whole number of n_embd rows.
std::vector<float> pool_normalized(std::span<const float> rows, size_t n_embd, Pooling pooling);

// The vector as OpenAI's encoding_format "base64" sends it: its float32
// values' little-endian bytes, in standard base64 (with padding).
std::string base64_floats(std::span<const float> v);

}  // namespace weft::serve
