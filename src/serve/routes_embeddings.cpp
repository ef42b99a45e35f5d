// The embeddings routes (docs/serve.md, "Embeddings"): OpenAI's
// /v1/embeddings (and /embeddings) and Ollama's /api/embed. Each request
// waits for the engine, which serves it between its steps.
#include <chrono>

#include "serve/embeddings_api.h"
#include "serve/ollama_api.h"
#include "serve/route_helpers.h"

namespace weft::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Submits job and waits for its result, cancelling it when the client
// leaves. Throws ApiError 429 when the queue is full, 500 when the model
// failed, 503 when cancelled or timed out.
EmbedResult run_embedding(Server::Impl& s, Engine& engine, EmbedJob job, const httplib::Request& req,
                          httplib::Response& res) {
  job.deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s.options.request_timeout_seconds * 1e3));
  std::shared_ptr<EmbedRequest> request = engine.submit_embed(std::move(job));
  if (!request) {
    res.set_header("Retry-After", "1");
    throw ApiError(429, "rate_limit_error", "the server is busy: every slot and queue place is taken", "",
                   "rate_limit_exceeded");
  }
  const PeerAddress peer{req.remote_addr, req.remote_port, s.port};
  std::optional<EmbedResult> result;
  while (!(result = request->wait(std::chrono::milliseconds(200))))
    if (!peer_connected(peer)) request->cancel();
  if (result->error == "cancelled" || result->error == "timeout")
    throw ApiError(503, "unavailable_error", "the embeddings request was " + std::string(result->error == "timeout" ? "timed out" : "cancelled") +
                                                 ": its client left, it passed its deadline or the server is stopping");
  if (!result->error.empty()) throw ApiError(500, "server_error", "embeddings failed: " + result->error);
  return std::move(*result);
}

EmbeddingShape shape_of(const Server::Impl& s) {
  return {.n_embd = s.session->params().n_embd, .pooling_type = s.session->params().pooling_type};
}

}  // namespace

void add_embedding_routes(Server::Impl& s) {
  auto openai = [&s](const httplib::Request& req, httplib::Response& res) {
    s.begin(req);
    guarded(res, [&] {
      Engine& engine = loaded_engine(s);
      EmbeddingsRequest r = parse_embeddings(parse_body(req), s.api, shape_of(s));
      const EmbedResult result = run_embedding(s, engine, std::move(r.job), req, res);
      send_json(res, 200, embeddings_response(r, result, s.model_name));
    });
  };
  s.http.Post("/v1/embeddings", openai);
  s.http.Post("/embeddings", openai);
  s.http.Post("/api/embed", [&s](const httplib::Request& req, httplib::Response& res) {
    s.begin(req);
    const Clock::time_point arrival = Clock::now();
    guarded(
        res,
        [&] {
          Engine& engine = loaded_engine(s);
          EmbeddingsRequest r = parse_ollama_embed(parse_body(req), s.api, shape_of(s));
          const EmbedResult result = run_embedding(s, engine, std::move(r.job), req, res);
          const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - arrival).count();
          send_json(res, 200, ollama_embed_response(result, s.model_name, ns));
        },
        ollama_error);
  });
}

}  // namespace weft::serve
