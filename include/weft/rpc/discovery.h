// Workers that find each other on the local network (docs/security.md,
// "Discovery"): `weft worker --advertise` broadcasts a small UDP beacon every
// two seconds (its port, protocol, TLS fingerprint, whether it wants a
// token, its devices and free memory); hosts listen for a while and list or
// use what they heard.
//
//   DiscoveryOptions o;
//   o.auth_secret = token;                         // beacons of the pool only
//   for (const DiscoveredWorker& w : discover_workers(o)) connect(w.endpoint);
//
// A beacon is not a credential. A worker with a token signs its beacon with
// it (HMAC-SHA256), and a host with the token keeps only signed beacons that
// verify and are fresh; so nobody without the token can point a host at a
// worker of theirs, nor change a real worker's fingerprint. A host without
// a token keeps only unsigned beacons sent from this machine (loopback):
// anyone on a network could forge one from elsewhere. The host still
// authenticates to every worker it uses, as with --worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::rpc {

inline constexpr uint16_t kDefaultDiscoveryPort = 50051;

struct DiscoveredWorker {
  std::string endpoint;         // what --worker takes: "ADDR:PORT", or "tls://ADDR:PORT#sha256:HEX"
  std::string address;          // the beacon's source address
  uint16_t port = 0;            // the worker's RPC port
  std::string name;             // the worker machine's host name, as it says
  std::string protocol;         // "1.8"
  std::string tls_fingerprint;  // "" for a plain worker
  bool wants_token = false;     // the worker requires authentication
  bool signed_by_token = false; // the beacon's MAC verified with the host's token
  std::vector<std::string> devices;  // "NAME, N MiB free" each
};

struct DiscoveryOptions {
  uint16_t port = kDefaultDiscoveryPort;            // the UDP port beacons go to
  std::chrono::milliseconds listen{2500};            // how long to listen
  std::optional<std::string> auth_secret;            // the pool's token: keep only beacons it signed
  bool keep_unusable = false;  // also list beacons this host would not use (weft workers shows them, marked)
};

// Listens for beacons for options.listen; one entry per endpoint, newest
// beacon's facts, in the order first heard. Throws Error(invalid_input)
// when the port cannot be bound.
std::vector<DiscoveredWorker> discover_workers(const DiscoveryOptions& options);

}  // namespace weft::rpc
