// The worker: serves its devices to many clients at once over the protocol
// of docs/rpc-protocol.md, one session per connection. A malformed or
// hostile message ends that session (error reply and a log line), never the
// process. Sessions own what they allocate; closing frees it all.
//
//   WorkerOptions o;                  // 127.0.0.1, a free port
//   Worker w({cpu.get()}, o);
//   w.start();                        // listens; serves on background threads
//   ... clients connect to w.port() ...
//   w.stop();                         // closes every session, joins
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/backend/backend.h"

namespace weft::rpc {

// The limits every session is held to (docs/security.md lists each with its
// default and flag).
struct SessionLimits {
  size_t session_memory = SIZE_MAX;  // bytes one session may hold, everything counted
  uint64_t max_graph_cost = uint64_t{1} << 50;  // GraphCost::total() of one graph
  std::chrono::milliseconds handshake_timeout{5000};  // connect to HELLO (and AUTH) done
  std::chrono::milliseconds idle_timeout{600000};     // between frames
  std::chrono::milliseconds io_timeout{30000};        // a frame's rest, a reply's write: this plus size at 1 MiB/s
};

struct WorkerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;                   // 0: pick a free port
  int max_clients = 64;                // sessions past the handshake; more are turned away as busy
  size_t memory_budget = SIZE_MAX;     // bytes all sessions may hold together
  SessionLimits limits;                // per session: memory, graph cost, timeouts
  std::filesystem::path cache_dir;     // empty: no tensor cache
  size_t cache_max_bytes = size_t{16} << 30;
  std::optional<std::string> auth_secret;  // required for any non-loopback host unless insecure
  bool insecure = false;
  // Where PEER_CONNECT may dial (--peer-allow; docs/security.md): addresses,
  // networks (ADDR/BITS), either with :PORT, host names, "loopback", "any",
  // "none". Empty: "any" with an auth_secret, else "loopback". A worker never
  // dials itself, and dials at most 20 times a second.
  std::vector<std::string> peer_allow;
  // TLS (docs/security.md "TLS"): with both set, every connection must be
  // TLS 1.3 with this certificate and key (PEM files); a plain client gets
  // an ERROR saying so. Hosts pin the certificate's fingerprint.
  std::filesystem::path tls_cert, tls_key;
  // Discovery (weft/rpc/discovery.h): broadcast a beacon on the networks
  // this worker listens on, every advertise_every, to UDP advertise_port;
  // signed with auth_secret when there is one.
  bool advertise = false;
  uint16_t advertise_port = 50051;
  std::chrono::milliseconds advertise_every{2000};
  bool log = true;                     // one line per session event on stderr
};

// Connections: up to max_clients wait for their handshake at once (each for
// at most limits.handshake_timeout; a new connection past that many drops the
// oldest waiting one), and up to max_clients sessions are admitted after it.
// When all are taken, a session idle for over a second that holds nothing
// (no buffer, no graph) is closed to make room; otherwise the newcomer is
// turned away as busy. docs/security.md has the reasons.
//
// Each session runs on its own thread, so the devices are used from several
// threads at once (create_backend, allocate, memory, supports_op); each
// Backend and Buffer a session makes is used by that session's thread only.
class Worker {
 public:
  // devices must outlive the worker. Throws Error(invalid_input) for a
  // non-loopback host without a secret or insecure.
  Worker(std::vector<Device*> devices, WorkerOptions options);
  ~Worker();  // stop()
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start();
  void stop();
  uint16_t port() const;
  int active_sessions() const;
  size_t memory_in_use() const;
  // The dial policy in force, as a line for the log ("loopback", "any", the entries).
  std::string dial_policy() const;
  // "sha256:HEX" of the TLS certificate, or "" without TLS.
  std::string tls_fingerprint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct WorkerTestAccess;  // the white-box tests' hooks (not installed)
};

// The defaults `weft worker` applies, for any program serving its CPU the
// same way.
//
// 90% of the memory device reports free now: a memory_budget that leaves
// the rest of the machine room.
size_t default_memory_budget(const Device& device);
// Each of devices CPU devices' share of threads CPU threads (0: every
// hardware thread), at least 1. Throws Error(invalid_input) unless devices
// is in [1, 64] and threads is not negative.
int cpu_threads_per_device(int threads, int devices);
// Where a worker keeps the certificate it makes for itself (TLS without a
// certificate of its own): beside token_file when one is given, else
// $XDG_CONFIG_HOME/weft, else ~/.config/weft; the files are
// worker-cert.pem and worker-key.pem there.
std::filesystem::path default_tls_folder(const std::string& token_file);

// For `weft worker --tls` without a certificate of its own: writes a
// self-signed one (EC P-256, 10 years) and its key (mode 0600) unless both
// files exist already. Returns whether it made them.
bool make_self_signed_certificate(const std::filesystem::path& cert, const std::filesystem::path& key);

}  // namespace weft::rpc
