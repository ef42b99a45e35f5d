// `weft worker`: serves CPU devices over the RPC protocol until SIGINT or
// SIGTERM. The signals are blocked in every thread and taken by sigwait()
// on this one, so stopping runs as ordinary code (no handler restrictions).
// Its options and their defaults: worker_args.cpp.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/byte_size.h"
#include "weft/core/error.h"
#include "weft/rpc/worker.h"
#include "worker_args.h"

namespace weft::tools {
namespace {

std::string endpoint(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

int cmd_worker(const WorkerArgs& args) {
  if (args.port < 0 || args.port > 65535) {
    fail(ErrorKind::invalid_input, "worker", "port " + std::to_string(args.port) + " is out of range");
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

  const rpc::WorkerOptions options = worker_options_from_flags(args);

  // The CPU split into partitions: each device's backends use its share of the threads.
  const int per_device = rpc::cpu_threads_per_device(args.threads, args.cpu_devices);
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

void add_worker_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<WorkerArgs>();
  CLI::App* cmd = app.add_subcommand("worker", "serve this machine's CPU to weft hosts over TCP");
  add_worker_options(cmd, *a);
  out.push_back({cmd, [a] { return cmd_worker(*a); }});
}

}  // namespace weft::tools
