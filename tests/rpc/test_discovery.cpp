// Discovery (weft/rpc/discovery.h): the beacon's codec against hostile
// datagrams, and workers advertising on loopback found by a host: signed
// beacons kept only with the token that signed them, forged and replayed
// ones dropped, a TLS worker found with the fingerprint a host then pins.
// tests/tools/discovery_test.sh runs it across network namespaces.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/beacon.h"
#include "protocol/wire.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/client.h"
#include "weft/rpc/discovery.h"
#include "weft/rpc/worker.h"

namespace weft::rpc {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kToken = "pool token";

Beacon sample() {
  Beacon b;
  b.port = 50052;
  b.protocol = "1.8";
  b.tls = "sha256:" + std::string(64, 'a');
  b.auth = true;
  b.name = "box";
  b.address = "127.0.0.1";
  b.time = static_cast<int64_t>(std::time(nullptr));
  b.devices = {"host CPU, 8 threads, 1000 MiB free"};
  return b;
}

std::optional<ReadBeacon> decode(const std::string& d, const std::optional<std::string>& secret, std::string* why,
                                 int64_t skew = 0) {
  return decode_beacon(d, secret, static_cast<int64_t>(std::time(nullptr)) + skew, why);
}

TEST(Beacon, SignedBeaconsVerifyOnlyWithTheirTokenAndOnlyUntouched) {
  const Beacon b = sample();
  const std::string d = encode_beacon(b, kToken);
  std::string why;
  auto r = decode(d, kToken, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_TRUE(r->signed_ok);
  EXPECT_EQ(r->beacon.port, 50052);
  EXPECT_EQ(r->beacon.tls, b.tls);
  EXPECT_EQ(r->beacon.devices, b.devices);
  EXPECT_FALSE(decode(d, std::string("another token"), &why)) << "a mac of another token verified";
  std::string tampered = d;
  tampered.replace(tampered.find("port=50052"), 10, "port=50053");
  EXPECT_FALSE(decode(tampered, kToken, &why));
  EXPECT_NE(why.find("does not verify"), std::string::npos) << why;
  EXPECT_FALSE(decode(d, kToken, &why, kBeaconFreshSeconds + 5)) << "a stale signed beacon was kept";
  Beacon extreme = b;
  extreme.time = INT64_MIN;  // signed by a token holder: still no overflow (UBSan would stop here)
  EXPECT_FALSE(decode(encode_beacon(extreme, kToken), kToken, &why));
  extreme.time = INT64_MAX;
  EXPECT_FALSE(decode(encode_beacon(extreme, kToken), kToken, &why));
  // Without a token the mac cannot be checked: the beacon reads as unsigned.
  r = decode(d, std::nullopt, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_FALSE(r->signed_ok);
}

TEST(Beacon, MalformedDatagramsAreDropped) {
  const std::string good = encode_beacon(sample(), std::nullopt);
  std::string why;
  ASSERT_TRUE(decode(good, std::nullopt, &why)) << why;
  ASSERT_TRUE(decode(good + "future=key\n", std::nullopt, &why)) << "an unknown key is a later version's: " << why;
  const std::vector<std::string> bad = {
      "",
      "WEFT-BEACON 2\nport=1\ntime=1\n",
      good.substr(0, good.size() - 1),                          // no final newline
      "WEFT-BEACON 1\ntime=1\n",                                // no port
      "WEFT-BEACON 1\nport=0\ntime=1\n",                        // port 0
      "WEFT-BEACON 1\nport=70000\ntime=1\n",                    // port past 65535
      "WEFT-BEACON 1\nport=1\ntime=x\n",                        // bad time
      "WEFT-BEACON 1\nport=1\ntime=1\nauth=yes\n",              // bad flag
      "WEFT-BEACON 1\nport=1\ntime=1\ntls=sha256:12\n",         // bad fingerprint
      "WEFT-BEACON 1\nport=1\ntime=1\nno equals sign\n",        // bad line
      "WEFT-BEACON 1\nport=1\ntime=1\nname=" + std::string(200, 'n') + "\n",  // value too long
      good + std::string(kMaxBeaconBytes, 'x'),                // too long
  };
  for (const std::string& d : bad) EXPECT_FALSE(decode(d, std::nullopt, &why)) << "kept: " << d.substr(0, 60);
  std::string many = "WEFT-BEACON 1\nport=1\ntime=1\n";
  for (size_t i = 0; i <= kMaxBeaconDevices; ++i) many += "device=d\n";
  EXPECT_FALSE(decode(many, std::nullopt, &why));
  const std::string after_mac = encode_beacon(sample(), kToken) + "port=9\n";
  EXPECT_FALSE(decode(after_mac, kToken, &why));
  // Control characters in values are dropped, not passed on to a terminal.
  Beacon b = sample();
  b.name = "evil\x1b[2Jname";
  auto r = decode(encode_beacon(b, std::nullopt), std::nullopt, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->beacon.name, "evil[2Jname");
}

// A free UDP port for one test's beacons (tests run in parallel).
uint16_t free_udp_port() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

void send_datagram(uint16_t port, const std::string& d, const char* to = "127.255.255.255") {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, to, &a.sin_addr);
  ::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::close(fd);
}

struct Advertising {
  Advertising(uint16_t udp_port, std::optional<std::string> secret, const fs::path& tls_dir = {}) : cpu(make_cpu_device(1)) {
    WorkerOptions o;
    o.log = false;
    o.auth_secret = std::move(secret);
    o.advertise = true;
    o.advertise_port = udp_port;
    o.advertise_every = 100ms;
    if (!tls_dir.empty()) {
      o.tls_cert = tls_dir / "cert.pem";
      o.tls_key = tls_dir / "key.pem";
      make_self_signed_certificate(o.tls_cert, o.tls_key);
    }
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu.get()}, o);
    worker->start();
  }
  ~Advertising() { worker->stop(); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(worker->port()); }
  std::unique_ptr<Device> cpu;
  std::unique_ptr<Worker> worker;
};

const DiscoveredWorker* find(const std::vector<DiscoveredWorker>& found, const std::string& endpoint) {
  for (const DiscoveredWorker& w : found)
    if (w.endpoint == endpoint || w.endpoint.find("://" + endpoint + "#") != std::string::npos) return &w;
  return nullptr;
}

TEST(Discovery, AHostFindsTheWorkersItMayUse) {
  const uint16_t port = free_udp_port();
  const fs::path dir = fs::temp_directory_path() / ("weft_discovery_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Advertising open(port, std::nullopt), pooled(port, kToken, dir);
  DiscoveryOptions o;
  o.port = port;
  o.listen = 1200ms;  // beacons every 100 ms: many chances, even on a loaded machine
  // Without a token: this machine's token-less worker only.
  std::vector<DiscoveredWorker> found = discover_workers(o);
  ASSERT_NE(find(found, open.endpoint()), nullptr);
  EXPECT_EQ(find(found, pooled.endpoint()), nullptr) << "a worker that wants a token was offered without one";
  // With the token: the worker that signed with it, pinned by its beacon.
  o.auth_secret = kToken;
  found = discover_workers(o);
  EXPECT_EQ(find(found, open.endpoint()), nullptr) << "an unsigned beacon was used with a token";
  const DiscoveredWorker* w = find(found, pooled.endpoint());
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->signed_by_token);
  EXPECT_EQ(w->endpoint, "tls://" + pooled.endpoint() + "#" + pooled.worker->tls_fingerprint());
  EXPECT_EQ(w->protocol, std::to_string(kMajor) + "." + std::to_string(kMinor));  // this build's version
  ASSERT_EQ(w->devices.size(), 1u);
  RpcOptions ro;
  ro.auth_secret = kToken;
  ro.trust_on_first_use = false;
  EXPECT_EQ(make_rpc_devices(w->endpoint, ro).size(), 1u);  // usable as found
  // Listing everything shows both, the unusable one marked by its fields.
  o.keep_unusable = true;
  found = discover_workers(o);
  EXPECT_NE(find(found, open.endpoint()), nullptr);
  fs::remove_all(dir);
}

TEST(Discovery, ForgedAndReplayedBeaconsAreDropped) {
  const uint16_t port = free_udp_port();
  DiscoveryOptions o;
  o.port = port;
  o.listen = 1000ms;
  o.auth_secret = kToken;
  std::atomic<bool> listening{true};
  std::thread forger([&] {
    while (listening.load()) {  // until the host stops listening: none of it lost to a late start
      Beacon b = sample();
      b.port = 1111;
      send_datagram(port, encode_beacon(b, std::string("not the token")));  // forged mac
      b.port = 2222;
      b.address = "192.0.2.9";  // signed, but heard from 127.0.0.1: replayed from elsewhere
      send_datagram(port, encode_beacon(b, kToken));
      b.port = 3333;
      b.address = "127.0.0.1";
      send_datagram(port, encode_beacon(b, kToken));  // the genuine one
      std::this_thread::sleep_for(50ms);
    }
  });
  const std::vector<DiscoveredWorker> found = discover_workers(o);
  listening.store(false);
  forger.join();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].port, 3333);
}

}  // namespace
}  // namespace weft::rpc
