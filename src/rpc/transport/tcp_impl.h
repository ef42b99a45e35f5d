// What the TCP stream and listener share: name resolution, socket options,
// address formatting, and the stream type itself. Not for callers: they use
// tcp_connect() and tcp_listen() from stream.h.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/stream.h"

namespace weft::rpc::detail {

// getaddrinfo results; freed with freeaddrinfo.
struct AddrInfoDeleter {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// "[::1]" -> "::1"; anything else unchanged.
std::string strip_brackets(const std::string& host);
// "host:port", or "[host]:port" when host is an IPv6 literal.
std::string endpoint_name(const std::string& host, uint16_t port);
// Numeric "a.b.c.d:port" or "[v6addr]:port" (IPv4-mapped IPv6 printed as IPv4).
std::string format_address(const sockaddr* address);
// Resolves host (already without brackets) for a TCP socket. On failure
// returns nullptr and sets *error to gai_strerror's text.
AddrInfoList resolve(const std::string& host, uint16_t port, bool passive, std::string* error);
// TCP_NODELAY, keepalive (idle 5 s, interval 1 s, 3 probes) when asked, and
// 4 MiB socket buffers; all best effort.
void configure_socket(int fd, bool keepalive);
std::string errno_text(int error);

// How a wait for room to write ended.
enum class RoomWait { room, deadline, stalled };
// Waits until fd can take more bytes (or has an error the next send
// reports), at most until deadline; with stall_bound > 0 it also ends,
// stalled, once for stall_bound no room came and the bytes waiting unread
// on fd (FIONREAD) did not change: the peer neither reads nor sends.
RoomWait wait_for_room(int fd, Stream::Deadline deadline, std::chrono::milliseconds stall_bound);
// The error a stalled write ends with (Stream::set_write_stall_bound).
[[noreturn]] void fail_stalled_write(const std::string& peer, size_t bytes, std::chrono::milliseconds stall_bound);

// A connected socket. Owns fd (closed by the destructor). shutdown() only
// shuts the socket down, so it is safe while another thread is blocked in
// read_exact or write_all on the same stream: that call wakes with an error.
class TcpStream final : public Stream {
 public:
  TcpStream(int fd, std::string peer, std::chrono::milliseconds read_timeout);
  ~TcpStream() override;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  void write_all(const void* a, size_t na, const void* b, size_t nb) override;
  void read_exact(void* data, size_t n) override;
  void shutdown() override;
  std::string peer() const override { return peer_; }
  void set_read_deadline(Deadline deadline) override { read_deadline_ = deadline; }
  void set_write_deadline(Deadline deadline) override { write_deadline_ = deadline; }
  void set_write_stall_bound(std::chrono::milliseconds bound) override { write_stall_bound_ = bound; }
  bool peer_closed() override;

  // For a TLS stream layered on this one (tls.cpp): the socket it drives
  // and the idle read timeout it keeps.
  int fd() const { return fd_; }
  std::chrono::milliseconds read_timeout() const { return read_timeout_; }

 private:
  // Waits until fd_ is readable; false when read_timeout_ or the read
  // deadline passed first (*by_deadline tells which).
  bool wait_readable(size_t n, bool* by_deadline);
  // Before sleeping in poll, a read on a stream whose last wait was short
  // (kSpinWhenWaitBelow) polls without sleeping for up to kSpinFor: a
  // reply that comes within it is taken without the wake-up a sleeping
  // thread pays (tens of microseconds on a VM: per exchange of a tensor
  // split's sums, docs/performance.md). An idle or slow peer's waits are
  // long, so its reads sleep at once and burn nothing.
  void spin_if_hot(std::chrono::steady_clock::time_point began);
  static constexpr std::chrono::microseconds kSpinFor{100};
  static constexpr std::chrono::microseconds kSpinWhenWaitBelow{250};

  const int fd_;
  const std::string peer_;
  const std::chrono::milliseconds read_timeout_;
  Deadline read_deadline_ = Deadline::max();
  Deadline write_deadline_ = Deadline::max();
  std::chrono::milliseconds write_stall_bound_{0};
  std::atomic<bool> shut_down_{false};
  bool hot_ = false;  // the last read that found nothing waited less than kSpinWhenWaitBelow
};

}  // namespace weft::rpc::detail
