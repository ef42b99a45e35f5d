// peer_connected and server_connections (peer_probe.h): /proc/self/fd
// scanned for TCP sockets by their addresses; a peer probed with one
// non-blocking MSG_PEEK.
#include "serve/peer_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace weft::serve {

namespace {

// The port of an AF_INET or AF_INET6 address, and its text; -1 otherwise.
int port_of(const sockaddr_storage& a, std::string* text) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    if (text) *text = inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof buf) ? buf : "";
    return ntohs(v4.sin_port);
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (text) *text = inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof buf) ? buf : "";
    return ntohs(v6.sin6_port);
  }
  return -1;
}

bool matches(int fd, const PeerAddress& peer) {
  sockaddr_storage local{}, remote{};
  socklen_t n = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0 || port_of(local, nullptr) != peer.local_port)
    return false;
  n = sizeof remote;
  std::string addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &n) != 0) return false;
  return port_of(remote, &addr) == peer.remote_port && addr == peer.remote_addr;
}

// f(fd) for each open descriptor of this process until f returns false.
template <class F>
void for_each_socket(F&& f) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (!f(static_cast<int>(fd))) break;
  }
  closedir(dir);
}

}  // namespace

std::vector<ServerConnection> server_connections(int port) {
  std::vector<ServerConnection> out;
  for_each_socket([&](int fd) {
    sockaddr_storage local{}, remote{};
    socklen_t n = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0 || port_of(local, nullptr) != port) return true;
    n = sizeof remote;
    ServerConnection c;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &n) != 0) return true;  // the listening socket
    c.fd = fd;
    c.remote_port = port_of(remote, &c.remote_addr);
    if (c.remote_port >= 0) out.push_back(std::move(c));
    return true;
  });
  return out;
}

bool peer_connected(const PeerAddress& peer) {
  if (peer.local_port < 0 || peer.remote_port < 0) return true;
  bool connected = true;
  for_each_socket([&](int fd) {
    if (!matches(fd, peer)) return true;
    char byte;
    const ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    connected = got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
    return false;
  });
  return connected;
}

}  // namespace weft::serve
