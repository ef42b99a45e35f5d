// Discovery beacons: the codec (beacon.h) and the host's listener
// (weft/rpc/discovery.h).
#include "client/beacon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include "transport/tls.h"
#include "weft/core/error.h"
#include "weft/rpc/discovery.h"

namespace weft::rpc {
namespace {

constexpr std::string_view kFirstLine = "WEFT-BEACON 1";
constexpr size_t kMaxValueBytes = 128;

std::string mac_hex(std::string_view signed_part, const std::string& secret) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(signed_part.data()),
       signed_part.size(), mac, &n);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

// A value as it may travel: printable, no newline, capped.
std::string clean(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, kMaxValueBytes)) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
  }
  return out;
}

template <class T>
bool parse_number(std::string_view s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string encode_beacon(const Beacon& b, const std::optional<std::string>& secret) {
  std::string out = std::string(kFirstLine) + "\n";
  out += "port=" + std::to_string(b.port) + "\n";
  out += "protocol=" + clean(b.protocol) + "\n";
  if (!b.tls.empty()) out += "tls=" + clean(b.tls) + "\n";
  out += std::string("auth=") + (b.auth ? "1" : "0") + "\n";
  if (!b.address.empty()) out += "address=" + clean(b.address) + "\n";
  out += "name=" + clean(b.name) + "\n";
  out += "time=" + std::to_string(b.time) + "\n";
  for (size_t i = 0; i < b.devices.size() && i < kMaxBeaconDevices; ++i) {
    const std::string line = "device=" + clean(b.devices[i]) + "\n";
    if (out.size() + line.size() + 70 > kMaxBeaconBytes) break;  // room for the mac
    out += line;
  }
  if (secret) out += "mac=" + mac_hex(out, *secret) + "\n";
  return out;
}

std::optional<ReadBeacon> decode_beacon(std::string_view d, const std::optional<std::string>& secret,
                                        int64_t now_seconds, std::string* why) {
  auto drop = [&](const std::string& reason) -> std::optional<ReadBeacon> {
    *why = reason;
    return std::nullopt;
  };
  if (d.size() > kMaxBeaconBytes) return drop("longer than " + std::to_string(kMaxBeaconBytes) + " bytes");
  if (d.substr(0, kFirstLine.size() + 1) != std::string(kFirstLine) + "\n") return drop("not a weft beacon");
  ReadBeacon r;
  bool have_port = false, have_time = false;
  std::optional<std::string> mac;
  size_t mac_at = 0;
  size_t pos = kFirstLine.size() + 1;
  while (pos < d.size()) {
    const size_t end = d.find('\n', pos);
    if (end == std::string_view::npos) return drop("a line without its newline");
    const std::string_view line = d.substr(pos, end - pos);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) return drop("a line without '='");
    if (mac) return drop("a line after the mac");
    const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (value.size() > kMaxValueBytes) return drop("a value longer than " + std::to_string(kMaxValueBytes) + " bytes");
    if (key == "port") {
      have_port = parse_number(value, &r.beacon.port) && r.beacon.port != 0;
      if (!have_port) return drop("a bad port");
    } else if (key == "time") {
      have_time = parse_number(value, &r.beacon.time);
      if (!have_time) return drop("a bad time");
    } else if (key == "protocol") {
      r.beacon.protocol = clean(value);
    } else if (key == "tls") {
      r.beacon.tls = normalize_fingerprint(std::string(value));
      if (r.beacon.tls.empty()) return drop("a bad TLS fingerprint");
    } else if (key == "auth") {
      if (value != "0" && value != "1") return drop("a bad auth flag");
      r.beacon.auth = value == "1";
    } else if (key == "address") {
      r.beacon.address = clean(value);
    } else if (key == "name") {
      r.beacon.name = clean(value);
    } else if (key == "device") {
      if (r.beacon.devices.size() >= kMaxBeaconDevices) return drop("too many devices");
      r.beacon.devices.push_back(clean(value));
    } else if (key == "mac") {
      mac = std::string(value);
      mac_at = pos;
    }  // other keys: a later version's, ignored
    pos = end + 1;
  }
  if (!have_port || !have_time) return drop("no port or no time");
  if (mac && secret) {
    const std::string want = mac_hex(d.substr(0, mac_at), *secret);
    if (want.size() != mac->size() || CRYPTO_memcmp(want.data(), mac->data(), want.size()) != 0)
      return drop("a mac that does not verify with this host's token");
    // Compared so that no time a beacon can name overflows the arithmetic.
    if (r.beacon.time < now_seconds - kBeaconFreshSeconds || r.beacon.time > now_seconds + kBeaconFreshSeconds)
      return drop("a signed beacon that is not fresh");
    r.signed_ok = true;
  }
  return r;
}

std::vector<DiscoveredWorker> discover_workers(const DiscoveryOptions& options) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(ErrorKind::internal, "discover", std::string("cannot make a UDP socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // several listeners on one machine
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(options.port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    fail(ErrorKind::invalid_input, "discover", "cannot listen on UDP port " + std::to_string(options.port) + ": " + std::strerror(e));
  }
  std::vector<DiscoveredWorker> found;
  const auto deadline = std::chrono::steady_clock::now() + options.listen;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[kMaxBeaconBytes + 1];
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0 || from.sin_family != AF_INET) continue;
    std::string why;
    const auto read = decode_beacon(std::string_view(buf, static_cast<size_t>(n)), options.auth_secret,
                                    static_cast<int64_t>(std::time(nullptr)), &why);
    if (!read) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &from.sin_addr, text, sizeof text);
    const bool loopback = (ntohl(from.sin_addr.s_addr) >> 24) == 127;
    // A signed beacon names where it was sent from: one replayed from
    // elsewhere would point this host at the replayer.
    if (read->signed_ok && read->beacon.address != text) continue;
    // What this host would use: with a token, beacons it signed; without
    // one, unsigned beacons of token-less workers on this machine only.
    const bool usable = options.auth_secret ? read->signed_ok : (!read->beacon.auth && loopback);
    if (!usable && !options.keep_unusable) continue;
    DiscoveredWorker w;
    w.address = text;
    w.port = read->beacon.port;
    w.name = read->beacon.name;
    w.protocol = read->beacon.protocol;
    w.tls_fingerprint = read->beacon.tls;
    w.wants_token = read->beacon.auth;
    w.signed_by_token = read->signed_ok;
    w.devices = read->beacon.devices;
    const std::string host_port = w.address + ":" + std::to_string(w.port);
    w.endpoint = w.tls_fingerprint.empty() ? host_port : "tls://" + host_port + "#" + w.tls_fingerprint;
    auto same = std::find_if(found.begin(), found.end(), [&](const DiscoveredWorker& f) {
      return f.address == w.address && f.port == w.port;
    });
    if (same == found.end()) {
      found.push_back(std::move(w));
    } else if (!same->signed_by_token || w.signed_by_token) {
      *same = std::move(w);  // the newest, but a signed one is never replaced by an unsigned one
    }
  }
  ::close(fd);
  return found;
}

}  // namespace weft::rpc
