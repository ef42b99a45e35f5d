// peer_connected (peer_probe.h): /proc/self/fd scanned for the TCP socket
// with these ports and peer address, then one non-blocking MSG_PEEK.
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

}  // namespace

bool peer_connected(const PeerAddress& peer) {
  if (peer.local_port < 0 || peer.remote_port < 0) return true;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return true;
  bool connected = true;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir) || !matches(static_cast<int>(fd), peer)) continue;
    char byte;
    const ssize_t got = recv(static_cast<int>(fd), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    connected = got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
    break;
  }
  closedir(dir);
  return connected;
}

}  // namespace weft::serve
