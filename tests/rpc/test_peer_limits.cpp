// What peer links may make a worker spend, and where they may make it dial
// (docs/security.md: "Peer links"). Regression tests of the findings F1-F3:
//
// - F1: failed pushes (an error text instead of bytes) were kept uncharged
//   and unbounded in size; now a failure's text is at most kMaxString and
//   charged like bytes.
// - F2: empty and tiny parts cost uncharged bookkeeping, and an event could
//   have any number of parts; now each part and event is charged its
//   overhead, an empty part must end its event, and parts per event are capped.
// - F3: PEER_CONNECT dialed whatever a host named, as often as it liked,
//   told the host what answered, and could link a worker to itself; now a
//   dial policy decides, dials are counted and rate-limited, every failure
//   reads the same, and an idle link gives its slot up like any session.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/dial_policy.h"
#include "server/peer_inbox.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

struct LimitedWorker {
  explicit LimitedWorker(WorkerOptions o = {}) : cpu(make_cpu_device(1)) {
    o.log = std::getenv("WEFT_WORKER_TEST_LOG") != nullptr;
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu.get()}, o);
    worker->start();
  }
  ~LimitedWorker() { worker->stop(); }
  uint16_t port() const { return worker->port(); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(worker->port()); }

  std::unique_ptr<Device> cpu;
  std::unique_ptr<Worker> worker;
};

// 2 MiB for the worker, 512 KiB (and so 512 KiB of inbox) per session, and
// a short wait for room, so that a flood is refused quickly.
WorkerOptions small_worker() {
  WorkerOptions o;
  o.memory_budget = size_t{2} << 20;
  o.limits.session_memory = size_t{512} << 10;
  o.limits.io_timeout = std::chrono::milliseconds(300);
  return o;
}

std::unique_ptr<Conn> peer_session(uint16_t port) {
  auto c = std::make_unique<Conn>(port);
  c->send(Cmd::hello, hello_payload("WEFT", kMajor, kMinor, kPeerCaps));
  const HelloReply reply = parse<HelloReply>(c->expect_reply(Cmd::hello));
  EXPECT_NE(reply.capabilities & kCapPeerLinks, 0u);
  return c;
}

std::unique_ptr<Conn> attached_link(uint16_t port, const Ticket& ticket, uint32_t source) {
  auto c = peer_session(port);
  c->call(PeerAttachRequest{ticket, source, "raw link"});
  return c;
}

Bytes push_payload(uint64_t event, const Bytes& data, uint8_t flags, uint64_t handle = 1) {
  Writer w;
  PeerPushRequest{event, handle, 0, data.size(), flags, {}}.encode_head(w);
  w.bytes(data.data(), data.size());
  return w.data();
}

// The last ERROR flood() read, if it read one.
std::optional<Frame> link_error;

// Pushes until the link's session refuses one (its ERROR is then waiting) or
// n were sent; returns how many were sent. A PING after every 64 makes the
// worker's progress visible: the pushes before it were all posted.
int flood(Conn& link, int n, const std::function<Bytes(int)>& payload) {
  int sent = 0;
  try {
    for (; sent < n; ++sent) {
      link.send(Cmd::peer_push, payload(sent));
      if (sent % 64 == 63) {
        link.send(PingRequest{});
        Frame f = link.recv();
        if (f.is_error()) {
          link_error = f;
          return sent + 1;
        }
      }
    }
  } catch (const Error&) {  // the worker closed the link: its ERROR was read or is lost with it
  }
  return sent;
}

std::string last_error_text(Conn& link) {
  if (link_error) {
    std::string s = link_error->error_message();
    link_error.reset();
    return s;
  }
  try {
    Frame f = link.recv();
    return f.is_error() ? f.error_message() : "(no error: command " + std::to_string(f.command) + ")";
  } catch (const Error& e) {
    return std::string("(closed: ") + e.what() + ")";
  }
}

// F1: each failed push keeps its text; the text is charged, so the inbox
// fills and the flood is refused within the session's limit, while another
// client is served.
TEST(PeerLimits, FailedPushesAreChargedAndRefusedAtTheInboxCap) {
  LimitedWorker w(small_worker());
  auto owner = peer_session(w.port());
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  auto link = attached_link(w.port(), ticket, 1);
  const Bytes text(4000, 'e');
  const int sent = flood(*link, 1000, [&](int i) { return push_payload(static_cast<uint64_t>(i), text, kPushLast | kPushFailed); });
  const std::string why = last_error_text(*link);
  EXPECT_NE(why.find("no room"), std::string::npos) << why;
  // 512 KiB of inbox hold about 120 such failures, not 1000.
  EXPECT_LT(sent, 200);
  const size_t held = w.worker->memory_in_use();
  EXPECT_GE(held, size_t{400} << 10) << "the failures' texts are not charged";
  EXPECT_LE(held, small_worker().memory_budget);
  GoodClient during(w.port(), 0, 11);
  during.round();
  // The owner's wait for one of them fails with the pusher's text, cut to the limit.
  owner->send(PeerWaitRequest{1, 0});
  owner->send(PingRequest{});
  Frame f = owner->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_NE(f.error_message().find("could not push event 0"), std::string::npos) << f.error_message();
  EXPECT_LE(f.error_message().size(), kMaxString);
  owner->close();
  EXPECT_TRUE(eventually([&] { return w.worker->memory_in_use() < held / 4; })) << "the inbox's charge outlived its session";
  GoodClient after(w.port(), 0, 12);
  after.round();
}

// F1: a failure's text over the protocol's string limit is malformed.
TEST(PeerLimits, AFailureTextOverTheStringLimitEndsTheLink) {
  LimitedWorker w(small_worker());
  auto owner = peer_session(w.port());
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  auto link = attached_link(w.port(), ticket, 1);
  link->send(Cmd::peer_push, push_payload(1, Bytes(kMaxString + 1, 'e'), kPushLast | kPushFailed));
  Frame f = link->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::invalid_input);
  EXPECT_NE(f.error_message().find("failed push's message"), std::string::npos) << f.error_message();
  EXPECT_TRUE(link->closed_by_peer());
  EXPECT_LT(w.worker->memory_in_use(), size_t{64} << 10);
  owner->ping();
}

// F2: one-byte events are charged their bookkeeping, so a flood of them
// stops at the inbox's cap, well before the 4,096 events a link may have waiting.
TEST(PeerLimits, TinyPushesAreChargedTheirBookkeeping) {
  LimitedWorker w(small_worker());
  auto owner = peer_session(w.port());
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  auto link = attached_link(w.port(), ticket, 1);
  const int sent = flood(*link, 4000, [&](int i) { return push_payload(static_cast<uint64_t>(i), Bytes(1, 7), kPushLast); });
  const std::string why = last_error_text(*link);
  EXPECT_NE(why.find("no room"), std::string::npos) << why;
  const size_t per_event = 1 + PeerInbox::kPartOverhead + PeerInbox::kEventOverhead;
  EXPECT_LE(static_cast<size_t>(sent), (size_t{512} << 10) / per_event + 64 + 1);
  EXPECT_GE(w.worker->memory_in_use(), (size_t{512} << 10) - per_event - 4096) << "the events' bookkeeping is not charged";
  GoodClient during(w.port(), 0, 21);
  during.round();
}

// F2: an empty part that does not end its event is refused; so is a part
// past the cap of parts per event.
TEST(PeerLimits, EmptyPartsAndPartsPastTheCapEndTheLink) {
  LimitedWorker w(small_worker());
  auto owner = peer_session(w.port());
  const uint64_t handle = owner->alloc(0, 64);
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  {
    auto link = attached_link(w.port(), ticket, 1);
    link->send(Cmd::peer_push, push_payload(1, Bytes{}, 0));
    Frame f = link->recv();
    ASSERT_TRUE(f.is_error());
    EXPECT_NE(f.error_message().find("empty part"), std::string::npos) << f.error_message();
  }
  {
    auto link = attached_link(w.port(), ticket, 2);
    const int sent = flood(*link, 2000, [&](int) { return push_payload(5, Bytes(1, 7), 0); });
    const std::string why = last_error_text(*link);
    EXPECT_NE(why.find("parts already"), std::string::npos) << why;
    EXPECT_LE(sent, 1024 + 64 + 1);
  }
  // An empty event (a push of 0 bytes) is still fine, and arrives.
  auto link = attached_link(w.port(), ticket, 3);
  link->send(Cmd::peer_push, push_payload(9, Bytes{}, kPushLast, handle));
  link->ping();
  owner->send(PeerWaitRequest{3, 9});
  owner->ping();
}

// F3: a TCP listener that is not a weft worker: it writes a banner, or
// says nothing, to whoever connects.
class FakeService {
 public:
  explicit FakeService(std::string banner) : banner_(std::move(banner)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        if (!banner_.empty()) (void)!::write(c, banner_.data(), banner_.size());
        accepted_.push_back(c);  // kept open and silent until the end
      }
    });
  }
  ~FakeService() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (int c : accepted_) ::close(c);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::string banner_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<int> accepted_;
};

std::string closed_endpoint() {
  LimitedWorker gone;
  return gone.endpoint();
}

// The error a PEER_CONNECT to endpoint gets, with the endpoint and link id
// taken out (the rest must not depend on what answered).
std::string connect_error(Conn& host, uint32_t link, const std::string& endpoint, ErrorKind* kind = nullptr) {
  host.send(PeerConnectRequest{link, link, endpoint, Ticket{}, "worker A"});
  Frame f = host.recv();
  EXPECT_TRUE(f.is_error()) << "PEER_CONNECT to " << endpoint << " succeeded";
  if (!f.is_error()) return "";
  if (kind) *kind = f.error_kind();
  std::string text = f.error_message();
  const std::string named = "peer link " + std::to_string(link) + " to " + endpoint;
  const size_t at = text.find(named);
  EXPECT_NE(at, std::string::npos) << text;
  if (at != std::string::npos) text.erase(at, named.size());
  return text;
}

TEST(PeerDialPolicy, EveryFailedDialReadsTheSame) {
  WorkerOptions o;
  o.limits.io_timeout = std::chrono::milliseconds(300);  // the silent service's reply wait
  LimitedWorker a(o);
  FakeService ssh("SSH-2.0-OpenSSH_9.2\r\n"), silent("");
  LimitedWorker other_secret([] {
    WorkerOptions s;
    s.auth_secret = "another pool";
    return s;
  }());
  auto host = peer_session(a.port());
  ErrorKind kind{};
  const std::string closed = connect_error(*host, 1, closed_endpoint(), &kind);
  EXPECT_EQ(kind, ErrorKind::disconnected);
  EXPECT_EQ(connect_error(*host, 2, ssh.endpoint(), &kind), closed);
  EXPECT_EQ(kind, ErrorKind::disconnected);
  EXPECT_EQ(connect_error(*host, 3, silent.endpoint(), &kind), closed);
  EXPECT_EQ(kind, ErrorKind::disconnected);
  EXPECT_EQ(connect_error(*host, 4, other_secret.endpoint(), &kind), closed);
  EXPECT_EQ(kind, ErrorKind::disconnected);
  EXPECT_EQ(closed.find("SSH"), std::string::npos) << closed;
  host->ping();  // the session stays
}

TEST(PeerDialPolicy, AWorkerDoesNotDialItself) {
  LimitedWorker a;
  auto host = peer_session(a.port());
  for (const std::string& self : {a.endpoint(), "localhost:" + std::to_string(a.port()), "0.0.0.0:" + std::to_string(a.port())}) {
    ErrorKind kind{};
    const std::string text = connect_error(*host, 1, self, &kind);
    EXPECT_EQ(kind, ErrorKind::unsupported) << text;
    EXPECT_NE(text.find("this worker itself"), std::string::npos) << text;
  }
  EXPECT_EQ(a.worker->active_sessions(), 1) << "a link to itself was opened";
  host->ping();
}

TEST(PeerDialPolicy, ADialOutsideThePolicyIsNeverMade) {
  LimitedWorker b;  // a real worker the policy leaves out
  WorkerOptions o;
  o.peer_allow = {"127.0.0.1:1"};
  LimitedWorker a(o);
  auto owner = peer_session(b.port());
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  auto host = peer_session(a.port());
  host->send(PeerConnectRequest{1, 1, b.endpoint(), ticket, "worker A"});
  Frame f = host->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::unsupported);
  EXPECT_NE(f.error_message().find("dial policy"), std::string::npos) << f.error_message();
  EXPECT_EQ(b.worker->active_sessions(), 1) << "A dialed B anyway";
  // Without a token the default is loopback only: a LAN address is not dialed.
  LimitedWorker c;
  auto host_c = peer_session(c.port());
  ErrorKind kind{};
  EXPECT_NE(connect_error(*host_c, 1, "192.0.2.1:50052", &kind).find("dial policy"), std::string::npos);
  EXPECT_EQ(kind, ErrorKind::unsupported);
  // Allowed: B's own port.
  WorkerOptions allow_b;
  allow_b.peer_allow = {"127.0.0.0/8:" + std::to_string(b.port())};
  LimitedWorker d(allow_b);
  auto host_d = peer_session(d.port());
  host_d->call(PeerConnectRequest{1, 1, b.endpoint(), ticket, "worker D"});
}

// Every dial counts toward the session's 64, failed or refused ones too.
TEST(PeerDialPolicy, FailedDialsCountTowardTheCap) {
  LimitedWorker a;
  auto host = peer_session(a.port());
  const std::string closed = closed_endpoint();
  for (uint32_t i = 0; i < kMaxPeerLinksPerSession; ++i) {
    host->send(PeerConnectRequest{i, i, closed, Ticket{}, "worker A"});
    Frame f = host->recv();
    ASSERT_TRUE(f.is_error()) << i;
    // Dialed and failed, or refused by the dial rate: either way a reply, not the end.
    EXPECT_TRUE(f.error_kind() == ErrorKind::disconnected || f.error_kind() == ErrorKind::out_of_memory) << f.error_message();
  }
  host->send(PeerConnectRequest{999, 999, closed, Ticket{}, "worker A"});
  Frame f = host->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::invalid_input);
  EXPECT_NE(f.error_message().find("failed ones included"), std::string::npos) << f.error_message();
  EXPECT_TRUE(host->closed_by_peer());
}

// An idle link that holds nothing gives its place up when the worker is full.
TEST(PeerDialPolicy, AnIdleLinkGivesItsSlotUp) {
  WorkerOptions o;
  o.max_clients = 2;
  LimitedWorker b(o);
  auto owner = peer_session(b.port());
  ASSERT_NE(owner->alloc(0, 256), 0u);  // holds a buffer: never evicted
  const Ticket ticket = owner->call(PeerTicketRequest{}).ticket;
  auto link = attached_link(b.port(), ticket, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the eviction rule's second of idleness
  GoodClient newcomer(b.port(), 0, 31);  // busy before: every slot taken by a session or a link
  newcomer.round();
  EXPECT_TRUE(link->closed_by_peer());
  owner->ping();
}

TEST(DialPolicyParse, EntriesAndTheirErrors) {
  std::string why;
  const DialPolicy p = DialPolicy::parse({"10.1.0.0/16", "192.168.1.7:50052", "[fd00::]/8:7000", "localhost:9"}, true);
  EXPECT_EQ(p.choose("10.1.200.3:1234", 0, &why), "10.1.200.3:1234");
  EXPECT_FALSE(p.choose("10.2.0.1:1234", 0, &why)) << why;
  EXPECT_NE(why.find("dial policy"), std::string::npos);
  EXPECT_EQ(p.choose("192.168.1.7:50052", 0, &why), "192.168.1.7:50052");
  EXPECT_FALSE(p.choose("192.168.1.7:50053", 0, &why));
  EXPECT_EQ(p.choose("[fd12::1]:7000", 0, &why), "[fd12::1]:7000");
  EXPECT_FALSE(p.choose("[fe80::1]:7000", 0, &why));
  EXPECT_EQ(p.choose("127.0.0.1:9", 0, &why), "127.0.0.1:9");  // localhost, resolved at parse
  EXPECT_FALSE(p.choose("[::ffff:10.2.0.1]:80", 0, &why)) << "a v4-mapped address is checked as IPv4";
  EXPECT_EQ(p.choose("[::ffff:10.1.0.1]:80", 0, &why), "10.1.0.1:80");

  const DialPolicy open = DialPolicy::parse({}, /*has_secret=*/true);
  EXPECT_EQ(open.describe(), "any");
  EXPECT_EQ(open.choose("192.0.2.1:1", 0, &why), "192.0.2.1:1");
  const DialPolicy local = DialPolicy::parse({}, /*has_secret=*/false);
  EXPECT_EQ(local.describe(), "loopback");
  EXPECT_FALSE(local.choose("192.0.2.1:1", 0, &why));
  EXPECT_EQ(local.choose("127.0.0.5:1", 0, &why), "127.0.0.5:1");
  EXPECT_EQ(local.choose("[::1]:1", 0, &why), "[::1]:1");
  EXPECT_FALSE(DialPolicy::parse({"none"}, true).choose("127.0.0.1:1", 0, &why));

  for (const char* bad : {"10.0.0.0/33", "10.0.0.1:0", "10.0.0.1:70000", "fd00::1", "[fd00::1", "10.0.0.1/8x",
                          "name/8", ":80", "10.0.0.1:8a"}) {
    try {
      DialPolicy::parse({bad}, true);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(DialPolicyParse, TheRateRefusesPastTheBurstAndRefills) {
  DialRate rate;
  int taken = 0;
  const auto start = std::chrono::steady_clock::now();
  while (taken < 1000 && rate.try_take()) ++taken;
  // The burst, and what refilled at kPerSecond while the loop ran (however
  // long a loaded machine made it take).
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(taken, static_cast<int>(DialRate::kBurst));
  EXPECT_LE(taken, static_cast<int>(DialRate::kBurst + DialRate::kPerSecond * seconds) + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // about 2 tokens
  EXPECT_TRUE(rate.try_take());
}

}  // namespace
}  // namespace weft::rpc::wtest
