// The embeddings APIs' bodies and replies (embeddings_api.h).
#include "serve/embeddings_api.h"

#include "serve/embedding.h"

namespace weft::serve {

namespace {

// `input[i]` for messages: which input was wrong.
std::string input_name(size_t i, bool many) { return many ? "input[" + std::to_string(i) + "]" : "input"; }

// A text input's tokens with the specials the file says to add around a
// text (its BOS or [CLS], and [SEP] or EOS where it asks for them, as
// encoder files do).
std::vector<int32_t> text_tokens(const Json& v, const std::string& name, const ApiContext& ctx) {
  const std::string text = v.get<std::string>();
  if (text.empty()) bad_request("input", "'" + name + "' is an empty string");
  return ctx.tokenizer->encode_with_specials(text);
}

std::vector<int32_t> id_tokens(const Json& v, const std::string& name, const ApiContext& ctx) {
  std::vector<int32_t> ids;
  for (size_t j = 0; j < v.size(); ++j) {
    const Json& id = v[j];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= ctx.n_vocab)
      bad_request("input", "'" + name + "[" + std::to_string(j) + "]' must be a token id in [0, " +
                               std::to_string(ctx.n_vocab) + ")");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// Cuts tokens to a slot's context (truncate), else refuses them.
void fit_context(std::vector<int32_t>& tokens, const std::string& name, const ApiContext& ctx, bool truncate) {
  if (tokens.empty()) bad_request("input", "'" + name + "' has no tokens");
  if (static_cast<int64_t>(tokens.size()) <= ctx.slot_context) return;
  if (truncate) {
    tokens.resize(static_cast<size_t>(ctx.slot_context));
    return;
  }
  bad_request("input", "'" + name + "' is " + std::to_string(tokens.size()) + " tokens, more than a slot's context of " +
                           std::to_string(ctx.slot_context));
}

// `input` as strings (and, for OpenAI, token arrays) into the job's inputs.
void read_inputs(const Json& body, const ApiContext& ctx, bool token_arrays, bool truncate, EmbedJob& job) {
  if (!body.contains("input")) bad_request("input", "'input' is required");
  const Json& in = body["input"];
  const char* kinds = token_arrays ? "a string, an array of strings, an array of token ids or an array of such arrays"
                                   : "a string or an array of strings";
  auto add = [&](std::vector<int32_t> tokens, const std::string& name) {
    fit_context(tokens, name, ctx, truncate);
    job.inputs.push_back(std::move(tokens));
  };
  if (in.is_string()) return add(text_tokens(in, "input", ctx), "input");
  if (!in.is_array()) bad_request("input", std::string("'input' must be ") + kinds);
  if (in.empty()) bad_request("input", "'input' is an empty array");
  if (token_arrays && in[0].is_number()) return add(id_tokens(in, "input", ctx), "input");  // one token array
  if (in.size() > kMaxEmbeddingInputs)
    bad_request("input", "'input' has " + std::to_string(in.size()) + " inputs, more than " +
                             std::to_string(kMaxEmbeddingInputs));
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string name = input_name(i, true);
    if (in[i].is_string())
      add(text_tokens(in[i], name, ctx), name);
    else if (token_arrays && in[i].is_array())
      add(id_tokens(in[i], name, ctx), name);
    else
      bad_request("input", std::string("'") + name + "' must be " +
                               (token_arrays ? "a string or an array of token ids" : "a string"));
  }
}

// `dimensions` (only the model's width) and weft's `pooling`.
void read_shape(const Json& body, const EmbeddingShape& shape, EmbedJob& job) {
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    const Json& d = body["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() != shape.n_embd)
      bad_request("dimensions", "'dimensions' must be the model's embedding width, " + std::to_string(shape.n_embd) +
                                    " (vectors are not shortened)");
  }
  std::optional<Pooling> pooling = pooling_of_file(shape.pooling_type);
  if (body.contains("pooling") && !body["pooling"].is_null()) {
    const Json& p = body["pooling"];
    pooling = p.is_string() ? pooling_named(p.get<std::string>()) : std::nullopt;
    if (!pooling) bad_request("pooling", "'pooling' must be \"mean\", \"cls\" or \"last\"");
  }
  if (!pooling)
    bad_request("pooling", "the model's pooling_type is rank (a reranker): ask for \"pooling\": \"mean\", \"cls\" or \"last\"");
  job.pooling = *pooling;
}

void require_object(const Json& body) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  for (const char* name : {"model", "user"})
    if (body.contains(name) && !body[name].is_string() && !body[name].is_null())
      bad_request(name, std::string("'") + name + "' must be a string");
}

}  // namespace

EmbeddingsRequest parse_embeddings(const Json& body, const ApiContext& ctx, const EmbeddingShape& shape) {
  require_object(body);
  EmbeddingsRequest r;
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const Json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      bad_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    r.base64 = f == "base64";
  }
  read_shape(body, shape, r.job);
  read_inputs(body, ctx, true, false, r.job);
  return r;
}

EmbeddingsRequest parse_ollama_embed(const Json& body, const ApiContext& ctx, const EmbeddingShape& shape) {
  require_object(body);
  bool truncate = true;
  if (body.contains("truncate")) {
    if (!body["truncate"].is_boolean()) bad_request("truncate", "'truncate' must be a boolean");
    truncate = body["truncate"].get<bool>();
  }
  if (body.contains("options") && !body["options"].is_object() && !body["options"].is_null())
    bad_request("options", "'options' must be an object");
  EmbeddingsRequest r;
  read_shape(body, shape, r.job);
  read_inputs(body, ctx, false, truncate, r.job);
  return r;
}

Json embeddings_response(const EmbeddingsRequest& r, const EmbedResult& result, const std::string& model) {
  Json data = Json::array();
  for (size_t i = 0; i < result.vectors.size(); ++i) {
    const std::vector<float>& v = result.vectors[i];
    Json item = {{"object", "embedding"}, {"index", i}};
    if (r.base64)
      item["embedding"] = base64_floats(v);
    else
      item["embedding"] = std::vector<double>(v.begin(), v.end());  // each float exactly, as the shortest double
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", result.prompt_tokens}, {"total_tokens", result.prompt_tokens}}}};
}

Json ollama_embed_response(const EmbedResult& result, const std::string& model, int64_t total_ns) {
  Json vectors = Json::array();
  for (const std::vector<float>& v : result.vectors) vectors.push_back(std::vector<double>(v.begin(), v.end()));
  return {{"model", model},
          {"embeddings", std::move(vectors)},
          {"total_duration", total_ns},
          {"load_duration", 0},
          {"prompt_eval_count", result.prompt_tokens}};
}

}  // namespace weft::serve
