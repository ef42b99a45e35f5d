// Whether the client of an HTTP request is still connected, for a handler
// that waits without writing (a whole, non-streamed completion; a stream
// still queued): cpp-httplib 0.11 tells a handler nothing of its socket, so
// the socket is found among this process's descriptors by its two
// addresses, and peeked. A closed peer reads as end of stream.
#pragma once

#include <string>
#include <vector>

namespace weft::serve {

// The connection between remote_addr:remote_port and this process's
// local_port (the server's listening port).
struct PeerAddress {
  std::string remote_addr;
  int remote_port = -1;
  int local_port = -1;
};

// False once the peer has closed its side (or the socket failed); true
// while it is open, or when no such socket is found (nothing to tell).
// Reads nothing: data a client sent stays for the server.
bool peer_connected(const PeerAddress& peer);

// The TCP connections accepted on local port `port` (its listening socket
// excluded): descriptor and peer. A descriptor is valid only while its
// connection lives (ConnectionWatchdog uses it at once).
struct ServerConnection {
  int fd = -1;
  std::string remote_addr;
  int remote_port = -1;
};
std::vector<ServerConnection> server_connections(int port);

}  // namespace weft::serve
