// `weft worker`: serves CPU devices over the RPC protocol until SIGINT or
// SIGTERM. The signals are blocked in every thread and taken by sigwait()
// on this one, so stopping runs as ordinary code (no handler restrictions).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/byte_size.h"
#include "weft/core/error.h"
#include "weft/rpc/worker.h"

namespace weft::tools {
namespace {

std::string read_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::invalid_input, "worker", "cannot read auth token file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  token.erase(token.begin(), std::find_if_not(token.begin(), token.end(), space));
  token.erase(std::find_if_not(token.rbegin(), token.rend(), space).base(), token.end());
  if (token.empty()) fail(ErrorKind::invalid_input, "worker", "auth token file '" + path + "' is empty");
  return token;
}

std::string endpoint(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Where --tls keeps its certificate: beside the token file, else in
// $XDG_CONFIG_HOME/weft or ~/.config/weft.
std::filesystem::path tls_dir(const std::string& token_file) {
  if (!token_file.empty()) return std::filesystem::absolute(token_file).parent_path();
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') return std::filesystem::path(xdg) / "weft";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".config" / "weft";
}

// 90% of the memory the kernel says is available now: every session's
// buffers, graphs and scratch together stay inside it.
size_t default_budget() {
  const MemoryInfo m = make_cpu_device(1)->memory();
  return m.free / 10 * 9;
}

std::chrono::milliseconds seconds(double s, const char* flag) {
  if (!(s > 0) || s > 1e7) fail(ErrorKind::invalid_input, "worker", std::string(flag) + " " + std::to_string(s));
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
}

// --tls-cert/--tls-key, or --tls with a certificate made on first start.
void set_tls(const WorkerArgs& args, rpc::WorkerOptions& options) {
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    fail(ErrorKind::invalid_input, "worker", "--tls-cert and --tls-key go together");
  }
  if (!args.tls_cert.empty()) {
    options.tls_cert = args.tls_cert;
    options.tls_key = args.tls_key;
  } else if (args.tls) {
    const std::filesystem::path dir = tls_dir(args.auth_token_file);
    options.tls_cert = dir / "worker-cert.pem";
    options.tls_key = dir / "worker-key.pem";
    if (rpc::make_self_signed_certificate(options.tls_cert, options.tls_key)) {
      std::fprintf(stderr, "weft worker: made a self-signed TLS certificate: %s (key %s)\n", options.tls_cert.c_str(),
                   options.tls_key.c_str());
    }
  }
}

// The smallest --mem and --session-mem: below it no model's share fits (a
// single layer of the smallest real models holds several MiB), and a budget
// that small is nearly always a unit forgotten ("--mem 64" is 64 bytes).
constexpr size_t kMinMemory = size_t{1} << 20;

void check_memory_flag(const char* flag, size_t bytes) {
  if (bytes == 0 || bytes >= kMinMemory) return;
  fail(ErrorKind::invalid_input, "worker",
       std::string(flag) + " " + std::to_string(bytes) + " is " + format_byte_size(bytes) +
           ", below the smallest useful budget, " + format_byte_size(kMinMemory) +
           ": a plain number counts bytes; give a unit, e.g. " + flag + " " + std::to_string(bytes) + "MiB");
}

// The worker's options from its flags.
rpc::WorkerOptions worker_options(const WorkerArgs& args) {
  rpc::WorkerOptions options;
  options.host = args.host;
  options.port = static_cast<uint16_t>(args.port);
  options.max_clients = args.max_clients;
  check_memory_flag("--mem", args.mem);
  check_memory_flag("--session-mem", args.session_mem);
  options.memory_budget = args.mem != 0 ? args.mem : default_budget();
  options.limits.session_memory = args.session_mem != 0 ? args.session_mem : options.memory_budget;
  if (args.max_graph_cost > 0) {
    options.limits.max_graph_cost =
        args.max_graph_cost >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(args.max_graph_cost);
  }
  options.limits.handshake_timeout = seconds(args.handshake_timeout, "--handshake-timeout");
  options.limits.idle_timeout = seconds(args.idle_timeout, "--idle-timeout");
  options.limits.io_timeout = seconds(args.io_timeout, "--io-timeout");
  options.cache_dir = args.cache_dir;
  if (args.cache_max != 0) options.cache_max_bytes = args.cache_max;
  if (!args.auth_token_file.empty()) options.auth_secret = read_token(args.auth_token_file);
  options.insecure = args.insecure;
  options.peer_allow = args.peer_allow;
  options.advertise = args.advertise;
  options.advertise_port = static_cast<uint16_t>(args.advertise_port);
  set_tls(args, options);
  options.log = true;
  return options;
}

}  // namespace

int cmd_worker(const WorkerArgs& args) {
  if (args.port < 0 || args.port > 65535) {
    fail(ErrorKind::invalid_input, "worker", "port " + std::to_string(args.port) + " is out of range");
  }
  if (args.cpu_devices < 1 || args.cpu_devices > 64) {
    fail(ErrorKind::invalid_input, "worker", "--cpu-devices " + std::to_string(args.cpu_devices) + " (1 to 64)");
  }
  if (args.max_clients < 1) {
    fail(ErrorKind::invalid_input, "worker", "--max-clients " + std::to_string(args.max_clients) + " (at least 1)");
  }

  // Before any thread exists, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);

  const rpc::WorkerOptions options = worker_options(args);

  // The CPU split into partitions: each device's backends use its share of the threads.
  const unsigned hw = std::thread::hardware_concurrency();
  const int total = args.threads > 0 ? args.threads : (hw == 0 ? 1 : static_cast<int>(hw));
  const int per_device = std::max(1, total / args.cpu_devices);
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device*> devices;
  for (int i = 0; i < args.cpu_devices; ++i) {
    owned.push_back(make_cpu_device(per_device));
    devices.push_back(owned.back().get());
  }

  rpc::Worker worker(devices, options);
  worker.start();
  std::fprintf(stderr,
               "weft worker: %d CPU device(s) of %d threads; memory budget %s%s; cache %s; auth %s; peer links may "
               "dial: %s\n",
               args.cpu_devices, per_device, format_byte_size(options.memory_budget).c_str(),
               options.limits.session_memory < options.memory_budget
                   ? (", " + format_byte_size(options.limits.session_memory) + " per session").c_str()
                   : "",
               args.cache_dir.empty() ? "off" : args.cache_dir.c_str(), options.auth_secret ? "on" : "off",
               worker.dial_policy().c_str());
  if (!worker.tls_fingerprint().empty()) {
    // Hosts pin this: --worker tls://HOST:PORT#FINGERPRINT, or compare it
    // with what their first connection records (docs/security.md "TLS").
    std::fprintf(stderr, "weft worker: TLS certificate %s\n", worker.tls_fingerprint().c_str());
    std::printf("weft worker listening on tls://%s#%s\n", endpoint(args.host, worker.port()).c_str(),
                worker.tls_fingerprint().c_str());
  } else {
    std::printf("weft worker listening on %s\n", endpoint(args.host, worker.port()).c_str());
  }
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::fprintf(stderr, "weft worker: %s received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  worker.stop();
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return 0;
}

}  // namespace weft::tools
