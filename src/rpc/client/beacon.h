// The discovery beacon's wire form (docs/security.md, "Discovery"): one UDP
// datagram of text lines, at most kMaxBeaconBytes:
//
//   WEFT-BEACON 1
//   port=50052
//   protocol=1.8
//   tls=sha256:...            (absent for a plain worker)
//   auth=1                    (the worker requires a token)
//   address=A.B.C.D           (the address it was sent from: a signed beacon heard from another is dropped)
//   name=HOSTNAME
//   time=UNIX_SECONDS
//   device=NAME, N MiB free   (repeated, at most kMaxBeaconDevices)
//   mac=HEX                   (with a token: HMAC-SHA256 of every byte before this line, key the token)
//
// Unknown keys are ignored (later versions may add some); anything else
// malformed drops the datagram.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::rpc {

inline constexpr size_t kMaxBeaconBytes = 1400;
inline constexpr size_t kMaxBeaconDevices = 16;
inline constexpr int64_t kBeaconFreshSeconds = 30;  // a signed beacon older (or newer) than this is dropped

struct Beacon {
  uint16_t port = 0;
  std::string protocol, tls, name, address;
  bool auth = false;
  int64_t time = 0;
  std::vector<std::string> devices;
};

std::string encode_beacon(const Beacon& b, const std::optional<std::string>& secret);

struct ReadBeacon {
  Beacon beacon;
  bool signed_ok = false;  // a mac was present and verified with the secret
};
// nullopt (and *why) for a datagram that is not a well-formed beacon, or
// whose mac does not verify, or a signed one that is not fresh.
std::optional<ReadBeacon> decode_beacon(std::string_view datagram, const std::optional<std::string>& secret,
                                        int64_t now_seconds, std::string* why);

}  // namespace weft::rpc
