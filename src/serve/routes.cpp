// The server's HTTP routes (docs/serve.md): the page, health, models,
// metrics, tokenize/detokenize, and the two completion endpoints, streamed
// as server-sent events or answered whole.
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <chrono>
#include <functional>
#include <random>

#include "serve/chat_page.h"
#include "serve/peer_probe.h"
#include "serve/server_impl.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {

constexpr const char* kJson = "application/json";
constexpr int kMaxJsonDepth = 64;

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

// Nesting of a JSON text, scanned without parsing (strings skipped): a body
// nested deeper than kMaxJsonDepth is refused before the parser sees it.
int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
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

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
  return id;
}

// Runs a handler body, turning ApiError and weft::Error into OpenAI errors.
template <class F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    const int status = e.kind() == ErrorKind::invalid_input   ? 400
                       : e.kind() == ErrorKind::disconnected  ? 503
                       : e.kind() == ErrorKind::out_of_memory ? 413
                                                              : 500;
    send_error(res, ApiError(status, status == 400 ? "invalid_request_error" : "server_error", e.what()));
  }
}

// A cancel check for rendering a request's chat template (RenderControl):
// whether its client has left. Rendering looks every few thousand steps; the
// socket is probed at most every 200 ms (a probe reads /proc), and not in a
// render's first 200 ms, which is all that nearly every render takes.
std::function<bool()> client_gone(const PeerAddress& peer) {
  return
      [peer, next_probe = std::chrono::steady_clock::now() + std::chrono::milliseconds(200), gone = false]() mutable {
        const auto now = std::chrono::steady_clock::now();
        if (!gone && now >= next_probe) {
          gone = !peer_connected(peer);
          next_probe = now + std::chrono::milliseconds(200);
        }
        return gone;
      };
}

// One call of a stream's content provider: the next event as SSE lines, or
// a check that the client is still there when none came. False ends the
// stream (the client left, or it is complete).
bool stream_step(Request& request, const CompletionRequest& r, const ResponseMeta& meta, bool& first,
                 const model::Tokenizer& tok, const PeerAddress& peer, httplib::DataSink& sink) {
  std::optional<Event> e = request.next(std::chrono::milliseconds(100));
  if (!e) {  // nothing to write (queued, or a long prompt): is anyone there?
    if ((sink.is_writable && !sink.is_writable()) || !peer_connected(peer)) {
      request.cancel();
      return false;
    }
    return true;
  }
  auto send = [&](const Json& j) {
    const std::string line = "data: " + dump_json(j) + "\n\n";
    return sink.write(line.data(), line.size());
  };
  bool ok = true;
  // A stream cut short (generation failed, or the server is stopping) ends
  // with an error event rather than a finish_reason clients would take for
  // a complete reply.
  const bool failed = e->finished && (e->finish_reason == "error" || e->finish_reason == "cancelled");
  if (failed) {
    if (!e->text.empty()) {
      Event piece = *e;
      piece.finished = false;
      ok = send(stream_chunk(r, meta, piece, first, tok));
    }
    const ApiError err = e->finish_reason == "error"
                             ? ApiError(500, "server_error", "generation failed: " + e->error)
                             : ApiError(503, "unavailable_error", "the request was cancelled: the server is stopping");
    ok = ok && send(err.body());
  } else {
    ok = send(stream_chunk(r, meta, *e, first, tok));
    if (ok && e->finished && r.include_usage) ok = send(usage_chunk(r, meta, *e));
  }
  first = false;
  if (ok && e->finished) {
    static const std::string done = "data: [DONE]\n\n";
    ok = sink.write(done.data(), done.size());
    sink.done();
  }
  if (!ok) request.cancel();
  return ok;
}

}  // namespace

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
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const std::string given = header.compare(0, prefix.size(), prefix) == 0 ? header.substr(prefix.size()) : "";
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
                                       "/completions", "/v1/chat/completions", "/chat/completions"};
  std::string route = "other";
  for (const char* r : routes)
    if (path == r) route = r;
  if (path.rfind("/v1/models/", 0) == 0) route = "/v1/models/{id}";
  std::lock_guard<std::mutex> lock(counts_mu);
  ++request_counts[{route, status}];
}

void Server::Impl::add_routes() {
  // Runs after the headers, before any body is read: the key, and bodies
  // whose size cpp-httplib would not bound (it checks only Content-Length
  // against the payload limit: a chunked body, one without a length, or a
  // compressed one it would inflate are refused here).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool open_path = req.path == "/health" || req.path == "/" || req.path == "/favicon.ico";
    if (!open_path && !authorized(req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, ApiError(401, "authentication_error", "a valid API key is required (Authorization: Bearer KEY)",
                               "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Content-Encoding")) {
      send_error(res, ApiError(415, "invalid_request_error", "compressed request bodies are not accepted"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Transfer-Encoding") || (req.method == "POST" && !req.has_header("Content-Length"))) {
      send_error(res, ApiError(411, "invalid_request_error", "a request body needs a Content-Length (no chunked bodies)"));
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
    send_error(res, ApiError(status, status == 404 ? "not_found_error" : "invalid_request_error", message));
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

  http.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    res.set_header("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'");
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });

  // Browsers ask for an icon with every page: none, and no error.
  http.Get("/favicon.ico", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    res.status = 204;
  });

  http.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    std::lock_guard<std::mutex> lock(mu);
    if (state == ServerState::loading)
      send_json(res, 503, {{"status", "loading"}, {"progress", progress}});
    else if (state == ServerState::failed)
      send_json(res, 500, {{"status", "error"}, {"error", load_error}});
    else {
      const EngineMetrics m = engine->metrics();
      send_json(res, 200, {{"status", "ok"}, {"slots_idle", m.slots - m.slots_busy}, {"slots_processing", m.slots_busy},
                           {"queue_length", m.queue_length}});
    }
  });

  http.Get(R"(/v1/models(/[^/]+)?)", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
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
  });

  http.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });

  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
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
  });

  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    begin(req);
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
  });

  auto completion = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      begin(req);
      guarded(res, [&] {
        Engine* engine = ready_engine(res);
        if (!engine) return;
        // The request's time runs from its arrival: rendering the chat
        // template counts, and stops early when the client leaves.
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_seconds * 1e3));
        const PeerAddress peer{req.remote_addr, req.remote_port, port};
        CompletionRequest r = parse_completion(parse_body(req), chat, api, RenderControl{deadline, client_gone(peer)});
        r.job.deadline = deadline;
        std::shared_ptr<Request> request = engine->submit(r.job);
        if (!request) {
          res.set_header("Retry-After", "1");
          throw ApiError(429, "rate_limit_error", "the server is busy: every slot and queue place is taken", "",
                         "rate_limit_exceeded");
        }
        const ResponseMeta meta{random_id(chat ? "chatcmpl-" : "cmpl-"), static_cast<int64_t>(std::time(nullptr)),
                                model_name};
        const model::Tokenizer& tok = session->tokenizer();
        if (!r.stream) {
          Collected c;
          // The engine ends every request (finish, deadline, shutdown, or
          // the cancel when the client has gone).
          auto next_probe = std::chrono::steady_clock::now();
          for (;;) {
            if (std::chrono::steady_clock::now() >= next_probe && !request->cancelled()) {
              if (!peer_connected(peer)) request->cancel();
              next_probe += std::chrono::milliseconds(200);
            }
            std::optional<Event> e = request->next(std::chrono::milliseconds(100));
            if (!e) continue;
            c.add(*e);
            if (e->finished) break;
          }
          if (c.finish.finish_reason == "error")
            throw ApiError(500, "server_error", "generation failed: " + c.finish.error);
          if (c.finish.finish_reason == "cancelled")
            throw ApiError(503, "unavailable_error", "the request was cancelled: its client left or the server is stopping");
          send_json(res, 200, full_response(r, meta, c, tok));
          return;
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        auto first = std::make_shared<bool>(true);
        res.set_chunked_content_provider(
            "text/event-stream",
            [request, r, meta, first, &tok, peer](size_t, httplib::DataSink& sink) {
              // Runs on cpp-httplib's thread outside any handler: nothing may
              // escape (std::terminate); a failure ends this stream alone.
              try {
                return stream_step(*request, r, meta, *first, tok, peer, sink);
              } catch (...) {
                request->cancel();
                return false;
              }
            },
            [request](bool success) {
              if (!success) request->cancel();
            });
      });
    };
  };
  http.Post("/v1/completions", completion(false));
  http.Post("/completions", completion(false));
  http.Post("/v1/chat/completions", completion(true));
  http.Post("/chat/completions", completion(true));
}


}  // namespace weft::serve
