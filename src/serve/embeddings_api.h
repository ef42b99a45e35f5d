// The embeddings APIs' bodies (docs/serve.md, "Embeddings"): OpenAI's
// /v1/embeddings and Ollama's /api/embed checked and turned into an engine
// EmbedJob, and the pooled vectors turned into each API's reply.
//
//   EmbeddingsRequest r = parse_embeddings(body, ctx, shape);   // throws ApiError 400 naming the field
//   ... engine.submit_embed(r.job) ... result ...
//   Json reply = embeddings_response(r, result, model_name);
//
// Pure: no sockets, no threads (unit-tested directly).
#pragma once

#include <cstdint>
#include <string>

#include "serve/engine.h"
#include "serve/openai_api.h"

namespace weft::serve {

// What the parser needs of the model beyond ApiContext.
struct EmbeddingShape {
  int64_t n_embd = 0;         // the vectors' width (a `dimensions` asked must equal it)
  int64_t pooling_type = -1;  // LlamaParams::pooling_type (the default pooling; pooling_of_file)
};

struct EmbeddingsRequest {
  EmbedJob job;
  bool base64 = false;  // OpenAI's encoding_format "base64"
};

// At most this many inputs in one request (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// OpenAI's body: `input` a string, an array of strings, an array of token
// ids or an array of such arrays (none empty; each fits a slot's context
// and its ids the vocabulary), `encoding_format` "float" or "base64",
// `dimensions` (only the model's width), `model` and `user` (any string),
// and weft's `pooling` ("mean", "cls", "last"; default: the file's).
EmbeddingsRequest parse_embeddings(const Json& body, const ApiContext& ctx, const EmbeddingShape& shape);
// Ollama's /api/embed body: `input` a string or an array of strings,
// `truncate` (default true: an input longer than a slot's context keeps
// its first tokens; false: 400), `dimensions`, `model`, `options`,
// `keep_alive` (taken, unused) and weft's `pooling`.
EmbeddingsRequest parse_ollama_embed(const Json& body, const ApiContext& ctx, const EmbeddingShape& shape);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}; each embedding a
// float array, or with base64 its float32 bytes in base64.
Json embeddings_response(const EmbeddingsRequest& r, const EmbedResult& result, const std::string& model);
// {"model", "embeddings": [[...]], "total_duration", "load_duration",
// "prompt_eval_count"}: durations in nanoseconds.
Json ollama_embed_response(const EmbedResult& result, const std::string& model, int64_t total_ns);

}  // namespace weft::serve
