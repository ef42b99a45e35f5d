// `weft worker`'s options, declared beside the code that turns them into
// rpc::WorkerOptions (worker_args.h).
#include "worker_args.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "cli_options.h"
#include "weft/backend/cpu.h"
#include "weft/core/byte_size.h"
#include "weft/core/error.h"
#include "weft/core/secret_file.h"

namespace weft::tools {
namespace {

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
    const std::filesystem::path dir = rpc::default_tls_folder(args.auth_token_file);
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

}  // namespace

void add_worker_options(CLI::App* cmd, WorkerArgs& args) {
  cmd->add_option("--host", args.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args.port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("-t,--threads", args.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_size_option(cmd, "--mem", args.mem,
                  "memory all sessions may hold together: buffers, graphs, scratch (0: 90% of available memory; at "
                  "least 1MiB)");
  add_size_option(cmd, "--session-mem", args.session_mem, "memory one session may hold (0: all of --mem; at least 1MiB)");
  cmd->add_option("--max-graph-cost", args.max_graph_cost,
                         "most multiply-adds + bytes touched one graph may ask for (0: 2^50)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--handshake-timeout", args.handshake_timeout, "seconds a new connection has to finish HELLO/AUTH")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--idle-timeout", args.idle_timeout, "seconds a session may stay idle between commands")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--io-timeout", args.io_timeout,
                         "seconds to receive a command's rest or send a reply, plus 1 s per MiB")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--cache-dir", args.cache_dir, "tensor cache directory");
  add_size_option(cmd, "--cache-max", args.cache_max, "what the tensor cache may hold (0: 16GiB)");
  cmd->add_option("--max-clients", args.max_clients, "sessions at once (and connections in their handshake)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--auth-token-file", args.auth_token_file, "file holding the shared secret");
  cmd->add_flag("--insecure", args.insecure, "allow a non-loopback address without a token");
  cmd->add_option("--peer-allow", args.peer_allow,
                         "where peer links may be dialed: ADDR[/BITS][:PORT], [V6]/BITS:PORT, a host name, loopback, any, "
                         "none (default: any with a token, else loopback)")
      ->delimiter(',');
  cmd->add_flag("--tls", args.tls,
                       "TLS on every connection: a self-signed certificate made on first start and kept beside the "
                       "token file (or in ~/.config/weft), unless --tls-cert/--tls-key give one");
  cmd->add_flag("--advertise", args.advertise,
                       "broadcast a beacon every 2 s on the networks this worker listens on, so that hosts find it "
                       "(weft workers, --discover); signed with the token when there is one");
  cmd->add_option("--advertise-port", args.advertise_port, "UDP port of the beacons")
      ->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--tls-cert", args.tls_cert, "TLS certificate (PEM); with --tls-key");
  cmd->add_option("--tls-key", args.tls_key, "TLS private key (PEM); with --tls-cert");
  cmd->add_option("--devices", args.cpu_devices, "CPU devices to serve (partitions of the threads)")
      ->capture_default_str()->check(CLI::Range(1, 64));
}

// The worker's options from its flags.
rpc::WorkerOptions worker_options_from_flags(const WorkerArgs& args) {
  rpc::WorkerOptions options;
  options.host = args.host;
  options.port = static_cast<uint16_t>(args.port);
  options.max_clients = args.max_clients;
  check_memory_flag("--mem", args.mem);
  check_memory_flag("--session-mem", args.session_mem);
  options.memory_budget = args.mem != 0 ? args.mem : rpc::default_memory_budget(*make_cpu_device(1));
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
  if (!args.auth_token_file.empty()) options.auth_secret = read_secret_file(args.auth_token_file, "worker");
  options.insecure = args.insecure;
  options.peer_allow = args.peer_allow;
  options.advertise = args.advertise;
  options.advertise_port = static_cast<uint16_t>(args.advertise_port);
  set_tls(args, options);
  options.log = true;
  return options;
}

}  // namespace weft::tools
