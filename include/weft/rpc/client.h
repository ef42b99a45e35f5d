// Remote devices: the backends of a worker (`weft worker`) reached over TCP,
// usable like any local device (see docs/rpc-protocol.md).
//
//   auto devices = weft::make_rpc_devices("192.168.1.7:50052");
//   auto backend = devices[0]->create_backend();
//
// Lifetimes (the seeds' rules): one connection per endpoint, shared by every
// device, buffer and backend of the process that talks to it, found through
// a process-wide map of weak references. Buffers and backends hold the
// connection; devices and buffer types hold only the endpoint and take a
// connection when they allocate. Free things in any order: the connection
// closes when its last holder goes, and a later use opens a new one. Safe
// from several threads. A dead worker raises Error(disconnected) naming the
// endpoint and the command in the caller; the process never aborts.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/backend/backend.h"

namespace weft {

struct RpcOptions {
  std::optional<std::string> auth_secret;  // for workers that require it
  int hash_threads = 0;                     // content hashing; 0: all cores
  size_t cache_min_bytes = size_t{1} << 20; // uploads at least this big try the worker's cache first
  // A worker that sends nothing for this long while a call waits for its
  // reply is taken as dead: that call and every later one on the connection
  // throw Error(disconnected). It catches a stopped or stalled process that
  // TCP still sees alive; set it above the longest compute you expect. 0:
  // wait as long as it takes. Applies to connections this call opens (one
  // connection per endpoint is shared: the first opener's options win).
  std::chrono::milliseconds reply_timeout{0};
  // Workers of protocol 1.10 send HEARTBEAT frames while they compute or
  // wait for a peer, so a wait for a reply that meets silence for
  // max(2 s, 5 x the longest silence this worker kept before) is a hung
  // process or a vanished network, and fails the connection as a dead
  // worker's would (docs/recovery.md "Detection"). A slow worker is never
  // taken for a hung one. false: no heartbeats asked for; only
  // reply_timeout bounds a wait.
  bool detect_hangs = true;
  // When no frame went to the worker for this long, the connection sends a
  // PING, so a worker's idle timeout (`weft worker --idle-timeout`, 600 s by
  // default) does not end a session the host keeps between uses. 0: never.
  std::chrono::milliseconds keepalive{60000};
  // Activations between two workers go from one to the other directly over
  // a peer link (protocol 1.5) when both speak it; false: through this host,
  // as before 1.5 (workers that cannot reach each other: NAT, firewalls).
  bool peer_links = true;
  // Tensors flagged kFlagSparseRows (an expert slice's input and output)
  // travel as their nonzero rows when the worker speaks 1.7
  // (SET_TENSOR_ROWS, GET_TENSOR_ROWS); false: whole, as any tensor.
  bool sparse_rows = true;
  // TLS workers (endpoints tls://HOST:PORT, docs/security.md "TLS"): a
  // worker's certificate is trusted by its fingerprint, the endpoint's own
  // (tls://HOST:PORT#sha256:HEX), else the one recorded for HOST:PORT in the
  // known-workers file; one in neither is recorded there and trusted when
  // trust_on_first_use (with a line on stderr), else refused.
  std::string known_workers_file;  // empty: $WEFT_KNOWN_WORKERS, $XDG_CONFIG_HOME/weft/known_workers or ~/.config/weft/known_workers
  bool trust_on_first_use = true;
};

// One Device per device the worker serves. endpoint: "host:port",
// "[v6addr]:port", or either after tls:// (optionally with #sha256:HEX). Throws Error(disconnected) if the worker cannot be reached.
std::vector<std::unique_ptr<Device>> make_rpc_devices(const std::string& endpoint, const RpcOptions& options = {});

// Device specs ("rpc://host:port/N") are parsed by weft/runtime/devices.h.

// Whether the worker at endpoint answers now: a PING round trip on its open
// connection (an error it deferred from an earlier command is taken and
// dropped: it answered). false when no connection is open, it is broken (a
// call on it failed in transport), or the PING fails so (which breaks it).
// Waits for the answer as any call does (RpcOptions::reply_timeout bounds a
// silent worker). true for a connection broken only because a wait on it
// was given up when another worker hung (Connection::abandoned): the
// worker was alive to the end, and the next use connects again.
bool rpc_alive(const std::string& endpoint);

// Traffic of one connection since it opened (frame headers included).
struct RpcStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t round_trips = 0;  // commands that waited for a reply (handshake included)
  double wait_seconds = 0;   // time callers spent blocked until a reply began to arrive
  uint64_t support_queries = 0;  // SUPPORTS_OP asked (each also a round trip); answers are cached per shape class
  uint64_t heartbeats = 0;       // HEARTBEAT frames a busy worker sent while a reply was awaited (1.10)
  uint64_t hangs_detected = 0;   // waits failed by the silence bound (Connection::silence_bound)
  // Why a peer link out of this worker could not be made (its copies then
  // go through the host); empty when none failed.
  std::string peer_link_failure;
};
// The counters of the live connection to endpoint; zeros when none is open.
RpcStats rpc_stats(const std::string& endpoint);

// What the worker at endpoint says its device computed for this process's
// session (COMPUTE_STATS, protocol 1.6): the graphs it ran and the seconds
// in its compute calls (a CPU device's compute time). nullopt when no
// connection is open, the worker is older than 1.6, or the question fails
// (the connection's state is then what the failure made it).
struct WorkerCompute {
  uint64_t graphs = 0;
  double seconds = 0;
};
std::optional<WorkerCompute> rpc_compute_stats(const std::string& endpoint, uint32_t device);

}  // namespace weft
