// Byte streams between a client and a worker: TCP, and an in-memory pipe
// for tests. A Stream is used by one reader and one writer thread at a time
// (reads and writes may run concurrently with each other).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace weft::rpc {

class Stream {
 public:
  virtual ~Stream() = default;
  // Write all bytes (a then b, as one gather write where the transport can:
  // no copy of b). Throws Error(disconnected) naming the peer when the peer
  // is gone.
  virtual void write_all(const void* a, size_t na, const void* b = nullptr, size_t nb = 0) = 0;
  // Reads exactly n bytes. Throws Error(disconnected) on end of stream, a
  // reset, or a read timeout.
  virtual void read_exact(void* data, size_t n) = 0;
  // Wakes any blocked read or write with an error; idempotent.
  virtual void shutdown() = 0;
  virtual std::string peer() const = 0;

  // Deadlines for the reads and writes that follow, until set again
  // (Deadline::max(): none, the default). A read_exact or write_all not done
  // by its deadline fails with Error(disconnected) saying it timed out; the
  // stream is then unusable. Set by the thread that reads (or writes).
  using Deadline = std::chrono::steady_clock::time_point;
  virtual void set_read_deadline(Deadline deadline) = 0;
  virtual void set_write_deadline(Deadline deadline) = 0;
  // Optional (default: no bound; TCP and TLS keep one). A write_all that
  // waits for room fails with Error(disconnected), the stream unusable,
  // once for `bound` no room came and no byte arrived from the peer (bytes
  // waiting unread count: a busy peer's heartbeats keep the write waiting).
  // So a stopped peer, whose kernel buffers fill, cannot block a writer
  // for longer than the bound. 0: no bound. Set by the thread that writes.
  virtual void set_write_stall_bound(std::chrono::milliseconds bound) { (void)bound; }
  // Whether the peer has closed its end (its later bytes can never come).
  // Does not wait and reads nothing; safe from any thread while another
  // reads or writes.
  virtual bool peer_closed() = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks for the next connection; nullptr once close() was called.
  virtual std::unique_ptr<Stream> accept() = 0;
  virtual uint16_t port() const = 0;
  virtual void close() = 0;  // wakes accept()
};

struct TcpOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // 0: none. A read waiting longer fails with disconnected.
  std::chrono::milliseconds read_timeout{0};
  bool keepalive = true;  // probes after 5 s idle, every 1 s, 3 failures
};

// host: a name, an IPv4 or IPv6 literal ("::1", "[::1]" also accepted).
std::unique_ptr<Stream> tcp_connect(const std::string& host, uint16_t port, const TcpOptions& options = {});
// port 0 picks a free port (see Listener::port()).
std::unique_ptr<Listener> tcp_listen(const std::string& host, uint16_t port);
// Two connected in-memory streams. Each direction queues at most capacity
// bytes: a writer blocks while the reader is behind (a larger write still
// completes as the reader drains). Destroying or shutting down one end lets
// the other read what was queued, then fail; its writes fail at once.
std::pair<std::unique_ptr<Stream>, std::unique_ptr<Stream>> memory_pipe(size_t capacity = size_t{8} << 20);

}  // namespace weft::rpc
