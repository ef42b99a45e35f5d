// DialPolicy and DialRate (dial_policy.h).
#include "server/dial_policy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "client/connection.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

[[noreturn]] void bad_entry(const std::string& entry, const std::string& why) {
  fail(ErrorKind::invalid_input, "--peer-allow",
       "'" + entry + "' " + why + " (want ADDR, ADDR/BITS, [V6ADDR]/BITS, each with an optional :PORT, a host name, " +
           "loopback, any or none)");
}

struct Address {
  int family = 0;
  std::array<uint8_t, 16> bytes{};
};

// An IPv4-mapped IPv6 address is checked (and dialed) as the IPv4 one.
Address from_sockaddr(const sockaddr* sa) {
  Address a;
  if (sa->sa_family == AF_INET) {
    a.family = AF_INET;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      a.family = AF_INET;
      std::memcpy(a.bytes.data(), v6.s6_addr + 12, 4);
    } else {
      a.family = AF_INET6;
      std::memcpy(a.bytes.data(), v6.s6_addr, 16);
    }
  }
  return a;
}

// Whether address is one of this machine's (or a wildcard): a socket can
// bind it only then.
bool is_local(const Address& a) {
  const int fd = ::socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int rc = -1;
  if (a.family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    std::memcpy(&sa.sin_addr, a.bytes.data(), 4);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  } else {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    std::memcpy(&sa.sin6_addr, a.bytes.data(), 16);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  }
  ::close(fd);
  return rc == 0;
}

std::string numeric(const Address& a, uint16_t port) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(a.family, a.bytes.data(), text, sizeof text);
  // Appended in place: GCC 12 misreads "[" + std::string&& as an overlapping
  // copy (-Wrestrict, GCC bug 105329).
  std::string out;
  if (a.family == AF_INET6) out += '[';
  out += text;
  if (a.family == AF_INET6) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

struct AddrInfoFree {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

AddrInfoList resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return nullptr;
  return AddrInfoList(list);
}

}  // namespace

DialPolicy DialPolicy::parse(const std::vector<std::string>& entries, bool has_secret) {
  DialPolicy p;
  if (entries.empty()) {
    add_entry(p, has_secret ? "any" : "loopback");
    return p;
  }
  for (const std::string& e : entries) add_entry(p, e);
  return p;
}

void DialPolicy::add_entry(DialPolicy& p, const std::string& entry) {
  auto add = [&](int family, const uint8_t* bytes, int bits, uint16_t port) {
    Range r;
    r.family = family;
    std::memcpy(r.bytes.data(), bytes, family == AF_INET ? 4 : 16);
    r.bits = bits;
    r.port = port;
    r.text = entry;
    p.ranges_.push_back(r);
  };
  static constexpr uint8_t kZero[16] = {};
  if (entry == "none") return;
  if (entry == "any") {
    add(AF_INET, kZero, 0, 0);
    add(AF_INET6, kZero, 0, 0);
    return;
  }
  if (entry == "loopback") {
    const uint8_t v4[4] = {127, 0, 0, 0};
    uint8_t v6[16] = {};
    v6[15] = 1;
    add(AF_INET, v4, 8, 0);
    add(AF_INET6, v6, 128, 0);
    return;
  }
  // Split "ADDR[/BITS][:PORT]" (ADDR of IPv6 in brackets).
  std::string address, rest;
  if (!entry.empty() && entry[0] == '[') {
    const size_t close = entry.find(']');
    if (close == std::string::npos) bad_entry(entry, "has no ']'");
    address = entry.substr(1, close - 1);
    rest = entry.substr(close + 1);
  } else {
    const size_t end = entry.find_first_of("/:");
    address = entry.substr(0, end);
    rest = end == std::string::npos ? "" : entry.substr(end);
    if (std::count(entry.begin(), entry.end(), ':') > 1) bad_entry(entry, "has an IPv6 address without brackets");
  }
  if (address.empty()) bad_entry(entry, "has no address");
  auto number = [&](const std::string& digits, unsigned long max, const char* what) -> unsigned long {
    if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      bad_entry(entry, std::string("has a bad ") + what);
    const unsigned long v = std::stoul(digits);
    if (v > max) bad_entry(entry, std::string("has a ") + what + " over " + std::to_string(max));
    return v;
  };
  std::optional<unsigned long> bits;
  uint16_t port = 0;
  if (!rest.empty() && rest[0] == '/') {
    const size_t colon = rest.find(':');
    bits = number(rest.substr(1, colon == std::string::npos ? std::string::npos : colon - 1), 128, "prefix length");
    rest = colon == std::string::npos ? "" : rest.substr(colon);
  }
  if (!rest.empty()) {
    if (rest[0] != ':') bad_entry(entry, "has '" + rest + "' after the address");
    port = static_cast<uint16_t>(number(rest.substr(1), 65535, "port"));
    if (port == 0) bad_entry(entry, "has port 0");
  }
  uint8_t bytes[16] = {};
  if (inet_pton(AF_INET, address.c_str(), bytes) == 1) {
    if (bits && *bits > 32) bad_entry(entry, "has a prefix over 32 bits for an IPv4 address");
    add(AF_INET, bytes, bits ? static_cast<int>(*bits) : 32, port);
    return;
  }
  if (inet_pton(AF_INET6, address.c_str(), bytes) == 1) {
    add(AF_INET6, bytes, bits ? static_cast<int>(*bits) : 128, port);
    return;
  }
  if (bits) bad_entry(entry, "has a prefix length after a host name");
  const AddrInfoList list = resolve(address);
  if (!list) bad_entry(entry, "names a host that does not resolve");
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    const Address resolved = from_sockaddr(a->ai_addr);
    if (resolved.family != 0) add(resolved.family, resolved.bytes.data(), resolved.family == AF_INET ? 32 : 128, port);
  }
}

bool DialPolicy::allows(int family, const uint8_t* address, uint16_t port) const {
  for (const Range& r : ranges_) {
    if (r.family != family || (r.port != 0 && r.port != port)) continue;
    const int full = r.bits / 8, partial = r.bits % 8;
    if (std::memcmp(r.bytes.data(), address, static_cast<size_t>(full)) != 0) continue;
    if (partial != 0) {
      const auto mask = static_cast<uint8_t>(0xff << (8 - partial));
      if ((r.bytes[static_cast<size_t>(full)] & mask) != (address[full] & mask)) continue;
    }
    return true;
  }
  return false;
}

std::optional<std::string> DialPolicy::choose(const std::string& endpoint, uint16_t own_port, std::string* why) const {
  const Endpoint e = parse_endpoint(endpoint);
  const AddrInfoList list = resolve(e.host);
  bool itself = false;
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    const Address address = from_sockaddr(a->ai_addr);
    if (address.family == 0) continue;
    if (own_port != 0 && e.port == own_port && is_local(address)) {
      itself = true;
      continue;
    }
    if (allows(address.family, address.bytes.data(), e.port)) return numeric(address, e.port);
  }
  // The same words whether the name did not resolve or resolved to
  // addresses the policy refuses: the host learns nothing of the network.
  *why = itself ? "it is this worker itself" : "this worker's dial policy does not allow it (--peer-allow)";
  return std::nullopt;
}

std::string DialPolicy::describe() const {
  if (ranges_.empty()) return "none";
  std::string out;
  const std::string* last = nullptr;
  for (const Range& r : ranges_) {
    if (last != nullptr && *last == r.text) continue;  // one entry, several ranges
    out += (out.empty() ? "" : " ") + r.text;
    last = &r.text;
  }
  return out;
}

bool DialRate::try_take() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min(kBurst, tokens_ + std::chrono::duration<double>(now - last_).count() * kPerSecond);
  last_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

}  // namespace weft::rpc
