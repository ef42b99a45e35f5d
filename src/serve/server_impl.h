// The server's state, shared by its lifecycle (server.cpp), its routes
// (routes.cpp) and /metrics (metrics.cpp). Internal to weft_serve.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "serve/connection_watchdog.h"
#include "serve/engine.h"
#include "serve/openai_api.h"
#include "weft/serve/chat_template.h"
#include "weft/serve/server.h"

namespace weft::serve {

enum class ServerState { loading, ready, failed };

struct Server::Impl {
  explicit Impl(ServeOptions o);

  ServeOptions options;
  std::string model_name;
  std::string key_digest;  // SHA-256 of the API key ("" when none)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  std::unique_ptr<httplib::Server> http_owner;  // an httplib::SSLServer with tls_cert and tls_key
  httplib::Server& http;
  ConnectionWatchdog watchdog;  // a deadline for reading each request
  std::thread http_thread, load_thread;
  int port = 0;
  bool started_listening = false;
  std::atomic<bool> listen_returned{false};
  bool stopped = false;

  // Loading and the stop request; state and what it guards.
  std::mutex mu;
  std::condition_variable cv;
  ServerState state = ServerState::loading;
  double progress = 0;
  std::string load_error;
  std::exception_ptr load_exception;
  bool stop_requested = false;

  // Set once by the load thread before state becomes ready; read-only after.
  std::unique_ptr<Session> session;
  std::unique_ptr<Session> draft;  // with ServeOptions::draft
  std::unique_ptr<ChatTemplate> chat_template;
  std::unique_ptr<Engine> engine;
  LoadPlan plan;  // where the model was loaded (GET /v1/pool)
  ApiContext api;

  // Requests by route and status (for /metrics).
  std::mutex counts_mu;
  std::map<std::pair<std::string, int>, uint64_t> request_counts;

  void load();  // the load thread's body
  // ServeOptions::draft opened (not loaded), its vocabulary checked against
  // target's; null without a draft.
  std::unique_ptr<Session> open_draft(const Session& target) const;
  void add_routes();
  // Before and around every route: the API key, bodies cpp-httplib would
  // not bound, error and exception replies, the log line per request.
  void add_guards();
  // The handlers (routes.cpp, routes_completion.cpp); each runs after begin().
  void get_page(const httplib::Request& req, httplib::Response& res);
  void get_health(const httplib::Request& req, httplib::Response& res);
  void get_models(const httplib::Request& req, httplib::Response& res);
  void get_metrics(const httplib::Request& req, httplib::Response& res);
  void post_tokenize(const httplib::Request& req, httplib::Response& res);
  void post_detokenize(const httplib::Request& req, httplib::Response& res);
  void post_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  // The engine when ready; else answers 503 (loading) or 500 (failed) into
  // res and returns null.
  Engine* ready_engine(httplib::Response& res);
  bool authorized(const httplib::Request& req) const;
  void begin(const httplib::Request& req);  // a handler starts: the request was read
  void count(const std::string& path, int status);
  std::string metrics_text();
};

// GET /v1/pool's document (pool_status.cpp); throws ApiError 503 while loading.
Json pool_status(Server::Impl& s);

// Writes an OpenAI-shaped error into res.
void send_error(httplib::Response& res, const ApiError& e);

}  // namespace weft::serve
