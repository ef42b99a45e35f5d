// A listening TCP socket as a Listener, and tcp_listen().
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/tcp_impl.h"
#include "weft/core/error.h"

namespace weft::rpc {

namespace {

constexpr int kBacklog = 128;

// Owns the listening socket and a self-pipe. accept() polls both; close()
// writes to the pipe (never read, so every waiting accept() sees it) and
// shuts the socket down so new connections are refused at once. Descriptors
// are closed only by the destructor, so close() is safe while another thread
// is blocked in accept().
class TcpListener final : public Listener {
 public:
  TcpListener(int fd, uint16_t port, std::string name, int wake_read, int wake_write)
      : fd_(fd), port_(port), name_(std::move(name)), wake_read_(wake_read), wake_write_(wake_write) {}
  ~TcpListener() override {
    close();
    ::close(fd_);
    ::close(wake_read_);
    ::close(wake_write_);
  }
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  std::unique_ptr<Stream> accept() override {
    for (;;) {
      if (closed_.load()) return nullptr;
      pollfd waits[2] = {{fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
      if (::poll(waits, 2, -1) < 0) {
        if (errno == EINTR) continue;
        fail_accept(errno);
      }
      if (closed_.load()) return nullptr;
      sockaddr_storage address{};
      socklen_t length = sizeof address;
      // The listening socket is non-blocking: a connection that vanished
      // between poll and accept gives EAGAIN, not a hang.
      const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
      if (fd >= 0) {
        detail::configure_socket(fd, /*keepalive=*/true);
        return std::make_unique<detail::TcpStream>(fd, detail::format_address(reinterpret_cast<sockaddr*>(&address)),
                                                   std::chrono::milliseconds(0));
      }
      // Errors of that one connection, or an interruption: wait for the next.
      const int error = errno;
      if (error == EINTR || error == EAGAIN || error == EWOULDBLOCK || error == ECONNABORTED || error == EPROTO ||
          error == ENETDOWN || error == ENOPROTOOPT || error == EHOSTDOWN || error == ENONET || error == EHOSTUNREACH ||
          error == EOPNOTSUPP || error == ENETUNREACH || closed_.load()) {
        continue;
      }
      fail_accept(error);
    }
  }

  uint16_t port() const override { return port_; }

  void close() override {
    if (closed_.exchange(true)) return;
    ::shutdown(fd_, SHUT_RDWR);
    const char byte = 1;
    (void)!::write(wake_write_, &byte, 1);
  }

 private:
  [[noreturn]] void fail_accept(int error) {
    // Out of descriptors or memory: retrying at once would spin.
    const ErrorKind kind = error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM
                               ? ErrorKind::out_of_memory
                               : ErrorKind::internal;
    fail(kind, "rpc", "accept on " + name_ + " failed (" + detail::errno_text(error) + ")");
  }

  const int fd_;
  const uint16_t port_;
  const std::string name_;
  const int wake_read_;
  const int wake_write_;
  std::atomic<bool> closed_{false};
};

// A listening socket bound to address, or -1 with *error set.
int bind_and_listen(const addrinfo* a, std::string* error) {
  const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  if (fd < 0) {
    *error = detail::errno_text(errno);
    return -1;
  }
  const int on = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (a->ai_family == AF_INET6) {
    // "::" means every address, IPv4 included, whatever the system default.
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
    const int v6_only = IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr) ? 0 : 1;
    (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, sizeof v6_only);
  }
  // Accepted sockets inherit the buffer sizes, which must be set before the
  // handshake for the window scale to fit them.
  detail::configure_socket(fd, /*keepalive=*/true);
  if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kBacklog) != 0) {
    *error = detail::errno_text(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::unique_ptr<Listener> tcp_listen(const std::string& host, uint16_t port) {
  const std::string name = detail::strip_brackets(host);
  const std::string endpoint = detail::endpoint_name(name, port);
  std::string error;
  const detail::AddrInfoList addresses = detail::resolve(name, port, /*passive=*/true, &error);
  if (!addresses) fail(ErrorKind::invalid_input, "rpc", "listen on " + endpoint + ": cannot resolve (" + error + ")");

  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    const int fd = bind_and_listen(a, &error);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    int wake[2];
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0 || ::pipe2(wake, O_CLOEXEC) != 0) {
      error = detail::errno_text(errno);
      ::close(fd);
      break;
    }
    const std::string bound_name = detail::format_address(reinterpret_cast<sockaddr*>(&bound));
    const uint16_t bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return std::make_unique<TcpListener>(fd, bound_port, bound_name, wake[0], wake[1]);
  }
  fail(ErrorKind::invalid_input, "rpc", "listen on " + endpoint + " failed (" + error + ")");
}

}  // namespace weft::rpc
