// `weft serve`: an OpenAI-compatible HTTP server over a Session (one model,
// its layers on this CPU and any workers). Endpoints, flags and limits:
// docs/serve.md.
//
//   weft::serve::ServeOptions o;
//   o.session = {.model = "m.gguf", .devices = {"cpu", "rpc://10.0.0.2:50052"}};
//   o.port = 8080;
//   weft::serve::Server server(std::move(o));   // checks the options
//   server.start();        // listens now; loads the model in the background
//   server.wait_ready();   // optional: until loaded (throws what loading threw)
//   ...                    // POST /v1/chat/completions ...
//   server.stop();         // or from a signal handler's thread: request_stop()
//
// While loading, /health answers 503 with the progress and the model's
// endpoints 503; a load that fails leaves /health at 500 naming the error.
// Thread-safety: start, stop and wait_* from one thread; request_stop()
// from any.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/runtime/session.h"

namespace weft::serve {

struct ServeOptions {
  SessionOptions session;   // the model and its devices
  // Speculative decoding (--model-draft): a draft model of the same
  // vocabulary on this host (draft.model empty: none), checked against the
  // model's vocabulary before either is loaded, loaded for a slot's
  // context. A request decoded alone runs speculative rounds
  // (docs/speculative.md); draft_max tokens proposed per round, in [1, 64].
  SessionOptions draft;
  int draft_max = 8;
  int64_t ctx_size = 4096;  // KV cache positions in all, cut evenly among the slots
  int parallel = 1;         // slots: requests decoded together in one batched step
  bool pipelined = true;    // over several stages, the slots' groups in flight at once (EngineOptions)
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: a free port (port() after start)
  // Bearer key every request but /health and the page at / must carry.
  // Any host other than a loopback address requires one unless insecure.
  // Letters, digits and - _ . ~ + / = only (the HTTP layer percent-decodes
  // header values, so a key with other bytes could never match as sent).
  std::string api_key;
  bool insecure = false;
  // HTTPS with this certificate and key (PEM files; both or neither).
  std::string tls_cert, tls_key;
  std::string chat_template;  // template source overriding the file's (empty: the file's, else chatml)
  std::string model_name;     // the id /v1/models lists (empty: the file's name without .gguf)
  size_t max_queue = 64;            // requests waiting for a slot (at most 1024); beyond it 429
  size_t max_body_bytes = 8u << 20; // larger bodies: 413
  int max_tokens = 0;               // the most one request may ask for (0: a slot's context)
  int max_choices = 8;              // the most choices (n) one request may ask for, in [1, 128]; more: 400
  double request_timeout_seconds = 600;  // from arrival to the last token
  int http_threads = 32;            // connections served at once (at least parallel + max_queue + 8)
  int read_timeout_seconds = 10;    // a request's headers and body arrive within this (slowloris)
  bool log = true;                  // one line per request on stderr
};

class Server {
 public:
  // Throws Error(invalid_input) for impossible options, an api_key with a
  // byte outside its alphabet, or a non-loopback host without api_key or
  // insecure.
  explicit Server(ServeOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts serving (and loading the model) on background threads.
  // Throws Error(invalid_input) when the address cannot be bound.
  void start();
  int port() const;
  // Until the model is loaded and the engine runs; rethrows a load error.
  void wait_ready();
  // Workers to add to the model's devices (`weft serve --workers-file`,
  // re-read on SIGHUP): taken in when the engine is idle and they answer
  // (docs/recovery.md "Workers added and removed while serving"). Waits up to 30 s for
  // the engine's thread to take the list; returns what it did ("N new
  // worker(s) ...", or why nothing was added: the model not loaded yet,
  // --split shares). Not concurrently with stop().
  std::string add_workers(const std::vector<DeviceSpec>& specs);
  // Workers to take out (the workers file re-read without them): one lost
  // or not yet taken in is forgotten, a placed one leaves when the engine
  // is idle, the model placed again without it first (Engine::
  // remove_workers). Waits as add_workers; returns what it did.
  std::string remove_workers(const std::vector<DeviceSpec>& specs);
  // Until request_stop() or stop().
  void wait();
  void request_stop();
  // Stops listening, cancels what runs, joins every thread. Idempotent.
  void stop();

  struct Impl;

 private:
  std::string change_workers(const std::vector<DeviceSpec>& specs, bool remove);
  std::unique_ptr<Impl> impl_;
};

// Whether host names this machine's loopback (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace weft::serve
