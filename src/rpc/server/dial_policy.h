// Which endpoints a worker dials for PEER_CONNECT, and how often
// (docs/security.md, "Peer links: the dial policy").
//
// A host names the endpoint of a peer link; without a policy a worker would
// dial whatever it is told, so any client could use it to reach (and probe)
// machines the client itself cannot. The policy is the operator's:
//
//   DialPolicy p = DialPolicy::parse({"10.1.0.0/16", "192.168.1.7:50052"}, has_secret);
//   auto address = p.choose("nodeb:50052", own_port, &why);  // resolved, checked: "10.1.0.9:50052"
//   if (!address) refuse(why);                                // never dialed
//
// Entries: an address (IPv4, or IPv6 in brackets), optionally /BITS for a
// network and :PORT for one port; a host name (resolved once, at parse);
// "loopback" (127.0.0.0/8 and ::1), "any", or "none". With no entries the
// default is "any" for a worker that requires a token (every client that can
// ask already holds the pool's secret) and "loopback" for one that does not.
// The endpoint's name is resolved once and the address checked is the
// address dialed, so a name cannot change its answer in between.
// Whatever the entries, a worker never dials itself (its own port on an
// address of this machine).
//
// DialRate bounds how often a worker dials at all: a token bucket shared by
// every session (kBurst at once, kPerSecond after that).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace weft::rpc {

class DialPolicy {
 public:
  // Throws Error(invalid_input, "[--peer-allow] ...") naming a bad entry.
  static DialPolicy parse(const std::vector<std::string>& entries, bool has_secret);

  // The numeric endpoint to dial for `endpoint` ("host:port"): its first
  // resolved address the policy allows that is not this worker itself
  // (own_port on a local address; 0: no listening port). nullopt, with why
  // set, when there is none. The endpoint must already be well formed.
  std::optional<std::string> choose(const std::string& endpoint, uint16_t own_port, std::string* why) const;

  // One line for the worker's start-up log: "any", "loopback", or the ranges.
  std::string describe() const;

 private:
  struct Range {
    int family = 0;                 // AF_INET or AF_INET6
    std::array<uint8_t, 16> bytes{};  // the network's address (4 used for IPv4)
    int bits = 0;                   // prefix length
    uint16_t port = 0;              // 0: every port
    std::string text;               // as the operator wrote it
  };
  static void add_entry(DialPolicy& p, const std::string& entry);
  bool allows(int family, const uint8_t* address, uint16_t port) const;

  std::vector<Range> ranges_;
};

class DialRate {
 public:
  static constexpr double kPerSecond = 20;
  static constexpr double kBurst = 40;
  // Takes one dial; false when the bucket is empty.
  bool try_take();

 private:
  std::mutex mu_;
  double tokens_ = kBurst;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace weft::rpc
