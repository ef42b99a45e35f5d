// `weft worker`'s arguments (worker_args.cpp) and their conversion into
// the worker's options, apart from cmd_worker.cpp, which runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "weft/rpc/worker.h"

namespace weft::tools {

// `weft worker`: serves this machine's CPU to weft hosts over the RPC
// protocol (docs/rpc-protocol.md) until SIGINT or SIGTERM.
struct WorkerArgs {
  std::string host = "127.0.0.1";  // other addresses need auth_token_file or insecure
  int port = 50052;                // 0: any free port (printed)
  int threads = 0;                 // CPU threads in all; 0 = hardware threads
  size_t mem = 0;                  // bytes all sessions may hold together; 0: 90% of the memory available at start
  size_t session_mem = 0;          // bytes one session may hold; 0: all of mem
  double max_graph_cost = 0;       // multiply-adds + bytes per graph; 0: the default (2^50)
  double handshake_timeout = 5;    // seconds from connect to a finished handshake
  double idle_timeout = 600;       // seconds a session may wait between frames
  double io_timeout = 30;          // seconds for a frame's rest or a reply's write (plus 1 s per MiB)
  std::string cache_dir;           // tensor cache directory; empty: none
  size_t cache_max = 0;            // bytes the cache may hold; 0: 16 GiB
  int max_clients = 64;
  std::string auth_token_file;     // shared secret (whitespace trimmed); empty: no auth
  bool insecure = false;           // allow a non-loopback host without a token
  int cpu_devices = 1;             // several devices per worker: CPU partitions
  std::vector<std::string> peer_allow;  // where PEER_CONNECT may dial; empty: the default (docs/security.md)
  bool tls = false;                     // TLS on every connection (a self-signed certificate unless given)
  std::string tls_cert, tls_key;        // PEM files; given: TLS
  bool advertise = false;               // broadcast a discovery beacon (weft/rpc/discovery.h)
  int advertise_port = 50051;           // its UDP port
};

// --host, --port, --mem, ... (every field above).
void add_worker_options(CLI::App* cmd, WorkerArgs& args);

// The worker's options from its flags: memory budgets checked (a plain
// number counts bytes; under 1 MiB is refused as a forgotten unit), the
// token file read (weft/core/secret_file.h), TLS files made when asked.
// Throws Error(invalid_input) naming the flag that is wrong.
rpc::WorkerOptions worker_options_from_flags(const WorkerArgs& args);

}  // namespace weft::tools
