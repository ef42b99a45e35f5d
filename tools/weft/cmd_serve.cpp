// `weft serve`: the OpenAI-compatible HTTP server (weft/serve/server.h,
// docs/serve.md) until SIGINT or SIGTERM. The signals are blocked in every
// thread and taken by sigwait() here, so no handler runs on a server thread.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/core/secret_file.h"
#include "weft/serve/chat_template.h"
#include "weft/serve/server.h"

namespace weft::tools {

struct ServeArgs {
  ModelHostArgs host;
  int64_t ctx_size = 4096;            // KV positions in all, cut among the slots
  int parallel = 1;                   // slots decoded together
  bool serial_steps = false;          // one step at a time even over several stages
  std::string listen_host = "127.0.0.1";
  int port = 8080;                    // 0: any free port
  std::string port_file;              // the port written here once listening (tests)
  std::string api_key_file;           // Bearer key required of every request
  bool insecure = false;              // a non-loopback address without a key
  std::string tls_cert, tls_key;      // HTTPS (PEM files)
  std::string chat_template;          // NAME (built-in) or FILE
  std::string alias;                  // the model's id in /v1/models
  size_t max_queue = 64;              // waiting requests beyond the slots; more: 429
  int max_tokens = 0;                 // per request (0: a slot's context)
  int max_choices = 8;                // n per request
  double timeout_s = 600;             // per request
  bool quiet = false;                 // no line per request
  bool recover = false;               // go on after a worker's death (docs/recovery.md)
  std::string draft_model;            // --model-draft: speculative decoding with this model on this host
  int draft_max = 8;                  // --draft-max: tokens it proposes per round
};

namespace {

// SIGHUP: the workers file's new entries go to the model's devices, taken
// in when the server is idle and they answer; the entries it no longer
// lists (listed: what it said before) are taken out, unless --worker names
// them too (docs/recovery.md).
struct WorkersFileState {
  std::vector<DeviceSpec> listed;  // what the file said last
  std::vector<std::string> named;  // the --worker specs, which a file re-read never takes out
};

WorkersFileState workers_file_at_start(const ModelHostArgs& host) {
  WorkersFileState w;
  for (const std::string& spec : host.workers) w.named.push_back(worker_device_spec(spec).text);
  if (!host.workers_file.empty()) {
    try {
      w.listed = read_workers_file(host.workers_file);  // as the session read it
    } catch (const std::exception&) {                   // changed since: nothing to take out later
    }
  }
  return w;
}

void reread_workers_file(serve::Server& server, const std::string& path, WorkersFileState& state) {
  const std::vector<DeviceSpec>& listed = state.listed;
  const std::vector<std::string>& named = state.named;
  if (path.empty()) {
    std::fprintf(stderr, "weft serve: SIGHUP: no --workers-file to read again\n");
    return;
  }
  std::vector<DeviceSpec> now;
  try {
    now = read_workers_file(path);
  } catch (const std::exception& e) {  // unreadable or malformed: the devices stay as they are
    std::fprintf(stderr, "weft serve: SIGHUP: %s: nothing changed: %s\n", path.c_str(), e.what());
    return;
  }
  std::vector<DeviceSpec> gone;
  for (const DeviceSpec& before : listed) {
    const auto same = [&](const DeviceSpec& d) { return d.text == before.text; };
    const bool kept = std::any_of(now.begin(), now.end(), same) ||
                      std::any_of(named.begin(), named.end(), [&](const std::string& w) { return w == before.text; });
    if (!kept) gone.push_back(before);
  }
  std::fprintf(stderr, "weft serve: SIGHUP: %s: %s\n", path.c_str(), server.add_workers(now).c_str());
  if (!gone.empty())
    std::fprintf(stderr, "weft serve: SIGHUP: %s: %s\n", path.c_str(), server.remove_workers(gone).c_str());
  state.listed = std::move(now);
}

}  // namespace

int cmd_serve(const ServeArgs& args) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // not a stop: the workers file is read again
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client or worker gone is an error on its socket, not a signal

  serve::ServeOptions o;
  o.session = session_options(args.host, "serve");
  o.session.recover = args.recover;
  o.session.on_recovery = print_recovery;
  o.session.on_rejoin = print_rejoin;
  if (!args.draft_model.empty()) {  // on this host's CPU, as `weft run --model-draft` loads it
    o.draft.model = args.draft_model;
    o.draft.name = "serve: the draft";
    o.draft.devices = {"cpu"};
    o.draft.probe = false;
    o.draft.device_options.cpu_threads = args.host.threads;
    o.draft.load.map_weights = !args.host.no_mmap;
    o.draft_max = args.draft_max;
  }
  o.ctx_size = args.ctx_size;
  o.parallel = args.parallel;
  o.pipelined = !args.serial_steps;
  o.host = args.listen_host;
  o.port = args.port;
  if (!args.api_key_file.empty()) o.api_key = read_secret_file(args.api_key_file, "serve");  // its alphabet: the Server checks
  o.insecure = args.insecure;
  o.tls_cert = args.tls_cert;
  o.tls_key = args.tls_key;
  o.chat_template = chat_template_source(args.chat_template, "serve");
  o.model_name = args.alias;
  o.max_queue = args.max_queue;
  o.max_tokens = args.max_tokens;
  o.max_choices = args.max_choices;
  o.request_timeout_seconds = args.timeout_s;
  o.log = !args.quiet;
  serve::Server server(std::move(o));
  server.start();
  if (!args.port_file.empty()) {
    // Written once listening, through a rename: a reader never sees half.
    const std::string tmp = args.port_file + ".tmp";
    std::ofstream(tmp) << server.port() << '\n';
    std::rename(tmp.c_str(), args.port_file.c_str());
  }
  std::fprintf(stderr, "weft serve: listening on %s://%s:%d (loading %s)\n", args.tls_cert.empty() ? "http" : "https",
               args.listen_host.c_str(), server.port(),
               args.host.model.c_str());
  // Loading runs in the background (/health says how far); a failure ends
  // the process, naming it.
  std::atomic<bool> load_failed{false};
  std::thread watcher([&] {
    try {
      server.wait_ready();
      std::fprintf(stderr, "weft serve: ready: %d slot(s) of %lld positions%s%s\n", args.parallel,
                   static_cast<long long>(args.ctx_size / args.parallel),
                   args.draft_model.empty() ? "" : "; speculative decoding with the draft ",
                   args.draft_model.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft serve: loading failed: %s\n", e.what());
      load_failed.store(true);
      kill(getpid(), SIGTERM);
    }
  });
  WorkersFileState workers_file = workers_file_at_start(args.host);
  for (int sig = 0;;) {
    if (sigwait(&stop_signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    reread_workers_file(server, args.host.workers_file, workers_file);
  }
  watcher.join();  // after the load ends (it is not interruptible)
  server.stop();
  std::fprintf(stderr, "weft serve: stopped\n");
  return load_failed.load() ? 1 : 0;
}

void add_serve_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "an OpenAI-compatible HTTP server (chat and completions, streamed) over the model and its workers");
  add_model_host_options(cmd, a->host);
  cmd->add_option("-c,--ctx-size", a->ctx_size, "KV cache positions in all, cut evenly among the slots")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--parallel", a->parallel, "requests decoded together (slots)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_flag("--serial-steps", a->serial_steps,
                "over several stages, one batched step at a time (the slots' groups are not pipelined; what "
                "the pipelining is measured against)");
  cmd->add_option("--host", a->listen_host, "address to listen on (other than loopback: --api-key-file or --insecure)")
      ->capture_default_str();
  cmd->add_option("--port", a->port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--port-file", a->port_file, "write the port here once listening");
  cmd->add_option("--api-key-file", a->api_key_file, "file holding the API key clients send as 'Authorization: Bearer KEY'");
  cmd->add_flag("--insecure", a->insecure, "allow a non-loopback address without an API key");
  cmd->add_option("--tls-cert", a->tls_cert, "serve HTTPS with this certificate (PEM); with --tls-key");
  cmd->add_option("--tls-key", a->tls_key, "the HTTPS certificate's private key (PEM)");
  cmd->add_option("--chat-template", a->chat_template,
                  "chat template: a built-in (chatml, gemma, llama2, llama3, mistral, phi3) or a Jinja file "
                  "(default: the model file's)");
  cmd->add_option("--alias", a->alias, "the model's id in /v1/models (default: the file name)");
  cmd->add_option("--max-queue", a->max_queue, "requests that may wait for a slot; more get 429")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--max-tokens", a->max_tokens, "most tokens one request may ask for (0: a slot's context)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-choices", a->max_choices, "most choices (n) one request may ask for; each takes a slot")
      ->capture_default_str()->check(CLI::Range(1, 128));
  cmd->add_option("--timeout", a->timeout_s, "seconds one request may take")->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  cmd->add_flag("-q,--quiet", a->quiet, "no log line per request");
  CLI::Option* draft_opt =
      cmd->add_option("--model-draft", a->draft_model,
                      "speculative decoding: this smaller GGUF model of the same vocabulary, on this host, proposes "
                      "tokens for a request decoded alone (docs/speculative.md)");
  cmd->add_option("--draft-max", a->draft_max, "with --model-draft: tokens the draft proposes per round")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->needs(draft_opt);
  cmd->add_flag("--recover", a->recover,
                "when a worker dies, re-place the model over the devices left; the requests go on (docs/recovery.md)");
  out.push_back({cmd, [a] { return cmd_serve(*a); }});
}

}  // namespace weft::tools
