// Connection's hang detection (docs/recovery.md "Detection"): the silence
// bound on reads from a worker that sends heartbeats, and the process-wide
// record of workers found hung, by which a wait on a live worker that may
// be waiting for a hung one's push is given up.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "client/connection.h"

namespace weft::rpc {
namespace {

// Workers found hung by the silence bound, counted, and the last one's
// endpoint: a worker that has sent no reply since the count moved gives up
// its wait at its next heartbeat.
std::atomic<uint64_t> g_hangs{0};
struct LastHung {
  std::mutex mu;
  std::string endpoint;
};
LastHung& last_hung() {
  static LastHung* h = new LastHung;  // leaked: connections may close during static destruction
  return *h;
}

// A transport error's text without its "[rpc] " prefix (ours comes first).
std::string without_prefix(const Error& e) {
  std::string text = e.what();
  const std::string prefix = "[rpc] ";
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

long long ms_of(std::chrono::steady_clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

uint64_t Connection::hangs_found() {
  return g_hangs.load();
}

std::chrono::nanoseconds Connection::silence_bound() const {
  if (!heartbeats_) return std::chrono::nanoseconds(0);
  const auto measured = std::chrono::nanoseconds(kSilenceFactor * slowest_silence_ns_.load(std::memory_order_relaxed));
  return std::max<std::chrono::nanoseconds>(kMinSilence, measured);
}

void Connection::bound_write_stall() {
  // A worker that stopped reading (SIGSTOP, a vanished network) fills the
  // socket buffers: a write then waits at most the silence bound without
  // room and without a byte from the worker. A busy worker's heartbeats
  // arrive meanwhile and keep the write waiting.
  if (heartbeats_) stream_->set_write_stall_bound(std::chrono::ceil<std::chrono::milliseconds>(silence_bound()));
}

void Connection::read_header_bytes(Cmd cmd, uint8_t (&raw)[kFrameHeaderBytes]) {
  if (!heartbeats_) return read_payload(cmd, raw, sizeof raw);
  const auto from = std::chrono::steady_clock::now();
  const auto bound = silence_bound();
  stream_->set_read_deadline(from + bound);
  try {
    stream_->read_exact(raw, sizeof raw);
  } catch (const Error& e) {
    const auto silent = std::chrono::steady_clock::now() - from;
    // (poll rounds its timeout to milliseconds: a margin for the comparison)
    if (silent + std::chrono::milliseconds(20) < bound) fail_broken(cmd, without_prefix(e));
    ++hangs_detected_;
    {
      LastHung& h = last_hung();
      std::lock_guard lock(h.mu);
      h.endpoint = endpoint_;
    }
    g_hangs.fetch_add(1);
    fail_broken(cmd, "no reply and no heartbeat for " + std::to_string(ms_of(silent)) + " ms (silence bound " +
                         std::to_string(ms_of(bound)) + " ms): the worker is stopped, hung or unreachable");
  }
  bytes_received_ += sizeof raw;
  // The longest silence of a live worker, decaying by 1/8 a frame: a slow
  // moment raises the bound for a while, and it comes back down.
  const int64_t silent = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - from).count();
  const int64_t slowest = slowest_silence_ns_.load(std::memory_order_relaxed);
  slowest_silence_ns_.store(std::max(silent, slowest - slowest / 8), std::memory_order_relaxed);
}

void Connection::on_heartbeat(Cmd cmd) {
  ++heartbeats_received_;
  // Busy without a reply since a worker was found hung: perhaps only
  // waiting for that one's push, so given up.
  if (g_hangs.load() == hangs_seen_) return;
  std::string hung;
  {
    LastHung& l = last_hung();
    std::lock_guard lock(l.mu);
    hung = l.endpoint;
  }
  abandoned_ = true;
  fail_broken(cmd, "gave up waiting: " + hung +
                       " was found stopped or unreachable meanwhile, and this worker, alive, may be waiting for it");
}

}  // namespace weft::rpc
