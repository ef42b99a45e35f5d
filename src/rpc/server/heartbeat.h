// HEARTBEAT frames (docs/rpc-protocol.md section 2a): while a session is busy
// with its client's commands (a long compute, a wait for a peer's push) and
// has written nothing for kHeartbeatEveryMs, an empty HEARTBEAT frame goes
// to the client, so that the client can tell a slow worker (frames keep
// coming) from a stopped process or a vanished network (silence).
//
//   Heartbeat beat(stream, io_timeout);    // in on_hello, when the client asked
//   beat.set_busy(true);                     // a frame header arrived
//   { auto lock = beat.lock_writes(); stream.write_all(...); beat.wrote(); }  // every reply
//   beat.set_busy(false);                    // about to wait for the next header
//
// Threading: one thread of its own sends the frames; set_busy and wrote are
// for the session's thread. Every write to the stream, the session's and
// the heartbeat's, happens under lock_writes(), so frames never interleave.
// The destructor stops the thread; the stream must outlive the Heartbeat.
// A heartbeat that cannot be written ends the heartbeats, nothing else: the
// session's own reads and writes find the broken stream themselves.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "transport/stream.h"

namespace weft::rpc {

class Heartbeat {
 public:
  // Starts the thread. write_timeout bounds each heartbeat's write.
  Heartbeat(Stream& stream, std::chrono::milliseconds write_timeout);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void set_busy(bool busy) { busy_.store(busy, std::memory_order_relaxed); }
  // Held around every frame the session writes.
  std::unique_lock<std::mutex> lock_writes() { return std::unique_lock(write_mu_); }
  // With lock_writes() held, after a frame went out: the next heartbeat is
  // due kHeartbeatEveryMs from now.
  void wrote();

  uint64_t sent() const { return sent_.load(); }  // heartbeats written, for tests

 private:
  void loop();

  Stream& stream_;
  const std::chrono::milliseconds write_timeout_;
  std::mutex write_mu_;                 // serializes frames on stream_
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> last_write_ns_;  // steady clock, when the last frame went out
  std::atomic<uint64_t> sent_{0};
  std::mutex mu_;  // with cv_: wakes the thread to stop
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace weft::rpc
