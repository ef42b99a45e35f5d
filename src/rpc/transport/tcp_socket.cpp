// Helpers shared by the TCP stream and listener (see tcp_impl.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstring>

#include "transport/tcp_impl.h"

namespace weft::rpc::detail {

namespace {

constexpr int kSocketBufferBytes = 4 << 20;
constexpr int kKeepIdleS = 5;
constexpr int kKeepIntervalS = 1;
constexpr int kKeepCount = 3;

void set_int_option(int fd, int level, int name, int value) {
  // Best effort: a kernel that refuses an option still gives a working socket.
  (void)::setsockopt(fd, level, name, &value, sizeof value);
}

}  // namespace

std::string strip_brackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

std::string endpoint_name(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string format_address(const sockaddr* address) {
  char host[NI_MAXHOST] = "?";
  uint16_t port = 0;
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    port = ntohs(v6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      ::inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], host, sizeof host);
      return endpoint_name(host, port);
    }
    // getnameinfo keeps a link-local address's scope ("fe80::1%eth0").
    ::getnameinfo(address, sizeof(sockaddr_in6), host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  }
  return endpoint_name(host, port);
}

AddrInfoList resolve(const std::string& host, uint16_t port, bool passive, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  // No AI_ADDRCONFIG: it would refuse "::1" on a machine whose only IPv6
  // address is the loopback one.
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    *error = rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoList(list);
}

constexpr int kUserTimeoutMs = 15000;

void configure_socket(int fd, bool keepalive) {
  set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  if (keepalive) {
    set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    set_int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepIdleS);
    set_int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepIntervalS);
    set_int_option(fd, IPPROTO_TCP, TCP_KEEPCNT, kKeepCount);
    // Keepalive probes only idle connections; a write stuck on a peer that
    // vanished with data unacknowledged fails after this instead.
    set_int_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, kUserTimeoutMs);
  }
  set_int_option(fd, SOL_SOCKET, SO_SNDBUF, kSocketBufferBytes);
  set_int_option(fd, SOL_SOCKET, SO_RCVBUF, kSocketBufferBytes);
}

std::string errno_text(int error) {
  char buffer[256];
  // GNU strerror_r returns the message (maybe not in buffer); thread-safe.
  return ::strerror_r(error, buffer, sizeof buffer);
}

}  // namespace weft::rpc::detail
