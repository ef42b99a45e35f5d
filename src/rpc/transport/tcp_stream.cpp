// A TCP connection as a Stream, and tcp_connect().
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "transport/tcp_impl.h"
#include "weft/core/error.h"

namespace weft::rpc {

namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

using Deadline = Stream::Deadline;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// 0 once fd (non-blocking) is connected to address, else the errno.
int connect_before(int fd, const sockaddr* address, socklen_t length, Clock::time_point deadline) {
  if (::connect(fd, address, length) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return errno;
    if (ready == 0) return ETIMEDOUT;
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return errno;
    return error;
  }
}

}  // namespace

TcpStream::TcpStream(int fd, std::string peer, std::chrono::milliseconds read_timeout)
    : fd_(fd), peer_(std::move(peer)), read_timeout_(read_timeout) {}

TcpStream::~TcpStream() {
  ::close(fd_);
}

void TcpStream::shutdown() {
  // SHUT_RDWR wakes a recv or send blocked on this socket in another thread;
  // the descriptor stays open until the destructor, so it cannot be reused
  // under that thread.
  if (!shut_down_.exchange(true)) ::shutdown(fd_, SHUT_RDWR);
}

void TcpStream::write_all(const void* a, size_t na, const void* b, size_t nb) {
  iovec parts[2];
  int count = 0;
  if (na > 0) parts[count++] = {const_cast<void*>(a), na};
  if (nb > 0) parts[count++] = {const_cast<void*>(b), nb};
  iovec* next = parts;
  while (count > 0) {
    msghdr message{};
    message.msg_iov = next;
    message.msg_iovlen = static_cast<size_t>(count);
    // MSG_NOSIGNAL: a closed peer gives EPIPE here instead of SIGPIPE. With a
    // deadline the send never blocks; poll waits for room until then.
    const bool timed = write_deadline_ != Deadline::max() || write_stall_bound_.count() > 0;
    const ssize_t sent = ::sendmsg(fd_, &message, MSG_NOSIGNAL | (timed ? MSG_DONTWAIT : 0));
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (timed && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const RoomWait w = wait_for_room(fd_, write_deadline_, write_stall_bound_);
        if (w == RoomWait::stalled) fail_stalled_write(peer_, na + nb, write_stall_bound_);
        if (w == RoomWait::deadline) {
          fail(ErrorKind::disconnected, "rpc",
               peer_ + ": write of " + std::to_string(na + nb) + " bytes timed out (the peer is not reading)");
        }
        continue;
      }
      const int error = errno;
      fail(ErrorKind::disconnected, "rpc",
           peer_ + ": connection closed while writing " + std::to_string(na + nb) + " bytes (" + errno_text(error) +
               ")");
    }
    // Step past what went out: whole parts, then into the first partial one.
    size_t done = static_cast<size_t>(sent);
    while (count > 0 && done >= next->iov_len) {
      done -= next->iov_len;
      ++next;
      --count;
    }
    if (count > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + done;
      next->iov_len -= done;
    }
  }
}

bool TcpStream::wait_readable(size_t n, bool* by_deadline) {
  const auto idle = read_timeout_.count() > 0 ? Clock::now() + read_timeout_ : Deadline::max();
  const auto deadline = std::min(idle, read_deadline_);
  *by_deadline = read_deadline_ <= idle;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, deadline == Deadline::max() ? -1 : remaining_ms(deadline));
    if (ready > 0) return true;  // data, end of stream or an error: recv tells which
    if (ready == 0) return false;
    if (errno != EINTR) {
      const int error = errno;
      fail(ErrorKind::disconnected, "rpc",
           peer_ + ": poll failed while reading " + std::to_string(n) + " bytes (" + errno_text(error) + ")");
    }
  }
}

RoomWait wait_for_room(int fd, Deadline deadline, std::chrono::milliseconds stall_bound) {
  const bool bounded = stall_bound.count() > 0;
  auto unread = [fd] {
    int n = 0;
    return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
  };
  int seen = bounded ? unread() : 0;
  for (;;) {
    const Deadline stall_at = bounded ? Clock::now() + stall_bound : Deadline::max();
    const Deadline until = std::min(deadline, stall_at);
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, until == Deadline::max() ? -1 : remaining_ms(until));
    if (ready > 0) return RoomWait::room;  // room, or an error the next send reports
    if (ready < 0) {
      if (errno == EINTR) continue;
      return RoomWait::room;  // the send that follows reports the socket's error
    }
    if (Clock::now() >= deadline) return RoomWait::deadline;
    const int now = unread();
    if (now == seen) return RoomWait::stalled;  // nothing out, nothing in, for the whole bound
    seen = now;                                 // the peer sends: alive, only not reading yet
  }
}

void fail_stalled_write(const std::string& peer, size_t bytes, std::chrono::milliseconds stall_bound) {
  fail(ErrorKind::disconnected, "rpc",
       peer + ": write of " + std::to_string(bytes) + " bytes stalled: no room and nothing from the peer for " +
           std::to_string(stall_bound.count()) + " ms (the peer is stopped, hung or unreachable)");
}

bool TcpStream::peer_closed() {
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void TcpStream::spin_if_hot(Clock::time_point began) {
  static const bool several_cpus = std::thread::hardware_concurrency() > 1;
  if (!hot_ || !several_cpus) return;
  // Yielding between looks: a thread that shares this core (perhaps the
  // very peer being waited for) runs first, so the spin only uses a core
  // that would idle.
  pollfd p{fd_, POLLIN, 0};
  while (Clock::now() - began < kSpinFor && ::poll(&p, 1, 0) == 0) ::sched_yield();
}

void TcpStream::read_exact(void* data, size_t n) {
  auto* out = static_cast<char*>(data);
  size_t left = n;
  const bool timed = read_timeout_.count() > 0 || read_deadline_ != Deadline::max();
  bool waited = false;  // timed reads try first and wait only when nothing has arrived
  Clock::time_point wait_began{};  // set while this read waits for bytes
  while (left > 0) {
    bool by_deadline = false;
    if (timed && waited && !wait_readable(n, &by_deadline)) {
      if (by_deadline) {
        fail(ErrorKind::disconnected, "rpc",
             peer_ + ": timed out: " + std::to_string(n - left) + " of " + std::to_string(n) +
                 " bytes arrived before the deadline");
      }
      fail(ErrorKind::disconnected, "rpc",
           peer_ + ": no data for " + std::to_string(read_timeout_.count()) + " ms while reading " + std::to_string(n) +
               " bytes");
    }
    // Without a timeout MSG_WAITALL saves wake-ups on big reads; shutdown()
    // still ends it.
    const ssize_t got = ::recv(fd_, out, left, timed ? MSG_DONTWAIT : MSG_WAITALL);
    if (got > 0) {
      out += got;
      left -= static_cast<size_t>(got);
      waited = false;
      if (wait_began != Clock::time_point{}) hot_ = Clock::now() - wait_began < kSpinWhenWaitBelow;
      wait_began = {};
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    waited = got < 0 && timed && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (waited) {
      if (wait_began == Clock::time_point{}) {
        wait_began = Clock::now();
        spin_if_hot(wait_began);
      }
      continue;
    }
    const int error = got < 0 ? errno : 0;
    if (got == 0 || error == ECONNRESET || error == EPIPE || shut_down_.load()) {
      fail(ErrorKind::disconnected, "rpc", peer_ + ": connection closed while reading " + std::to_string(n) + " bytes");
    }
    fail(ErrorKind::disconnected, "rpc",
         peer_ + ": read of " + std::to_string(n) + " bytes failed (" + errno_text(error) + ")");
  }
}

}  // namespace detail

std::unique_ptr<Stream> tcp_connect(const std::string& host, uint16_t port, const TcpOptions& options) {
  const std::string name = detail::strip_brackets(host);
  const std::string endpoint = detail::endpoint_name(name, port);
  std::string error;
  const detail::AddrInfoList addresses = detail::resolve(name, port, /*passive=*/false, &error);
  if (!addresses) fail(ErrorKind::disconnected, "rpc", endpoint + ": cannot resolve host (" + error + ")");

  // Every address of the name shares one deadline.
  const auto deadline = detail::Clock::now() + options.connect_timeout;
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      error = detail::errno_text(errno);
      continue;
    }
    // Buffer sizes before connect(), so the window scale fits them.
    detail::configure_socket(fd, options.keepalive);
    const int rc = detail::connect_before(fd, a->ai_addr, a->ai_addrlen, deadline);
    if (rc == 0 && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) {
      return std::make_unique<detail::TcpStream>(fd, detail::format_address(a->ai_addr), options.read_timeout);
    }
    error = rc == ETIMEDOUT ? "timed out after " + std::to_string(options.connect_timeout.count()) + " ms"
                            : detail::errno_text(rc != 0 ? rc : errno);
    ::close(fd);
    if (detail::remaining_ms(deadline) == 0) break;
  }
  fail(ErrorKind::disconnected, "rpc", endpoint + ": cannot connect (" + error + ")");
}

}  // namespace weft::rpc
