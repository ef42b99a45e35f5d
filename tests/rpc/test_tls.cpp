// TLS on every link (docs/security.md "TLS"): a TLS worker serves only TLS
// clients and tells a plain one so; a host trusts a worker's certificate by
// its fingerprint (a pin, the known-workers file, or trust on first use),
// refuses any other, and never falls back to plain; peer links between TLS
// workers are TLS with the host's pin; the same graph gives the same bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "temp_dir.h"
#include "transport/tls.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

namespace fs = std::filesystem;

// A scratch directory for certificates and known-workers files.
using weft::test::TempDir;

// A worker with a certificate of its own (made in dir/name-*.pem), or plain.
struct TlsWorker {
  TlsWorker(const fs::path& dir, const std::string& name, bool tls = true) : cpu(make_cpu_device(1)) {
    WorkerOptions o;
    o.log = std::getenv("WEFT_WORKER_TEST_LOG") != nullptr;
    if (tls) {
      o.tls_cert = dir / (name + "-cert.pem");
      o.tls_key = dir / (name + "-key.pem");
      EXPECT_TRUE(make_self_signed_certificate(o.tls_cert, o.tls_key));
      EXPECT_FALSE(make_self_signed_certificate(o.tls_cert, o.tls_key)) << "made again over existing files";
      EXPECT_EQ(fs::status(o.tls_key).permissions() & fs::perms::others_read, fs::perms::none);
    }
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu.get()}, o);
    worker->start();
  }
  ~TlsWorker() { worker->stop(); }
  std::string host_port() const { return "127.0.0.1:" + std::to_string(worker->port()); }
  std::string pinned() const { return "tls://" + host_port() + "#" + worker->tls_fingerprint(); }

  std::unique_ptr<Device> cpu;
  std::unique_ptr<Worker> worker;
};

// A wire-level connection over TLS, its certificate checked against the pin.
Conn tls_conn(const TlsWorker& w) {
  std::string presented;
  auto s = tls_connect(tcp_connect("127.0.0.1", w.worker->port()), std::chrono::steady_clock::now() + std::chrono::seconds(5),
                       &presented);
  EXPECT_EQ(presented, w.worker->tls_fingerprint());
  return Conn(std::move(s));
}

RpcOptions no_file(const TempDir& dir) {
  RpcOptions o;
  o.known_workers_file = (dir.path / "known_workers").string();
  o.trust_on_first_use = false;
  return o;
}

// The error make_rpc_devices throws for endpoint (or "" when it connects).
std::string connect_error(const std::string& endpoint, const RpcOptions& options, ErrorKind* kind = nullptr) {
  try {
    auto devices = make_rpc_devices(endpoint, options);
    return "";
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
}

TEST(Tls, AGraphOverTlsGivesTheSameBytesAsPlain) {
  TempDir dir;
  TlsWorker tls(dir.path, "a"), plain(dir.path, "b", false);
  EXPECT_EQ(normalize_fingerprint(tls.worker->tls_fingerprint()), tls.worker->tls_fingerprint());
  GoodClient over_tls(tls_conn(tls), 0, 7);
  GoodClient over_tcp(plain.worker->port(), 0, 7);
  for (int i = 0; i < 3; ++i) {
    over_tls.round();  // each checked against the float64 reference, on the same inputs
    over_tcp.round();
  }
  // Frames larger than a TLS record (16 KiB) both ways.
  std::vector<uint8_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  const uint64_t h = over_tls.conn().alloc(0, big.size());
  over_tls.conn().set(h, 0, big.data(), big.size());
  EXPECT_EQ(over_tls.conn().get(h, 0, big.size()), big);
}

TEST(Tls, APlainClientIsToldTheWorkerWantsTls) {
  TempDir dir;
  TlsWorker w(dir.path, "a");
  Conn plain(w.worker->port());
  plain.send(Cmd::hello, hello_payload());
  Frame f = plain.recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::unsupported);
  EXPECT_NE(f.error_message().find("requires TLS"), std::string::npos) << f.error_message();
  EXPECT_TRUE(plain.closed_by_peer());
  // The client library says the same, and no plain session ever starts.
  ErrorKind kind{};
  const std::string why = connect_error(w.host_port(), no_file(dir), &kind);
  EXPECT_NE(why.find("requires TLS"), std::string::npos) << why;
  GoodClient after(tls_conn(w), 0, 3);
  after.round();
}

TEST(Tls, ATlsClientDoesNotFallBackToPlain) {
  TempDir dir;
  TlsWorker plain(dir.path, "b", false);
  ErrorKind kind{};
  const std::string why = connect_error("tls://" + plain.host_port(), no_file(dir), &kind);
  EXPECT_EQ(kind, ErrorKind::disconnected) << why;
  EXPECT_NE(why.find("TLS handshake failed"), std::string::npos) << why;
  // The plain worker read the ClientHello as a malformed frame and closed:
  // nothing was sent after it (the error above is the client's last word).
  EXPECT_TRUE(eventually([&] { return plain.worker->active_sessions() == 0; })) << "the connection outlived the failed handshake";
}

TEST(Tls, OnlyThePinnedCertificateIsTrusted) {
  TempDir dir;
  TlsWorker w(dir.path, "a"), other(dir.path, "o");
  EXPECT_EQ(connect_error(w.pinned(), no_file(dir)), "");
  ErrorKind kind{};
  // The other worker's fingerprint for this one: a man in the middle.
  std::string why = connect_error("tls://" + w.host_port() + "#" + other.worker->tls_fingerprint(), no_file(dir), &kind);
  EXPECT_EQ(kind, ErrorKind::invalid_input) << why;
  EXPECT_NE(why.find("not the pinned"), std::string::npos) << why;
  why = connect_error("tls://" + w.host_port() + "#sha256:1234", no_file(dir), &kind);
  EXPECT_NE(why.find("fingerprint"), std::string::npos) << why;
  // No pin, no file entry, no trust on first use: refused, naming what to do.
  why = connect_error("tls://" + w.host_port(), no_file(dir), &kind);
  EXPECT_EQ(kind, ErrorKind::invalid_input);
  EXPECT_NE(why.find(w.worker->tls_fingerprint()), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(dir.path / "known_workers"));
}

TEST(Tls, TrustOnFirstUseRecordsTheWorkerThenHoldsItToThat) {
  TempDir dir;
  TlsWorker w(dir.path, "a"), other(dir.path, "o");
  RpcOptions tofu = no_file(dir);
  tofu.trust_on_first_use = true;
  EXPECT_EQ(connect_error("tls://" + w.host_port(), tofu), "");
  std::ifstream in(dir.path / "known_workers");
  std::string who, fingerprint;
  in >> who >> fingerprint;
  EXPECT_EQ(who, w.host_port());
  EXPECT_EQ(fingerprint, w.worker->tls_fingerprint());
  EXPECT_EQ(connect_error("tls://" + w.host_port(), no_file(dir)), "") << "the recorded fingerprint is trusted";
  // The file says another certificate for this address: refused, even with trust on first use.
  {
    std::ofstream out(dir.path / "known_workers");
    out << "# a comment\n" << w.host_port() << ' ' << other.worker->tls_fingerprint() << '\n';
  }
  ErrorKind kind{};
  const std::string why = connect_error("tls://" + w.host_port(), tofu, &kind);
  EXPECT_EQ(kind, ErrorKind::invalid_input);
  EXPECT_NE(why.find("remove that line"), std::string::npos) << why;
}

// Peer links between TLS workers: B's host hands A the pinned endpoint; A
// refuses one without a pin, and a wrong pin fails like any failed dial.
TEST(Tls, PeerLinksAreTlsWithTheHostsPin) {
  TempDir dir;
  TlsWorker a(dir.path, "a"), b(dir.path, "b"), other(dir.path, "o");
  Conn owner = tls_conn(b);
  owner.send(Cmd::hello, hello_payload("WEFT", kMajor, kMinor, kPeerCaps));
  owner.expect_reply(Cmd::hello);
  const uint64_t dst = owner.alloc(0, 4096);
  const Ticket ticket = owner.call(PeerTicketRequest{}).ticket;
  Conn host = tls_conn(a);
  host.send(Cmd::hello, hello_payload("WEFT", kMajor, kMinor, kPeerCaps));
  host.expect_reply(Cmd::hello);

  host.send(PeerConnectRequest{1, 1, "tls://" + b.host_port(), ticket, "worker A"});
  Frame f = host.recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_NE(f.error_message().find("needs the worker's fingerprint"), std::string::npos) << f.error_message();
  host.send(PeerConnectRequest{1, 1, "tls://" + b.host_port() + "#" + other.worker->tls_fingerprint(), ticket, "worker A"});
  f = host.recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::disconnected) << f.error_message();

  host.call(PeerConnectRequest{1, 1, b.pinned(), ticket, "worker A"});
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const uint64_t src = host.alloc(0, bytes.size());
  host.set(src, 0, bytes.data(), bytes.size());
  host.send(PushToPeerRequest{1, src, 0, bytes.size(), dst, 0, 42});
  host.ping();
  owner.send(PeerWaitRequest{1, 42});
  EXPECT_EQ(owner.get(dst, 0, bytes.size()), bytes);
}

}  // namespace
}  // namespace weft::rpc::wtest
