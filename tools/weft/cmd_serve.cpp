// `weft serve`: the OpenAI-compatible HTTP server (weft/serve/server.h,
// docs/serve.md) until SIGINT or SIGTERM. The signals are blocked in every
// thread and taken by sigwait() here, so no handler runs on a server thread.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/serve/chat_template.h"
#include "weft/serve/server.h"

namespace weft::tools {

namespace {

// The first line of a key file, whitespace trimmed; an empty key is refused.
std::string read_key(const std::string& path) {
  std::string key = read_text_file(path, "serve");
  const size_t b = key.find_first_not_of(" \t\r\n");
  const size_t e = key.find_last_not_of(" \t\r\n");
  key = b == std::string::npos ? "" : key.substr(b, e - b + 1);
  if (key.empty() || key.find_first_of("\r\n") != std::string::npos)
    fail(ErrorKind::invalid_input, "serve", path + " must hold one non-empty line: the API key");
  // cpp-httplib percent-decodes header values: a key with '%' (or bytes a
  // client would have to escape) could never match as sent.
  for (unsigned char c : key)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='))
      fail(ErrorKind::invalid_input, "serve",
           path + ": the API key may hold letters, digits and - _ . ~ + / = only");
  return key;
}

}  // namespace

int cmd_serve(const ServeArgs& args) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client or worker gone is an error on its socket, not a signal

  serve::ServeOptions o;
  o.session = session_options(args.host, "serve");
  o.ctx_size = args.ctx_size;
  o.parallel = args.parallel;
  o.pipelined = !args.serial_steps;
  o.host = args.listen_host;
  o.port = args.port;
  if (!args.api_key_file.empty()) o.api_key = read_key(args.api_key_file);
  o.insecure = args.insecure;
  o.tls_cert = args.tls_cert;
  o.tls_key = args.tls_key;
  o.chat_template = chat_template_source(args.chat_template, "serve");
  o.model_name = args.alias;
  o.max_queue = args.max_queue;
  o.max_tokens = args.max_tokens;
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
      std::fprintf(stderr, "weft serve: ready: %d slot(s) of %lld positions\n", args.parallel,
                   static_cast<long long>(args.ctx_size / args.parallel));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft serve: loading failed: %s\n", e.what());
      load_failed.store(true);
      kill(getpid(), SIGTERM);
    }
  });
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  watcher.join();  // after the load ends (it is not interruptible)
  server.stop();
  std::fprintf(stderr, "weft serve: stopped\n");
  return load_failed.load() ? 1 : 0;
}

}  // namespace weft::tools
