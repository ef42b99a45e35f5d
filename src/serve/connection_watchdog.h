// A deadline for reading each request: cpp-httplib 0.11's read timeout
// bounds each recv(), not a request, so a client trickling a byte every few
// seconds would hold a connection (and one of the server's threads)
// forever. The watchdog finds the server's connections among this
// process's descriptors (peer_probe.h), and shuts down the socket of any
// connection that has spent longer than the window since it opened or since
// its last response ended without reaching a handler (its request fully
// read). A connection inside a handler (a completion generating) is left
// alone: the request's own timeout bounds that.
//
//   ConnectionWatchdog w(server_port, std::chrono::seconds(10));  // a thread
//   w.request_started(peer);  // a handler began: the request was read
//   w.request_done(peer);     // the response was sent: a new window opens
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "serve/peer_probe.h"

namespace weft::serve {

class ConnectionWatchdog {
 public:
  ConnectionWatchdog() = default;
  ~ConnectionWatchdog() { stop(); }
  ConnectionWatchdog(const ConnectionWatchdog&) = delete;
  ConnectionWatchdog& operator=(const ConnectionWatchdog&) = delete;

  // Starts the thread: connections to local port `port`, scanned every
  // quarter second.
  void start(int port, std::chrono::milliseconds window);
  void stop();
  void request_started(const PeerAddress& peer);
  void request_done(const PeerAddress& peer);
  // Connections shut down for reading too slowly (for tests and logs).
  uint64_t dropped() const;

 private:
  struct Connection {
    std::chrono::steady_clock::time_point since;  // opened, or its last response ended
    bool in_handler = false;
    bool seen = false;  // in the last scan
  };
  void run();
  void scan();

  int port_ = -1;
  std::chrono::milliseconds window_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = true;
  uint64_t dropped_ = 0;
  std::map<std::string, Connection> connections_;  // by "addr:port" of the peer
  std::thread thread_;
};

}  // namespace weft::serve
