// ConnectionWatchdog (connection_watchdog.h).
#include "serve/connection_watchdog.h"

#include <sys/socket.h>

#include <vector>

namespace weft::serve {

namespace {

std::string key_of(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

}  // namespace

void ConnectionWatchdog::start(int port, std::chrono::milliseconds window) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_) return;
  port_ = port;
  window_ = window;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void ConnectionWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ConnectionWatchdog::request_started(const PeerAddress& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  Connection& c = connections_[key_of(peer.remote_addr, peer.remote_port)];
  c.in_handler = true;
  c.seen = true;
}

void ConnectionWatchdog::request_done(const PeerAddress& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  Connection& c = connections_[key_of(peer.remote_addr, peer.remote_port)];
  c.in_handler = false;
  c.seen = true;
  c.since = std::chrono::steady_clock::now();
}

uint64_t ConnectionWatchdog::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void ConnectionWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_; });
    if (stop_) return;
    lock.unlock();
    scan();
    lock.lock();
  }
}

void ConnectionWatchdog::scan() {
  const std::vector<ServerConnection> now_open = server_connections(port_);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, c] : connections_) c.seen = false;
  for (const ServerConnection& sc : now_open) {
    auto [it, fresh] = connections_.try_emplace(key_of(sc.remote_addr, sc.remote_port));
    Connection& c = it->second;
    if (fresh) c.since = now;
    c.seen = true;
    if (!c.in_handler && now - c.since > window_) {
      ::shutdown(sc.fd, SHUT_RDWR);  // the blocked read returns, cpp-httplib closes it
      ++dropped_;
      c.since = now;  // once
    }
  }
  for (auto it = connections_.begin(); it != connections_.end();)
    it = it->second.seen ? std::next(it) : connections_.erase(it);
}

}  // namespace weft::serve
