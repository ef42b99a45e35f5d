// The server's HTTP routes (docs/serve.md): the page, health, models,
// metrics, tokenize/detokenize, and the two completion endpoints, streamed
// as server-sent events or answered whole.
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <chrono>
#include <random>

#include "serve/chat_page.h"
#include "serve/json_brackets.h"
#include "serve/route_helpers.h"
#include "serve/server_impl.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {

constexpr const char* kJson = "application/json";
constexpr int kMaxJsonDepth = 64;


// Nesting of a JSON text, scanned without parsing (strings skipped): a body
// nested deeper than kMaxJsonDepth is refused before the parser sees it.
int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  scan_json_brackets(text, [&](size_t, char c) {
    if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else
      --depth;
    return true;
  });
  return deepest;
}


// s with control bytes and backslashes escaped (\xNN): a log line per request.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 256)) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return s.size() > 256 ? out + "..." : out;
}





}  // namespace

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

Json parse_body(const httplib::Request& req) {
  if (json_depth(req.body) > kMaxJsonDepth)
    bad_request("", "the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return Json::parse(req.body);
  } catch (const Json::exception& e) {
    bad_request("", std::string("the body is not valid JSON: ") + e.what());
  }
}

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
  return id;
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

Engine* Server::Impl::ready_engine(httplib::Response& res) {
  std::lock_guard<std::mutex> lock(mu);
  if (state == ServerState::ready) return engine.get();
  if (state == ServerState::loading)
    send_error(res, ApiError(503, "unavailable_error", "the model is loading", "", "model_loading"));
  else
    send_error(res, ApiError(500, "server_error", "the model failed to load: " + load_error));
  return nullptr;
}

bool Server::Impl::authorized(const httplib::Request& req) const {
  if (key_digest.empty()) return true;
  // Authorization: Bearer KEY, or x-api-key: KEY (Anthropic's clients).
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const std::string given = header.compare(0, prefix.size(), prefix) == 0 ? header.substr(prefix.size())
                                                                          : req.get_header_value("x-api-key");
  // Digests of equal length compared in constant time: neither the key's
  // length nor its bytes leak through timing.
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(given.data()), given.size(), digest);
  return CRYPTO_memcmp(digest, key_digest.data(), sizeof digest) == 0;
}

void Server::Impl::begin(const httplib::Request& req) { watchdog.request_started({req.remote_addr, req.remote_port, port}); }

void Server::Impl::count(const std::string& path, int status) {
  // By route: a client's made-up paths must not grow the table.
  static const char* const routes[] = {"/",           "/favicon.ico",    "/health",           "/metrics",
                                       "/v1/models",  "/tokenize",       "/detokenize",       "/v1/completions",
                                       "/completions", "/v1/chat/completions", "/chat/completions",
                                       "/api/chat",   "/api/generate",   "/api/tags",         "/api/show",
                                       "/api/version", "/api/embed",     "/v1/messages",
                                       "/v1/embeddings", "/embeddings", "/v1/pool",   "/pool.js"};
  std::string route = "other";
  for (const char* r : routes)
    if (path == r) route = r;
  if (path.rfind("/v1/models/", 0) == 0) route = "/v1/models/{id}";
  std::lock_guard<std::mutex> lock(counts_mu);
  ++request_counts[{route, status}];
}

void Server::Impl::add_guards() {
  // Runs after the headers, before any body is read: the key, and bodies
  // whose size cpp-httplib would not bound (it checks only Content-Length
  // against the payload limit: a chunked body, one without a length, or a
  // compressed one it would inflate are refused here).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // The page and its pool script are static: the key guards what they fetch.
    const bool open_path =
        req.path == "/health" || req.path == "/" || req.path == "/favicon.ico" || req.path == "/pool.js";
    if (!open_path && !authorized(req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error_for(req.path, res,
                     ApiError(401, "authentication_error",
                              "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)", "",
                              "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Content-Encoding")) {
      send_error_for(req.path, res, ApiError(415, "invalid_request_error", "compressed request bodies are not accepted"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Transfer-Encoding") || (req.method == "POST" && !req.has_header("Content-Length"))) {
      send_error_for(req.path, res, ApiError(411, "invalid_request_error", "a request body needs a Content-Length (no chunked bodies)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    // cpp-httplib caps form-encoded bodies at 8 KiB (what `curl -d` sends
    // without a Content-Type): say how to send JSON.
    const bool form = req.get_header_value("Content-Type") == "application/x-www-form-urlencoded";
    const std::string message = status == 404 ? "no route " + req.method + " " + req.path
                                : status == 413 && form
                                    ? "a body sent as application/x-www-form-urlencoded is limited to 8 KiB: "
                                      "send 'Content-Type: application/json'"
                                : status == 413 ? "the request body is too large"
                                                : "the request could not be read";
    send_error_for(req.path, res, ApiError(status, status == 404 ? "not_found_error" : "invalid_request_error", message));
    res.status = status;
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", what));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    watchdog.request_done({req.remote_addr, req.remote_port, port});
    count(req.path, res.status);
    if (options.log)
      std::fprintf(stderr, "[serve] %s %s %d %s\n", printable(req.method).c_str(), printable(req.path).c_str(),
                   res.status, req.remote_addr.c_str());
  });
}

void Server::Impl::add_routes() {
  add_guards();
  // Each handler runs after begin(): the request was read.
  using Handler = void (Impl::*)(const httplib::Request&, httplib::Response&);
  auto route = [this](Handler handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      begin(req);
      (this->*handler)(req, res);
    };
  };
  auto completion = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      begin(req);
      post_completion(req, res, chat);
    };
  };
  http.Get("/", route(&Impl::get_page));
  // Browsers ask for an icon with every page: none, and no error.
  http.Get("/favicon.ico", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    res.status = 204;
  });
  http.Get("/health", route(&Impl::get_health));
  http.Get(R"(/v1/models(/[^/]+)?)", route(&Impl::get_models));
  http.Get("/metrics", route(&Impl::get_metrics));
  http.Get("/pool.js", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    res.set_content(std::string(pool_view_script()), "text/javascript; charset=utf-8");
  });
  http.Get("/v1/pool", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    guarded(res, [&] { send_json(res, 200, pool_status(*this)); });
  });
  http.Post("/tokenize", route(&Impl::post_tokenize));
  http.Post("/detokenize", route(&Impl::post_detokenize));
  http.Post("/v1/completions", completion(false));
  http.Post("/completions", completion(false));
  http.Post("/v1/chat/completions", completion(true));
  http.Post("/chat/completions", completion(true));
  add_ollama_routes(*this);
  add_anthropic_routes(*this);
  add_embedding_routes(*this);
}

void Server::Impl::get_page(const httplib::Request&, httplib::Response& res) {
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'unsafe-inline'; script-src 'self' 'unsafe-inline'");
  res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
}

void Server::Impl::get_health(const httplib::Request&, httplib::Response& res) {
  std::lock_guard<std::mutex> lock(mu);
  if (state == ServerState::loading)
    send_json(res, 503, {{"status", "loading"}, {"progress", progress}});
  else if (state == ServerState::failed)
    send_json(res, 500, {{"status", "error"}, {"error", load_error}});
  else {
    // Degraded: serving, on fewer devices than it started with (a worker
    // died and the model was placed again, docs/recovery.md).
    const EngineMetrics m = engine->metrics();
    Json body = {{"status", m.devices_lost.empty() ? "ok" : "degraded"},
                 {"slots_idle", m.slots - m.slots_busy},
                 {"slots_processing", m.slots_busy},
                 {"queue_length", m.queue_length}};
    if (!m.devices_lost.empty()) body["devices_lost"] = m.devices_lost;
    send_json(res, 200, body);
  }
}

void Server::Impl::get_models(const httplib::Request& req, httplib::Response& res) {
  guarded(res, [&] {
    if (!ready_engine(res)) return;
    const model::LlamaParams& p = session->params();
    Json meta = {{"architecture", p.arch_name},
                 {"n_vocab", p.n_vocab},
                 {"n_ctx_train", p.n_ctx_train},
                 {"n_embd", p.n_embd},
                 {"n_layer", p.n_layer},
                 {"n_ctx", options.ctx_size},
                 {"n_ctx_slot", options.ctx_size / options.parallel},
                 {"parallel", options.parallel}};
    Json model = {{"id", model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "weft"}, {"meta", meta}};
    if (req.matches[1].length() == 0) {
      send_json(res, 200, {{"object", "list"}, {"data", Json::array({model})}});
    } else if (req.matches[1].str().substr(1) == model_name) {  // GET /v1/models/{id}
      send_json(res, 200, model);
    } else {
      throw ApiError(404, "not_found_error", "no model '" + req.matches[1].str().substr(1) + "' (this server has '" +
                                                 model_name + "')", "model", "model_not_found");
    }
  });
}

void Server::Impl::get_metrics(const httplib::Request&, httplib::Response& res) {
  res.set_content(metrics_text(), "text/plain; version=0.0.4");
}

void Server::Impl::post_tokenize(const httplib::Request& req, httplib::Response& res) {
  guarded(res, [&] {
    if (!ready_engine(res)) return;
    const Json body = parse_body(req);
    if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
      bad_request("content", "'content' must be a string");
    const bool add_special = body.contains("add_special") && body["add_special"].is_boolean() &&
                             body["add_special"].get<bool>();
    const bool parse_special = body.contains("parse_special") && body["parse_special"].is_boolean() &&
                               body["parse_special"].get<bool>();
    const model::Tokenizer& tok = session->tokenizer();
    const auto ids = tok.encode(body["content"].get<std::string>(), add_special && tok.add_bos(), parse_special);
    Json tokens = Json::array();
    for (int32_t id : ids) tokens.push_back(id);
    send_json(res, 200, {{"tokens", tokens}});
  });
}

void Server::Impl::post_detokenize(const httplib::Request& req, httplib::Response& res) {
  guarded(res, [&] {
    if (!ready_engine(res)) return;
    const Json body = parse_body(req);
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      bad_request("tokens", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const Json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= api.n_vocab)
        bad_request("tokens", "a token must be an id in [0, " + std::to_string(api.n_vocab) + ")");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    send_json(res, 200, {{"content", session->tokenizer().decode(ids)}});
  });
}

}  // namespace weft::serve
