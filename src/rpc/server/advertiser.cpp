// Advertiser (advertiser.h).
#include "server/advertiser.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

namespace weft::rpc {
namespace {

struct Target {
  in_addr from{};       // the interface's address: the datagram's source
  in_addr broadcast{};  // where it goes
};

bool is_any(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]"; }

// Where beacons go for a worker listening on host.
std::vector<Target> targets_for(const std::string& host) {
  std::vector<Target> out;
  in_addr wanted{};
  const bool loopback_only = host == "localhost" || (inet_pton(AF_INET, host.c_str(), &wanted) == 1 && (ntohl(wanted.s_addr) >> 24) == 127);
  if (loopback_only || is_any(host)) {
    Target t;
    inet_pton(AF_INET, "127.0.0.1", &t.from);
    inet_pton(AF_INET, "127.255.255.255", &t.broadcast);
    out.push_back(t);
  }
  if (loopback_only) return out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_BROADCAST) == 0 || i->ifa_netmask == nullptr) continue;
    const in_addr addr = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (!is_any(host) && addr.s_addr != wanted.s_addr) continue;
    // The network's broadcast address from the mask (an address added
    // without "brd" reports none of its own).
    const in_addr mask = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr;
    in_addr broadcast{};
    broadcast.s_addr = addr.s_addr | ~mask.s_addr;
    out.push_back(Target{addr, broadcast});
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

Advertiser::Advertiser(std::string listen_host, uint16_t udp_port, std::chrono::milliseconds every,
                       std::function<Beacon()> make, std::optional<std::string> secret, bool log)
    : host_(std::move(listen_host)),
      udp_port_(udp_port),
      every_(every),
      make_(std::move(make)),
      secret_(std::move(secret)),
      log_(log) {
  thread_ = std::thread([this] { loop(); });
}

Advertiser::~Advertiser() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Advertiser::sent() const {
  std::lock_guard lock(mu_);
  return sent_;
}

void Advertiser::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    send_all();
    lock.lock();
    cv_.wait_for(lock, every_, [&] { return stop_; });
  }
}

void Advertiser::send_all() {
  Beacon b;
  try {
    b = make_();
  } catch (...) {
    return;  // the facts could not be read this time (a device's memory, say): the next beacon tries again
  }
  b.time = static_cast<int64_t>(std::time(nullptr));
  uint64_t n = 0;
  std::string failure;
  for (const Target& t : targets_for(host_)) {
    char from[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &t.from, from, sizeof from);
    b.address = from;
    const std::string datagram = encode_beacon(b, secret_);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr = t.from;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_addr = t.broadcast;
    dst.sin_port = htons(udp_port_);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) == 0 &&
        ::sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) ==
            static_cast<ssize_t>(datagram.size())) {
      ++n;
    } else {
      failure = std::string(from) + ": " + std::strerror(errno);
    }
    ::close(fd);
  }
  std::lock_guard lock(mu_);
  sent_ += n;
  if (!failure.empty() && !warned_ && log_) {
    std::fprintf(stderr, "weft worker: a beacon could not be sent from %s (said once)\n", failure.c_str());
    warned_ = true;
  }
}

}  // namespace weft::rpc
