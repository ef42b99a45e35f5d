// Server's lifecycle: options checked, the address bound, the model loaded
// in the background, everything stopped in order (weft/serve/server.h).
#include <arpa/inet.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "serve/server_impl.h"
#include "weft/core/error.h"
#include "weft/serve/conversation.h"
#include "weft/gguf/gguf.h"
#include "weft/runtime/speculative.h"

namespace weft::serve {

namespace {

constexpr const char* kServerWhere = "serve";

std::string sha256(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace {

// HTTPS when the options name a certificate and key, else HTTP.
std::unique_ptr<httplib::Server> make_http(const ServeOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty())
    fail(ErrorKind::invalid_input, kServerWhere, "--tls-cert and --tls-key go together");
  if (o.tls_cert.empty()) return std::make_unique<httplib::Server>();
  auto https = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!https->is_valid())
    fail(ErrorKind::invalid_input, kServerWhere,
         "cannot serve HTTPS with " + o.tls_cert + " and " + o.tls_key +
             " (not a readable PEM certificate and its key)");
  return https;
}

}  // namespace

Server::Impl::Impl(ServeOptions o) : options(std::move(o)), http_owner(make_http(options)), http(*http_owner) {}

Server::Server(ServeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const ServeOptions& o = impl_->options;
  if (o.parallel < 1 || o.parallel > 256)
    fail(ErrorKind::invalid_input, kServerWhere, "--parallel must be in [1, 256]");
  if (o.ctx_size < o.parallel || o.ctx_size % o.parallel != 0)
    fail(ErrorKind::invalid_input, kServerWhere,
         "--ctx-size " + std::to_string(o.ctx_size) + " must be a positive multiple of --parallel " +
             std::to_string(o.parallel) + " (each slot gets ctx-size / parallel positions)");
  if (o.port < 0 || o.port > 65535) fail(ErrorKind::invalid_input, kServerWhere, "--port must be in [0, 65535]");
  if (o.http_threads < 2) fail(ErrorKind::invalid_input, kServerWhere, "http_threads must be at least 2");
  if (o.max_tokens < 0) fail(ErrorKind::invalid_input, kServerWhere, "--max-tokens must not be negative");
  if (o.max_queue > 1024) fail(ErrorKind::invalid_input, kServerWhere, "--max-queue must be at most 1024");
  if (o.max_choices < 1 || o.max_choices > 128)
    fail(ErrorKind::invalid_input, kServerWhere, "--max-choices must be in [1, 128]");
  if (!(o.request_timeout_seconds > 0 && o.request_timeout_seconds <= 1e7))
    fail(ErrorKind::invalid_input, kServerWhere, "--timeout must be in (0, 1e7] seconds");
  if (!o.draft.model.empty() && (o.draft_max < 1 || o.draft_max > 64))
    fail(ErrorKind::invalid_input, kServerWhere, "--draft-max must be in [1, 64]");
  if (o.read_timeout_seconds < 1)
    fail(ErrorKind::invalid_input, kServerWhere, "read_timeout_seconds must be at least 1");
  if (!is_loopback_host(o.host) && o.api_key.empty() && !o.insecure)
    fail(ErrorKind::invalid_input, kServerWhere,
         "serving on " + o.host + " (not loopback) needs --api-key-file, or --insecure to serve without a key");
  // cpp-httplib percent-decodes header values: a key with '%' (or bytes a
  // client would have to escape) could never match as sent.
  for (unsigned char c : o.api_key)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='))
      fail(ErrorKind::invalid_input, kServerWhere,
           "the API key (--api-key-file) may hold letters, digits and - _ . ~ + / = only");
  impl_->model_name = o.model_name.empty() ? std::filesystem::path(o.session.model).stem().string() : o.model_name;
  if (!o.api_key.empty()) impl_->key_digest = sha256(o.api_key);
}

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  if (s.started_listening) return;
  s.add_routes();
  const ServeOptions& o = s.options;
  // A waiting completion holds a thread: enough for every slot and queue
  // place, and some for /health, /metrics and the page beside them.
  const size_t threads = std::max(static_cast<size_t>(o.http_threads),
                                  static_cast<size_t>(o.parallel) + o.max_queue + 8);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(o.max_body_bytes);
  s.http.set_read_timeout(o.read_timeout_seconds, 0);
  s.http.set_write_timeout(o.read_timeout_seconds, 0);
  s.http.set_keep_alive_timeout(5);
  if (o.port == 0) {
    s.port = s.http.bind_to_any_port(o.host);
    if (s.port <= 0) fail(ErrorKind::invalid_input, kServerWhere, "cannot bind " + o.host + " to any port");
  } else {
    if (!s.http.bind_to_port(o.host, o.port))
      fail(ErrorKind::invalid_input, kServerWhere, "cannot bind " + o.host + ":" + std::to_string(o.port));
    s.port = o.port;
  }
  s.watchdog.start(s.port, std::chrono::seconds(o.read_timeout_seconds));
  s.started_listening = true;
  s.http_thread = std::thread([&s] {
    s.http.listen_after_bind();
    s.listen_returned.store(true);
  });
  // stop() stops only a running listener: wait until it runs.
  while (!s.http.is_running() && !s.listen_returned.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.load_thread = std::thread([&s] { s.load(); });
}

std::unique_ptr<Session> Server::Impl::open_draft(const Session& target) const {
  if (options.draft.model.empty()) return nullptr;
  // Its cache is rewound to whatever prefix a request shares with the last
  // one it saw: full caches, no sliding-window ring.
  SessionOptions o = options.draft;
  o.load.sliding_ring_step = 0;
  auto draft = std::make_unique<Session>(std::move(o));
  check_same_vocabulary(target.tokenizer(), draft->tokenizer());
  return draft;
}

void Server::Impl::load() {
  try {
    // The engine batches its slots' sequences, which needs full KV caches
    // (no sliding-window ring), and reuses cached prefixes.
    SessionOptions session_options = options.session;
    session_options.load.sliding_ring_step = 0;
    auto sess = std::make_unique<Session>(std::move(session_options));
    std::unique_ptr<Session> draft_sess = open_draft(*sess);  // null without one; refused before loading
    // The template: --chat-template, else the file's, else ChatML.
    std::string warning;
    auto tmpl = std::make_unique<ChatTemplate>(load_chat_template(options.chat_template, options.session.model, &warning));
    if (!warning.empty()) std::fprintf(stderr, "[serve] warning: %s\n", warning.c_str());
    LoadPlan loaded = sess->load(options.ctx_size, [this](size_t done, size_t total) {
      std::lock_guard<std::mutex> lock(mu);
      progress = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    });
    const model::Tokenizer& tok = sess->tokenizer();
    api.tokenizer = &tok;
    api.chat_template = tmpl.get();
    api.bos_token = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
    api.eos_token = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
    api.n_vocab = sess->params().n_vocab;
    api.slot_context = options.ctx_size / options.parallel;
    api.max_tokens_limit = options.max_tokens;
    api.max_choices = options.max_choices;
    // Tool calls: the family the template's text names, and its markers
    // that are control tokens (decoded to "" unless a request asks).
    std::string source = options.chat_template;
    if (source.empty() && warning.empty())
      source = GgufFile::open(options.session.model)->get_string("tokenizer.chat_template").value_or("");
    api.tool_family = detect_tool_family(source);
    if (options.log)
      std::fprintf(stderr, "[serve] tool calls: %s\n",
                   api.tool_family == ToolFamily::none
                       ? "not parsed (the chat template spells no known tool-call format)"
                       : (std::string("parsed in the ") + tool_family_name(api.tool_family) + " format").c_str());
    for (const std::string& marker : tool_call_markers(api.tool_family)) {
      const std::vector<int32_t> ids = tok.encode(marker, false, true);
      if (ids.size() == 1 && tok.token_text(ids[0]) == marker && tok.decode_token(ids[0]).empty())
        api.tool_marker_tokens.push_back(ids[0]);
    }
    if (draft_sess) draft_sess->load(options.ctx_size / options.parallel);
    EngineOptions eo;
    eo.draft = draft_sess.get();
    eo.draft_max = options.draft_max;
    eo.slots = options.parallel;
    eo.pipelined = options.pipelined;
    eo.max_queue = options.max_queue;
    auto eng = std::make_unique<Engine>(*sess, eo);
    std::lock_guard<std::mutex> lock(mu);
    session = std::move(sess);
    draft = std::move(draft_sess);
    plan = std::move(loaded);
    chat_template = std::move(tmpl);
    engine = std::move(eng);
    state = ServerState::ready;
    progress = 1;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu);
    state = ServerState::failed;
    load_error = e.what();
    load_exception = std::current_exception();
  }
  cv.notify_all();
}

int Server::port() const { return impl_->port; }

void Server::wait_ready() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->state != ServerState::loading; });
  if (impl_->state == ServerState::failed) std::rethrow_exception(impl_->load_exception);
}

std::string Server::add_workers(const std::vector<DeviceSpec>& specs) {
  return change_workers(specs, false);
}

std::string Server::remove_workers(const std::vector<DeviceSpec>& specs) {
  return change_workers(specs, true);
}

std::string Server::change_workers(const std::vector<DeviceSpec>& specs, bool remove) {
  const std::string nothing = remove ? "nothing removed" : "nothing added";
  Engine* engine = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->state == ServerState::loading)
      return "the model is still loading: " + nothing + " (send it again once ready)";
    if (impl_->state == ServerState::failed) return "the model failed to load: " + nothing;
    if (impl_->stop_requested) return "the server is stopping: " + nothing;
    engine = impl_->engine.get();
  }
  std::future<std::string> done = remove ? engine->remove_workers(specs) : engine->add_workers(specs);
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
    return "the engine did not take the list within 30 s (it takes it after the step it runs)";
  return done.get();
}

void Server::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->stop_requested; });
}

void Server::request_stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop_requested = true;
  }
  impl_->cv.notify_all();
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  request_stop();
  if (s.load_thread.joinable()) s.load_thread.join();
  // The engine's thread first: streams waiting on it get their "cancelled"
  // ends and their handlers return; then the listener and its connections
  // (joined: no handler runs after), then the engine and the model.
  if (s.engine) s.engine->shutdown();
  if (s.started_listening) {
    s.http.stop();
    if (s.http_thread.joinable()) s.http_thread.join();  // the watchdog still ends slow readers
  }
  s.watchdog.stop();
  s.engine.reset();
  s.session.reset();
  s.draft.reset();
}

}  // namespace weft::serve
