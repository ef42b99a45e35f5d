// weft_fuzz_worker's peer links and TLS (fuzz_structured.h lists the parts):
//   dial  random PEER_CONNECTs from a session of the worker under test: to
//         that worker itself, to closed loopback ports, to a second
//         in-process worker (real links, some then used for a push), to a
//         TLS worker (pinned, mis-pinned, unpinned, or plain), to addresses
//         its dial policy leaves out, malformed ones, and more than 64 in one
//         session. Each reply is held to a model of docs/rpc-protocol.md
//         section 8 ("Failures") and docs/security.md ("Peer links"): the
//         kind; refusals (policy, itself, no pin) before any dial, so at
//         once; one fixed text for every failed dial, whatever answered;
//         the 65th dial, a link id already open or a malformed endpoint
//         ending the session. A rate-limit reply is a valid answer to any
//         dial: the limit is the whole worker's.
//   push  a raw peer link (PEER_TICKET on one session, PEER_ATTACH on
//         another) pushing hostile sequences: failures of about 4,096 bytes,
//         empty parts, about 1,024 parts of one event, floods of tiny events
//         until the inbox refuses, bad flags and sizes. Each push is held to a
//         model of the inbox (taken, or the link ended); the worker's memory
//         to what the model says waits (every part and event charged) and to
//         its budget; the owner's PEER_WAITs to what was pushed (the bytes
//         written, a failure's text, a foreign handle refused, a link that
//         ended named).
//   tls   a TLS worker sent nothing, garbage, a truncated or corrupted real
//         ClientHello, or a plain HELLO (which must get ERROR "requires
//         TLS"), some left half-open; then a real TLS client, pinned to the
//         worker's fingerprint, must be served correctly.
// The second worker ("the peer": 4 MiB, 512 KiB a session and so 512 KiB of
// inbox, a 300 ms io timeout, so that a flood ends in a moment) and the TLS
// worker (a 1 s handshake timeout) are made on first use, with the TLS
// certificate in a directory made once per run, and checked after every
// case that used them (check_link_workers). Every dial goes to loopback, or
// to an address the worker under test must refuse without dialing (its
// policy is loopback: no token). A worker whose policy is suspect would dial
// those addresses: run it where they lead nowhere, in a network namespace
// of its own (only a loopback):
//   unshare -rn sh -c 'ip link set lo up && weft_fuzz_worker --only dial --seconds 60'
// The dial rate's bucket is the run's: a --case-seed rerun starts it full,
// so a rate-limited answer may not come again (the model takes either).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_structured.h"
#include "protocol/messages.h"
#include "transport/stream.h"
#include "transport/tls.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kPeerBudget = size_t{4} << 20;
constexpr size_t kPeerSession = size_t{512} << 10;  // the peer's session limit, and so its inbox cap
constexpr size_t kInboxCap = size_t{256} << 20;     // any inbox's cap (docs/rpc-protocol.md section 8)
constexpr milliseconds kPeerIoTimeout{300};         // how long a push waits for room there
constexpr milliseconds kTlsHandshakeTimeout{1000};
constexpr uint64_t kOwnerBytes = 4096;  // an owner's buffer, where pushes land

// What the inbox charges and caps (docs/rpc-protocol.md section 8, "Events and parts").
constexpr size_t kPartCost = 96, kEventCost = 160;
constexpr size_t kPartsPerEvent = 1024, kEventsPerSource = 4096;

// The one text of every failed dial (docs/security.md, "What a host learns from a dial").
constexpr const char* kNoWorkerTookIt = "no weft worker took the link (this worker's log has the reason)";
// A refusal by the policy (or as itself, or for a missing pin) comes before
// any packet is sent: far sooner than this, less than a dial to a silent
// address would take (the connect timeout is 5 s, the reply timeout 3 s).
constexpr milliseconds kRefusedWithin{2000};

// --- the machine: what its loopback and "localhost" are ---

bool can_bind(int family, const char* address) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, address, &a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, address, &a->sin6_addr);
    len = sizeof *a;
  }
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) == 0;
  ::close(fd);
  return ok;
}

// Whether "localhost" names 127.0.0.1 and nothing else here: only then is
// what a worker does with it (dial 127.0.0.1, or refuse itself) certain.
bool localhost_is_127001() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo("localhost", nullptr, &hints, &list) != 0) return false;
  bool only = list != nullptr;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    only = only && a->ai_family == AF_INET &&
           reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  }
  freeaddrinfo(list);
  return only;
}

// A port bound on 127.0.0.1 and never listened on: a connection to it is
// refused at once, and no other process takes the port while the run lasts.
struct ClosedPort {
  ClosedPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0) {
      port = ntohs(a.sin_port);
    }
  }
  ~ClosedPort() {
    if (fd >= 0) ::close(fd);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int fd = -1;
  uint16_t port = 1;  // if no port could be bound: 1, closed everywhere that matters
};

std::unique_ptr<Stream> tcp_to(uint16_t port) {
  TcpOptions o;
  o.read_timeout = kReadTimeout;
  return tcp_connect("127.0.0.1", port, o);
}

// A real ClientHello (its first TLS record) as tls_connect sends it, caught
// by a listener that then hangs up (so that client's handshake fails).
Bytes capture_client_hello() {
  auto listener = tcp_listen("127.0.0.1", 0);
  const uint16_t port = listener->port();
  std::thread client([port] {
    try {
      std::string fingerprint;
      tls_connect(tcp_to(port), Clock::now() + std::chrono::seconds(5), &fingerprint);
    } catch (const Error&) {  // expected: nobody answers it
    }
  });
  Bytes record;
  try {
    auto s = listener->accept();
    s->set_read_deadline(Clock::now() + std::chrono::seconds(5));
    record.resize(5);
    s->read_exact(record.data(), 5);
    record.resize(5 + (size_t{record[3]} << 8 | record[4]));
    s->read_exact(record.data() + 5, record.size() - 5);
  } catch (const Error& e) {
    ADD_FAILURE() << "capturing a TLS ClientHello: " << e.what();
  }
  client.join();
  listener->close();
  if (record.size() < 6 || record[0] != 22) ADD_FAILURE() << "the captured ClientHello is not a handshake record";
  return record;
}

// --- the two other workers, made once per run ---

struct LinkWorkers {
  LinkWorkers()
      : peer_cpu(make_cpu_device(1)),
        tls_cpu(make_cpu_device(1)),
        dir(fs::temp_directory_path() / ("weft_fuzz_tls_" + std::to_string(::getpid()))) {
    const bool log = std::getenv("WEFT_FUZZ_LOG") != nullptr;
    WorkerOptions p;
    p.log = log;
    p.memory_budget = kPeerBudget;
    p.limits.session_memory = kPeerSession;
    p.limits.io_timeout = kPeerIoTimeout;
    peer = std::make_unique<Worker>(std::vector<Device*>{peer_cpu.get()}, p);
    peer->start();
    fs::remove_all(dir);
    fs::create_directories(dir);
    WorkerOptions t;
    t.log = log;
    t.tls_cert = dir / "cert.pem";
    t.tls_key = dir / "key.pem";
    if (!make_self_signed_certificate(t.tls_cert, t.tls_key)) ADD_FAILURE() << "no certificate made in " << dir;
    t.limits.handshake_timeout = kTlsHandshakeTimeout;
    tls = std::make_unique<Worker>(std::vector<Device*>{tls_cpu.get()}, t);
    tls->start();
    fingerprint = tls->tls_fingerprint();
    peer_good = std::make_unique<GoodClient>(peer->port(), 0, 17);
    peer_good->round();
    peer_good->round();
    peer_baseline = peer->memory_in_use();
    v6 = can_bind(AF_INET6, "::1");
    localhost_v4 = localhost_is_127001();
    client_hello = capture_client_hello();
  }
  ~LinkWorkers() {
    peer_good.reset();
    tls->stop();
    peer->stop();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  std::unique_ptr<Device> peer_cpu, tls_cpu;
  fs::path dir;
  std::unique_ptr<Worker> peer, tls;
  std::string fingerprint;  // the TLS worker's
  std::unique_ptr<GoodClient> peer_good;
  size_t peer_baseline = 0;
  ClosedPort closed[3];
  bool v6 = false;            // ::1 is this machine's: [::1] and [::] are then the worker itself too
  bool localhost_v4 = false;  // "localhost" is 127.0.0.1 only
  Bytes client_hello;
  bool used = false;  // a case used them since the last check
};

std::unique_ptr<LinkWorkers> g_links;

LinkWorkers& links() {
  if (!g_links) g_links = std::make_unique<LinkWorkers>();
  g_links->used = true;
  return *g_links;
}

// --- sessions ---

void peer_hello(Conn& c) {
  c.send(Cmd::hello, hello_payload("WEFT", kMajor, kMinor, kPeerCaps));
  const HelloReply r = parse<HelloReply>(c.expect_reply(Cmd::hello));
  EXPECT_NE(r.capabilities & kCapPeerLinks, 0u) << "the worker does not offer peer links";
}

std::unique_ptr<Conn> peer_session(uint16_t port) {
  auto c = std::make_unique<Conn>(port);
  peer_hello(*c);
  return c;
}

// A TLS connection to the TLS worker, its certificate held to the pin.
std::unique_ptr<Stream> tls_stream(const LinkWorkers& w) {
  std::string presented;
  auto s = tls_connect(tcp_to(w.tls->port()), Clock::now() + std::chrono::seconds(5), &presented);
  EXPECT_EQ(presented, w.fingerprint) << "the TLS worker presented another certificate";
  return s;
}

// A session that handed out a ticket (the receiving end of links), with a
// buffer for their pushes and the model of what that buffer holds.
struct Owner {
  std::unique_ptr<Conn> c;
  Ticket ticket{};
  uint64_t h = 0;
  Bytes bytes;
  std::set<uint32_t> sources;  // attached to it so far
  uint64_t next_event = 1;
};

Owner make_owner(std::unique_ptr<Conn> c, Rng& rng) {
  Owner o;
  o.c = std::move(c);
  o.h = o.c->alloc(0, kOwnerBytes);
  o.bytes = random_bytes(rng, kOwnerBytes);
  o.c->set(o.h, 0, o.bytes.data(), o.bytes.size());
  o.ticket = o.c->call(PeerTicketRequest{}).ticket;
  return o;
}

Ticket random_ticket(Rng& rng) {
  Ticket t{};
  for (uint8_t& b : t) b = static_cast<uint8_t>(rng());
  return t;
}

std::string random_pin(Rng& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string pin = "sha256:";
  for (int i = 0; i < 64; ++i) pin += kHex[rng() % 16];
  return pin;
}

// A fingerprint as openssl prints it ("SHA256:AB:CD:..."): normalize_fingerprint accepts it.
std::string openssl_style(const std::string& pin) {
  std::string out = "SHA256:";
  for (size_t i = 7; i + 1 < pin.size(); i += 2) {
    if (i > 7) out += ':';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(pin[i])));
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(pin[i + 1])));
  }
  return out;
}

template <class T>
const T& one_in(Rng& rng, const std::vector<T>& v) {
  return v[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(v.size()) - 1))];
}

std::string printable(Rng& rng, size_t n) {
  std::string s(n, ' ');
  for (char& c : s) c = static_cast<char>(pick(rng, 0x20, 0x7e));
  return s;
}

// =====================================================================
// dial: PEER_CONNECT against the dial policy
// =====================================================================

// What the model says one PEER_CONNECT must get (besides the rate limit's
// out_of_memory, a valid answer to any dial).
enum class Want { linked, itself, policy, no_pin, failed, fatal };

const char* want_name(Want w) {
  switch (w) {
    case Want::linked: return "a link";
    case Want::itself: return "unsupported (itself)";
    case Want::policy: return "unsupported (the dial policy)";
    case Want::no_pin: return "unsupported (no pin)";
    case Want::failed: return "disconnected (no weft worker took it)";
    default: return "invalid_input and the end of the session";
  }
}

struct Dial {
  std::string endpoint;
  Want want = Want::failed;
  std::string why;         // what the endpoint is, for the case's line
  Owner* owner = nullptr;  // the ticket's session, when the ticket is a live one
  Ticket ticket{};
  uint32_t source = 0;
};

// Now and then the endpoint as tls://: with a pin the worker dials as it
// would have, over TLS (a plain worker then fails the handshake); without
// one it refuses before anything else: a worker trusts no certificate on
// first use.
void maybe_tls(Rng& rng, Dial& d, const std::string& pin, double p) {
  if (!chance(rng, p)) return;
  if (chance(rng, 0.3)) {
    d.endpoint = "tls://" + d.endpoint;
    d.want = Want::no_pin;
    d.why += ", tls without a pin";
    return;
  }
  d.endpoint = "tls://" + d.endpoint + "#" + pin;
  if (d.want == Want::linked) d.want = Want::failed;
  d.why += ", tls";
}

uint32_t fresh_source(Rng& rng, const Owner& o) {
  uint32_t s = 0;
  do {
    s = static_cast<uint32_t>(rng());
  } while (o.sources.count(s) != 0);
  return s;
}

// Loopback names that are 127.0.0.1 (the resolved address is what is checked and dialed).
std::vector<std::string> names_of_127001(const LinkWorkers& w) {
  std::vector<std::string> v = {"127.0.0.1", "127.1", "2130706433", "[::ffff:127.0.0.1]"};
  if (w.localhost_v4) v.push_back("localhost");
  return v;
}

// The worker itself: its own port on any address of this machine.
Dial to_itself(Rng& rng, const LinkWorkers& w) {
  std::vector<std::string> hosts = names_of_127001(w);
  for (const char* h : {"127.0.0.2", "127.255.255.254", "0.0.0.0"}) hosts.push_back(h);
  if (w.v6) {
    hosts.push_back("[::1]");
    hosts.push_back("[::]");
  }
  Dial d;
  d.endpoint = one_in(rng, hosts) + ":" + std::to_string(env->worker->port());
  d.want = Want::itself;
  d.why = "itself";
  maybe_tls(rng, d, random_pin(rng), 0.2);
  return d;
}

// Nothing listens there: the worker dials, the connection is refused.
Dial to_closed(Rng& rng, const LinkWorkers& w) {
  Dial d;
  d.want = Want::failed;
  d.why = "closed port";
  const int k = static_cast<int>(pick(rng, 0, 5));
  if (k == 4) {
    d.endpoint = "127.0.0.2:" + std::to_string(w.peer->port());  // the peer listens on 127.0.0.1 only
  } else if (k == 5) {
    d.endpoint = "127.0.0.3:" + std::to_string(w.tls->port());
  } else {
    d.endpoint = one_in(rng, names_of_127001(w)) + ":" + std::to_string(w.closed[pick(rng, 0, 2)].port);
  }
  maybe_tls(rng, d, random_pin(rng), 0.25);
  return d;
}

// Addresses a loopback policy leaves out: documentation and private
// networks, link-local, multicast, broadcast, the unspecified address,
// IPv4-mapped forms and short IPv4 forms of them. Never the worker's own
// port (an address of this machine would then be "itself"), never dialed.
Dial outside(Rng& rng) {
  auto n = [&] { return std::to_string(pick(rng, 1, 254)); };
  std::string host;
  switch (pick(rng, 0, 17)) {
    case 0: host = "192.0.2." + n(); break;
    case 1: host = "198.51.100." + n(); break;
    case 2: host = "203.0.113." + n(); break;
    case 3: host = "10." + n() + "." + n() + "." + n(); break;
    case 4: host = "172.16." + n() + "." + n(); break;
    case 5: host = "192.168." + n() + "." + n(); break;
    case 6: host = "169.254." + n() + "." + n(); break;
    case 7: host = "0.0.0.0"; break;
    case 8: host = "224.0.0." + n(); break;
    case 9: host = "255.255.255.255"; break;
    case 10: host = "10.1"; break;       // 10.0.0.1
    case 11: host = "167772161"; break;  // 10.0.0.1
    case 12: host = "[2001:db8::" + n() + "]"; break;
    case 13: host = "[::ffff:10.0.0." + n() + "]"; break;
    case 14: host = "[::ffff:192.0.2." + n() + "]"; break;
    case 15: host = "[fe80::" + n() + "]"; break;
    case 16: host = "[fd00::" + n() + "]"; break;
    default: host = "[::]"; break;
  }
  int64_t port = 0;
  do {
    port = pick(rng, 1, 65535);
  } while (port == env->worker->port());
  Dial d;
  d.endpoint = host + ":" + std::to_string(port);
  d.want = Want::policy;
  d.why = "outside the policy";
  maybe_tls(rng, d, random_pin(rng), 0.2);
  return d;
}

// The peer worker: a link when the ticket is the owner's and the source new;
// a source already attached there or a ticket nobody handed out fails.
Dial to_peer(Rng& rng, const LinkWorkers& w, Owner& owner) {
  Dial d;
  d.endpoint = one_in(rng, names_of_127001(w)) + ":" + std::to_string(w.peer->port());
  const int k = static_cast<int>(pick(rng, 0, 9));
  if (k < 8) {
    d.owner = &owner;
    d.ticket = owner.ticket;
    if (k == 7 && !owner.sources.empty()) {
      d.source = *owner.sources.begin();
      d.want = Want::failed;
      d.why = "peer, a source attached already";
    } else {
      d.source = fresh_source(rng, owner);
      d.want = Want::linked;
      d.why = "peer";
    }
  } else {
    d.ticket = random_ticket(rng);
    d.source = static_cast<uint32_t>(rng());
    d.want = Want::failed;
    d.why = "peer, unknown ticket";
  }
  maybe_tls(rng, d, chance(rng, 0.5) ? w.fingerprint : random_pin(rng), 0.15);
  return d;
}

// The TLS worker: a link with its pin (either spelling), a failure with
// another pin or spoken to in plain, a refusal without a pin.
Dial to_tls_worker(Rng& rng, const LinkWorkers& w, Owner& owner) {
  const std::string at = (chance(rng, 0.5) ? "127.0.0.1:" : "127.1:") + std::to_string(w.tls->port());
  Dial d;
  d.owner = &owner;
  d.ticket = owner.ticket;
  d.source = fresh_source(rng, owner);
  const int k = static_cast<int>(pick(rng, 0, 9));
  if (k < 5) {
    d.endpoint = "tls://" + at + "#" + (k < 3 ? w.fingerprint : openssl_style(w.fingerprint));
    d.want = Want::linked;
    d.why = "TLS worker, pinned";
  } else if (k < 7) {
    d.endpoint = "tls://" + at + "#" + random_pin(rng);
    d.want = Want::failed;
    d.why = "TLS worker, another pin";
  } else if (k < 8) {
    d.endpoint = "tls://" + at;
    d.want = Want::no_pin;
    d.why = "TLS worker, no pin";
  } else {
    d.endpoint = at;
    d.want = Want::failed;
    d.why = "TLS worker, in plain";
  }
  return d;
}

// Endpoints parse_endpoint refuses: the host's error, which ends its session.
Dial malformed(Rng& rng) {
  static const std::vector<std::string> kFixed = {
      "",  "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:123456",
      "127.0.0.1:8a", "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1: 80", ":80", "[]:80", "::1:80", "[::1]", "[::1",
      "[::1]80", "tls://", "tls://127.0.0.1", "tls://127.0.0.1:80#", "tls://127.0.0.1:80#sha256:1234",
      "tls:/127.0.0.1:80", "localhost:0"};
  Dial d;
  d.want = Want::fatal;
  d.why = "malformed";
  const std::string pin = random_pin(rng);
  switch (pick(rng, 0, 5)) {
    case 0:
    case 1: d.endpoint = one_in(rng, kFixed); break;
    case 2: {  // anything without a ':' has no port
      d.endpoint = std::string(static_cast<size_t>(pick(rng, 0, 64)), 'x');
      for (char& c : d.endpoint) {
        do {
          c = static_cast<char>(rng());
        } while (c == ':');
      }
      break;
    }
    case 3: d.endpoint = "127.0.0.1:" + std::to_string(pick(rng, 65536, 99999)); break;
    case 4: {  // a pin of 63 or 65 digits, or one that is not hex
      const int how = static_cast<int>(pick(rng, 0, 2));
      d.endpoint = "tls://127.0.0.1:" + std::to_string(pick(rng, 1, 65535)) + "#" +
                   (how == 0 ? pin.substr(0, pin.size() - 1) : how == 1 ? pin + "0" : pin.substr(0, pin.size() - 1) + "g");
      break;
    }
    default: d.endpoint = "127.0.0.1:" + std::string(kMaxString, '1'); break;  // over the string limit
  }
  return d;
}

// PEER_CONNECT as the host sends it; an endpoint over the string limit
// (which Writer refuses to encode) spliced in by hand.
void send_connect(Conn& host, uint32_t link, const Dial& d) {
  const bool too_long = d.endpoint.size() > kMaxString;
  Bytes payload = encoded(PeerConnectRequest{link, d.source, too_long ? "" : d.endpoint, d.ticket, "fuzz host"}).data();
  if (too_long) {
    const auto n = static_cast<uint32_t>(d.endpoint.size());
    for (int i = 0; i < 4; ++i) payload[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
    payload.insert(payload.begin() + 12, d.endpoint.begin(), d.endpoint.end());
  }
  host.send(Cmd::peer_connect, payload);
}

enum class Got { linked, refused, failed, rate, fatal, wrong };

const char* got_name(Got g) {
  static constexpr const char* kNames[] = {"linked", "refused", "failed", "rate-limited", "ended", "wrong"};
  return kNames[static_cast<int>(g)];
}

// An endpoint for a message: unprintable bytes as '?', the over-long one shortened.
std::string shown(const std::string& endpoint) {
  std::string s = endpoint.size() <= 80 ? endpoint : endpoint.substr(0, 40);
  for (char& c : s)
    if (c < 0x20 || c == 0x7f) c = '?';
  return endpoint.size() <= 80 ? s : s + "...(" + std::to_string(endpoint.size()) + " bytes)";
}

// The reply to one PEER_CONNECT, held to the model. Every ERROR but the
// session-ending kind names the link and endpoint, then why in fixed words;
// a failed dial says exactly kNoWorkerTookIt (what answered stays in the
// worker's log); a refusal comes at once (no dial was made).
Got check_connect_reply(Conn& host, uint32_t link, const Dial& d, Want want, const std::string& fatal_text,
                        Clock::duration took, const std::string& desc) {
  Frame f;
  try {
    f = host.recv();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] no reply to PEER_CONNECT " << shown(d.endpoint) << ": " << e.what();
    return Got::wrong;
  }
  const std::string want_text = want_name(want);
  if (f.command == reply_code(Cmd::peer_connect)) {
    if (want != Want::linked) ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " linked; want " << want_text;
    EXPECT_TRUE(f.payload.empty()) << desc;
    return Got::linked;
  }
  if (!f.is_error() || f.payload.empty()) {
    ADD_FAILURE() << "[" << desc << "] PEER_CONNECT " << shown(d.endpoint) << " got frame " << f.command;
    return Got::wrong;
  }
  const ErrorKind kind = f.error_kind();
  const std::string msg = f.error_message();
  if (kind == ErrorKind::invalid_input) {
    if (want != Want::fatal) {
      ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " ended the session (" << msg << "); want " << want_text;
    } else if (msg.find(fatal_text) == std::string::npos) {
      ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " ended the session, not saying '" << fatal_text
                    << "': " << msg;
    }
    if (!host.closed_by_peer()) ADD_FAILURE() << "[" << desc << "] session kept after " << msg;
    return Got::fatal;
  }
  if (want == Want::fatal) {
    ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " answered " << error_kind_name(kind) << " (" << msg
                  << "); want " << want_text << (fatal_text.empty() ? "" : ": " + fatal_text);
    return Got::wrong;
  }
  const std::string head = "[PEER_CONNECT] peer link " + std::to_string(link) + " to " + d.endpoint + ": ";
  if (msg.rfind(head, 0) != 0) {
    ADD_FAILURE() << "[" << desc << "] the error does not start with '" << head << "': " << msg;
    return Got::wrong;
  }
  const std::string rest = msg.substr(head.size());
  if (kind == ErrorKind::out_of_memory) {  // the worker-wide rate: a valid answer to any dial
    if (rest.find("dials at most") == std::string::npos) ADD_FAILURE() << "[" << desc << "] " << msg;
    return Got::rate;
  }
  if (kind == ErrorKind::disconnected) {
    if (rest != kNoWorkerTookIt) {
      ADD_FAILURE() << "[" << desc << "] a failed dial must read the same whatever answered: " << msg;
    }
    if (want != Want::failed) ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " failed; want " << want_text;
    return Got::failed;
  }
  if (kind != ErrorKind::unsupported) {
    ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " answered " << error_kind_name(kind) << ": " << msg;
    return Got::wrong;
  }
  const char* reason = want == Want::itself   ? "refused: it is this worker itself"
                       : want == Want::policy ? "refused: this worker's dial policy does not allow it"
                       : want == Want::no_pin ? "refused: a TLS link needs the worker's fingerprint"
                                              : nullptr;
  if (reason == nullptr) {
    ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " refused (" << msg << "); want " << want_text;
  } else if (rest.rfind(reason, 0) != 0) {
    ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << ": want '" << reason << "', got: " << msg;
  }
  const auto ms = std::chrono::duration_cast<milliseconds>(took).count();
  if (took > kRefusedWithin) {
    ADD_FAILURE() << "[" << desc << "] " << shown(d.endpoint) << " refused only after " << ms
                  << " ms: a refusal must come before any dial";
  }
  return Got::refused;
}

// Bytes pushed over a link just made arrive in its owner's buffer: the link
// is real, not just an answer.
void push_through(Conn& host, uint64_t& host_buffer, uint32_t link, Owner& owner, uint32_t source, Rng& rng,
                  const std::string& desc) {
  if (host_buffer == 0) host_buffer = host.alloc(0, 256);
  const uint64_t n = static_cast<uint64_t>(pick(rng, 1, 256));
  const uint64_t at = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(kOwnerBytes - n)));
  const Bytes b = random_bytes(rng, n);
  host.set(host_buffer, 0, b.data(), n);
  const uint64_t event = owner.next_event++;
  host.send(PushToPeerRequest{link, host_buffer, 0, n, owner.h, at, event});
  host.ping();  // no deferred error from the push
  owner.c->send(PeerWaitRequest{source, event});
  std::copy(b.begin(), b.end(), owner.bytes.begin() + static_cast<ptrdiff_t>(at));
  EXPECT_EQ(owner.c->get(owner.h, 0, kOwnerBytes), owner.bytes)
      << "[" << desc << "] bytes pushed over link " << link << " did not arrive as sent";
}

// Where a dial goes. cheap: only endpoints answered at once (the worker
// itself, closed ports, outside the policy), for the runs of 65.
Dial draw_dial(Rng& rng, LinkWorkers& w, bool cheap, std::optional<Owner>& peer_owner,
               std::optional<Owner>& tls_owner) {
  const int r = static_cast<int>(pick(rng, 0, 99));
  if (r < 18) return to_itself(rng, w);
  if (r < 36 || (cheap && r >= 58)) return to_closed(rng, w);
  if (r < 58) return outside(rng);
  if (r < 78) {
    if (!peer_owner) peer_owner = make_owner(peer_session(w.peer->port()), rng);
    return to_peer(rng, w, *peer_owner);
  }
  if (r < 90) {
    if (!tls_owner) {
      auto c = std::make_unique<Conn>(tls_stream(w));
      peer_hello(*c);
      tls_owner = make_owner(std::move(c), rng);
    }
    return to_tls_worker(rng, w, *tls_owner);
  }
  return malformed(rng);
}

}  // namespace

void run_dial(Rng& rng, std::string& desc) {
  LinkWorkers& w = links();
  // Every address outside loopback here must be refused before it is
  // dialed; with another policy this case would reach other machines.
  if (env->worker->dial_policy() != "loopback") {
    ADD_FAILURE() << "the worker under test dials '" << env->worker->dial_policy() << "', not loopback only";
    return;
  }
  auto host = peer_session(env->worker->port());
  std::optional<Owner> peer_owner, tls_owner;  // made on first use
  const bool over_cap = chance(rng, 0.08);
  const int steps = over_cap ? static_cast<int>(kMaxPeerLinksPerSession) + 1 : static_cast<int>(pick(rng, 1, 10));
  desc += over_cap ? "65 PEER_CONNECTs" : "PEER_CONNECTs:";
  uint32_t dials = 0;  // answered ones: each counts toward the session's 64, made or not
  std::set<uint32_t> open;
  std::vector<uint32_t> unused;  // ids of dials that made no link: free again
  uint32_t next_link = static_cast<uint32_t>(pick(rng, 0, 1000));
  uint64_t host_buffer = 0;
  int got_counts[6] = {};
  for (int i = 0; i < steps; ++i) {
    const bool last_of_65 = over_cap && i == steps - 1;
    const Dial d = last_of_65 && chance(rng, 0.3) ? malformed(rng) : draw_dial(rng, w, over_cap, peer_owner, tls_owner);
    uint32_t link = next_link++;
    if (!open.empty() && chance(rng, 0.06)) {
      link = *std::next(open.begin(), pick(rng, 0, static_cast<int64_t>(open.size()) - 1));
    } else if (!unused.empty() && chance(rng, 0.2)) {
      link = one_in(rng, unused);
    }
    // The order the worker checks in: the message (an endpoint over the
    // string limit), the id, the count, the endpoint; then the dial's own fate.
    Want want = d.want;
    std::string fatal_text;
    if (d.endpoint.size() > kMaxString) {
      want = Want::fatal;
    } else if (open.count(link) != 0) {
      want = Want::fatal;
      fatal_text = "already open";
    } else if (dials >= kMaxPeerLinksPerSession) {
      want = Want::fatal;
      fatal_text = "failed ones included";
    }
    const std::string step = " [" + std::to_string(link) + (fatal_text.empty() ? "" : " (" + fatal_text + ")") + " " +
                             d.why + ": " + shown(d.endpoint);
    set_case_line(desc + (over_cap ? " (dial " + std::to_string(i + 1) + ")" : "") + step + "]");
    Got got = Got::wrong;
    for (int tries = 0;; ++tries) {
      const auto start = Clock::now();
      send_connect(*host, link, d);
      got = check_connect_reply(*host, link, d, want, fatal_text, Clock::now() - start, desc);
      if (got == Got::fatal || got == Got::wrong) break;
      ++dials;
      // A link the model wants, refused by the rate: a token comes every 50 ms.
      if (got != Got::rate || want != Want::linked || dials >= kMaxPeerLinksPerSession || tries == 40) break;
      std::this_thread::sleep_for(milliseconds(60));
    }
    ++got_counts[static_cast<int>(got)];
    if (!over_cap) desc += step + " -> " + got_name(got) + "]";
    if (got == Got::fatal || got == Got::wrong) break;
    if (got == Got::linked) {
      open.insert(link);
      if (d.owner != nullptr) d.owner->sources.insert(d.source);
      if (d.owner != nullptr && chance(rng, 0.6)) push_through(*host, host_buffer, link, *d.owner, d.source, rng, desc);
    } else {
      unused.push_back(link);
    }
  }
  g_stats.dial_linked += got_counts[0];
  g_stats.dial_refused += got_counts[1];
  g_stats.dial_failed += got_counts[2];
  g_stats.dial_rate_limited += got_counts[3];
  g_stats.dial_fatal += got_counts[4];
  if (over_cap) {
    desc += ": " + std::to_string(got_counts[0]) + " linked, " + std::to_string(got_counts[1]) + " refused, " +
            std::to_string(got_counts[2]) + " failed, " + std::to_string(got_counts[3]) + " rate-limited, " +
            std::to_string(got_counts[4]) + " ended";
    EXPECT_EQ(got_counts[4], 1) << "[" << desc << "] the 65th dial of a session must end it";
  }
  if (got_counts[4] == 0 && got_counts[5] == 0) host->ping();  // every refusal and failure leaves the session
}

namespace {

// =====================================================================
// push: a raw peer link's hostile pushes
// =====================================================================

// One PEER_PUSH as sent: its head (size may lie) and the bytes after it.
struct Push {
  uint64_t event = 0, handle = 0, offset = 0;
  Bytes data;
  uint8_t flags = 0;
  std::optional<uint64_t> size;  // the size field, when it is not data's size

  Bytes payload() const {
    Writer w;
    PeerPushRequest{event, handle, offset, size.value_or(data.size()), flags, {}}.encode_head(w);
    w.bytes(data.data(), data.size());
    return w.data();
  }
};

// What one source's pushes leave in the owner's inbox, and whether the next
// one is taken (docs/rpc-protocol.md section 8, "Events and parts").
struct InboxModel {
  struct Event {
    std::vector<Push> parts;
    bool complete = false;
    std::optional<std::string> failure;
    size_t charged = 0;
  };
  size_t cap = 0;
  size_t bytes = 0;  // charged to the worker's budget
  std::map<uint64_t, Event> events;
  uint64_t next_event = 1000;

  // "" when p is taken; else why the link must end.
  std::string verdict(const Push& p) const {
    if ((p.flags & ~(kPushLast | kPushFailed)) != 0) return "flags " + std::to_string(p.flags);
    if (p.size && *p.size != p.data.size()) return "a size that is not the bytes that follow";
    const bool failed = (p.flags & kPushFailed) != 0, last = (p.flags & kPushLast) != 0 || failed;
    if (failed && p.data.size() > kMaxString) return "a failure's text over the string limit";
    if (p.data.empty() && !last) return "an empty part that is not its event's last";
    auto it = events.find(p.event);
    const bool fresh = it == events.end();
    if (cost(p) > cap - std::min(bytes, cap)) return "no room in the inbox";
    if (fresh && events.size() >= kEventsPerSource) return "4096 events waiting";
    if (!fresh && it->second.complete) return "a push into a complete event";
    if (!fresh && it->second.parts.size() >= kPartsPerEvent) return "a 1025th part";
    return "";
  }
  size_t cost(const Push& p) const {
    return p.data.size() + kPartCost + (events.count(p.event) == 0 ? kEventCost : 0);
  }
  void take(const Push& p) {
    const size_t n = cost(p);
    Event& e = events[p.event];
    if ((p.flags & kPushFailed) != 0) {
      e.failure = std::string(p.data.begin(), p.data.end());
    } else {
      e.parts.push_back(p);
    }
    e.complete = (p.flags & (kPushLast | kPushFailed)) != 0;
    e.charged += n;
    bytes += n;
  }
  std::optional<uint64_t> any_event(Rng& rng, bool complete) const {
    std::vector<uint64_t> v;
    for (const auto& [id, e] : events)
      if (e.complete == complete) v.push_back(id);
    if (v.empty()) return std::nullopt;
    return one_in(rng, v);
  }
};

// The worker a push case targets: the one under test (a 256 MiB inbox: the
// 4,096 events and 1,024 parts bound first) or the small peer (512 KiB: the
// inbox's room bounds first).
struct Target {
  Worker* worker = nullptr;
  size_t budget = 0;
  size_t cap = 0;
  uint64_t foreign = 0;  // the good client's buffer there: never a link's to write
};

// The link takes p (a PING after it is answered) or ends (ERROR
// invalid_input, then closed), as the model says. Returns whether it lives.
bool push_one(Conn& link, InboxModel& m, const Push& p, const std::string& desc) {
  const std::string why = m.verdict(p);
  Frame f;
  try {
    link.send(Cmd::peer_push, p.payload());
    link.send(PingRequest{});
    f = link.recv();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] neither a PING reply nor an ERROR after a push" << (why.empty() ? "" : " (" + why + ")")
                  << ": " << e.what();
    return false;
  }
  if (why.empty()) {
    if (f.is_error()) {
      ADD_FAILURE() << "[" << desc << "] a push the model takes ended the link: " << f.error_message();
      return false;
    }
    EXPECT_EQ(f.command, reply_code(Cmd::ping)) << desc;
    m.take(p);
    ++g_stats.pushes_taken;
    return true;
  }
  if (!f.is_error()) {
    ADD_FAILURE() << "[" << desc << "] the link took a push the model refuses: " << why;
    return false;
  }
  EXPECT_EQ(f.error_kind(), ErrorKind::invalid_input) << "[" << desc << "] " << why << ": " << f.error_message();
  EXPECT_TRUE(link.closed_by_peer()) << "[" << desc << "] the link was kept after: " << f.error_message();
  ++g_stats.links_ended;
  return false;
}

// A run of pushes: all the model takes (up to max), PINGed every 64 and at
// the end; then, if the model refuses the next, that one alone, which must
// end the link. Returns whether the link lives.
template <class Make>
bool push_run(Conn& link, InboxModel& m, int max, Make make, const std::string& what, std::string& desc) {
  int taken = 0;
  std::optional<Push> refused;
  std::string why;
  try {
    for (int i = 0; i < max; ++i) {
      Push p = make(i);
      why = m.verdict(p);
      if (!why.empty()) {
        refused = std::move(p);
        break;
      }
      link.send(Cmd::peer_push, p.payload());
      m.take(p);
      ++taken;
      if (taken % 64 == 0) link.ping();
    }
    link.ping();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] the link ended within " << taken << " pushes the model takes: " << e.what();
    return false;
  }
  g_stats.pushes_taken += taken;
  desc += " " + what + " x" + std::to_string(taken) + (refused ? " then refused (" + why + ")" : "");
  set_case_line(desc);
  if (!refused) return true;
  return push_one(link, m, *refused, desc);
}

// The worker's memory against the model: everything waiting is charged
// (each part's bytes plus 96, 160 per event), nothing else much, never past
// the budget. before: the worker's memory with the link attached, nothing pushed.
void check_charged(const Target& t, size_t before, const InboxModel& m, const std::string& desc) {
  constexpr size_t kSlack = 4096;                // the link's own frame buffer, given back when it ends
  constexpr size_t kFrames = size_t{160} << 10;  // the sessions' frame buffers (the largest push was 64 KiB)
  const size_t now = t.worker->memory_in_use();
  EXPECT_LE(now, t.budget) << "[" << desc << "] memory_in_use over the worker's budget";
  if (now + kSlack < before + m.bytes) {
    ADD_FAILURE() << "[" << desc << "] " << m.bytes << " bytes wait in the inbox (parts and events counted), but "
                  << "the worker's memory grew from " << before << " to " << now << ": not all are charged";
  }
  if (!eventually([&] { return t.worker->memory_in_use() <= before + m.bytes + kFrames; })) {
    ADD_FAILURE() << "[" << desc << "] " << m.bytes << " bytes wait in the inbox, but the worker's memory grew from "
                  << before << " to " << t.worker->memory_in_use();
  }
}

bool in_buffer(const Push& p, const Owner& o) {
  return p.handle == o.h && p.offset <= kOwnerBytes && p.data.size() <= kOwnerBytes - p.offset;
}

// The owner's PEER_WAIT for event, held to the model: a complete event's
// parts are written (each inside the owner's buffer) or, if any is not,
// none is (a deferred internal error); a failed event fails with the
// pusher's text (disconnected); an event that can no longer complete, the
// link having ended, fails naming that. Waits only where the model says the
// wait ends: an open event on a live link would block the session.
void owner_wait(Owner& o, InboxModel& m, uint32_t source, uint64_t event, bool link_alive, std::string& desc) {
  std::optional<ErrorKind> want;
  std::string key;
  auto it = m.events.find(event);
  if (it != m.events.end() && it->second.complete) {
    const InboxModel::Event& e = it->second;
    if (e.failure) {
      want = ErrorKind::disconnected;
      key = "could not push event " + std::to_string(event);
    } else if (std::all_of(e.parts.begin(), e.parts.end(), [&](const Push& p) { return in_buffer(p, o); })) {
      for (const Push& p : e.parts) std::copy(p.data.begin(), p.data.end(), o.bytes.begin() + static_cast<ptrdiff_t>(p.offset));
    } else {
      want = ErrorKind::internal;
      key = "which is not memory of this session";
    }
    m.bytes -= e.charged;
    m.events.erase(it);
  } else if (!link_alive) {
    want = ErrorKind::disconnected;
    key = "ended before event " + std::to_string(event);
  } else {
    return;
  }
  desc += " wait " + std::to_string(event);
  set_case_line(desc);
  o.c->send(PeerWaitRequest{source, event});
  o.c->send(PingRequest{});
  const Frame f = o.c->recv();
  if (!want) {
    if (f.is_error()) ADD_FAILURE() << "[" << desc << "] waiting for a complete event: " << f.error_message();
    return;
  }
  if (!f.is_error()) {
    ADD_FAILURE() << "[" << desc << "] the wait for event " << event << " succeeded; want " << error_kind_name(*want)
                  << " (" << key << ")";
    return;
  }
  const std::string msg = f.error_message();
  EXPECT_EQ(f.error_kind(), *want) << "[" << desc << "] " << msg;
  EXPECT_NE(msg.find(key), std::string::npos) << "[" << desc << "] want '" << key << "': " << msg;
  EXPECT_LE(msg.size(), kMaxString) << desc;
  // The link's label is the host's text: the worker strips its control characters.
  EXPECT_TRUE(std::none_of(msg.begin(), msg.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      << "[" << desc << "] control characters in: " << msg;
  o.c->ping();  // the owner's session stays: the link's fault, not the host's
}

// A data part of an event: mostly inside the owner's buffer, now and then
// past its end or in the good client's buffer (which must never be written).
Push data_part(Rng& rng, const Target& t, const Owner& o, uint64_t event, size_t size, bool last) {
  Push p;
  p.event = event;
  p.data = random_bytes(rng, size);
  p.flags = last ? kPushLast : 0;
  const int k = static_cast<int>(pick(rng, 0, 19));
  p.handle = k == 0 ? t.foreign : k == 1 ? rng() : o.h;
  p.offset = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(kOwnerBytes - std::min<uint64_t>(size, kOwnerBytes))));
  if (k == 2) p.offset = kOwnerBytes - size + static_cast<uint64_t>(pick(rng, 1, 64));
  if (k == 3) p.offset = UINT64_MAX - static_cast<uint64_t>(pick(rng, 0, 16));
  return p;
}

Push failed_push(Rng& rng, uint64_t event, size_t size) {
  Push p;
  p.event = event;
  const std::string text = printable(rng, size);
  p.data.assign(text.begin(), text.end());
  p.flags = chance(rng, 0.8) ? kPushLast | kPushFailed : kPushFailed;
  return p;
}

// A label the host might send: any bytes, control characters included, up to 300.
std::string random_label(Rng& rng) {
  std::string s(static_cast<size_t>(pick(rng, 0, 300)), ' ');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// PEER_ATTACH where it is refused (a ticket no session handed out, a session
// that holds a buffer), or a PEER_PUSH before any: each ends that session.
void bad_attach(Rng& rng, uint16_t port, const Owner& owner, std::string& desc) {
  auto c = peer_session(port);
  switch (pick(rng, 0, 2)) {
    case 0:
      desc += " (attach: unknown ticket)";
      c->send(PeerAttachRequest{random_ticket(rng), 1, "x"});
      break;
    case 1:
      desc += " (attach: a session with a buffer)";
      c->alloc(0, 64);
      c->send(PeerAttachRequest{owner.ticket, 1, "x"});
      break;
    default: {
      desc += " (a push before any attach)";
      Push p;
      p.handle = owner.h;
      p.data = Bytes(8, 1);
      p.flags = kPushLast;
      c->send(Cmd::peer_push, p.payload());
    }
  }
  expect_fatal(*c);
}

// One step of a link's life; returns whether the link lives.
bool push_step(Rng& rng, const Target& t, Conn& link, Owner& o, InboxModel& m, std::string& desc) {
  const int k = static_cast<int>(pick(rng, 0, 99));
  auto new_event = [&] { return m.next_event++; };
  auto open_or_new = [&] {
    const std::optional<uint64_t> e = chance(rng, 0.5) ? m.any_event(rng, false) : std::optional<uint64_t>();
    return e ? *e : new_event();
  };
  if (k < 26) {
    const size_t size = static_cast<size_t>(pick(rng, 0, 64));
    const bool last = size == 0 ? chance(rng, 0.85) : chance(rng, 0.6);
    const Push p = data_part(rng, t, o, open_or_new(), size, last);
    desc += " part(" + std::to_string(size) + (last ? ",last" : "") + ")";
    return push_one(link, m, p, desc);
  }
  if (k < 40) {  // a failure's text around the string limit
    const size_t sizes[] = {0, 1, 100, kMaxString - 1, kMaxString, kMaxString + 1, kMaxString + 100, 8192, 65536};
    const size_t size = one_of(rng, sizes);
    desc += " failed(" + std::to_string(size) + ")";
    return push_one(link, m, failed_push(rng, open_or_new(), size), desc);
  }
  if (k < 45) {
    desc += " empty non-last part";
    Push p = data_part(rng, t, o, open_or_new(), 0, false);
    return push_one(link, m, p, desc);
  }
  if (k < 49) {
    Push p = data_part(rng, t, o, new_event(), 4, true);
    p.flags = static_cast<uint8_t>(pick(rng, 4, 255));
    desc += " flags " + std::to_string(p.flags);
    return push_one(link, m, p, desc);
  }
  if (k < 53) {
    Push p = data_part(rng, t, o, new_event(), 8, true);
    p.size = chance(rng, 0.5) ? 7 : chance(rng, 0.5) ? 9 : UINT64_MAX;
    desc += " size " + std::to_string(*p.size) + " for 8 bytes";
    return push_one(link, m, p, desc);
  }
  if (k < 57) {
    if (const auto e = m.any_event(rng, true)) {
      desc += " a part of complete event " + std::to_string(*e);
      return push_one(link, m, data_part(rng, t, o, *e, 4, chance(rng, 0.5)), desc);
    }
    desc += " ping";
    link.ping();
    return true;
  }
  if (k < 61) {  // a peer link only pushes
    desc += " ALLOC_BUFFER on the link";
    link.send(AllocBufferRequest{0, 64});
    expect_fatal(link);
    ++g_stats.links_ended;
    return false;
  }
  // Runs: tiny events, failures of about 4 KiB, parts of one event around
  // 1,024, empty events; each until the model refuses (or its length).
  const uint64_t base = m.next_event;
  if (k < 72) {
    m.next_event += 6000;
    return push_run(link, m, 6000, [&](int i) { return data_part(rng, t, o, base + static_cast<uint64_t>(i), 1, true); },
                    "tiny events", desc);
  }
  if (k < 81) {
    m.next_event += 6000;
    const size_t size = static_cast<size_t>(pick(rng, 3000, kMaxString));
    return push_run(link, m, 6000, [&](int i) { return failed_push(rng, base + static_cast<uint64_t>(i), size); },
                    "failures of " + std::to_string(size), desc);
  }
  if (k < 92) {
    const uint64_t event = new_event();
    const int n = static_cast<int>(pick(rng, 1000, 1030));
    const bool close = chance(rng, 0.5);
    return push_run(link, m, n,
                    [&](int i) { return data_part(rng, t, o, event, 1, close && i == n - 1); },
                    "parts of event " + std::to_string(event) + (close ? " (the last closing it)" : ""), desc);
  }
  m.next_event += 6000;
  return push_run(link, m, 6000, [&](int i) { return data_part(rng, t, o, base + static_cast<uint64_t>(i), 0, true); },
                  "empty events", desc);
}

}  // namespace

void run_push(Rng& rng, std::string& desc) {
  LinkWorkers& w = links();
  const bool small = chance(rng, 0.5);
  const Target t = small ? Target{w.peer.get(), kPeerBudget, kPeerSession, w.peer_good->handle()}
                         : Target{env->worker.get(), kBudget, kInboxCap, env->good->handle()};
  const uint16_t port = t.worker->port();
  desc += small ? "pushes into the small peer worker:" : "pushes into the worker:";
  set_case_line(desc);
  Owner owner = make_owner(peer_session(port), rng);
  if (chance(rng, 0.2)) bad_attach(rng, port, owner, desc);
  const uint32_t source = static_cast<uint32_t>(rng());
  auto link = peer_session(port);
  link->call(PeerAttachRequest{owner.ticket, source, random_label(rng)});
  if (chance(rng, 0.1)) {  // the same source again: refused, the first link untouched
    desc += " (the source attached twice)";
    auto again = peer_session(port);
    again->send(PeerAttachRequest{owner.ticket, source, "again"});
    expect_fatal(*again);
  }
  // Memory is measured with only the good client, the owner and the link left.
  if (!eventually([&] { return t.worker->active_sessions() == 3; })) {
    ADD_FAILURE() << "[" << desc << "] " << t.worker->active_sessions() << " sessions, want 3";
  }
  const size_t before = t.worker->memory_in_use();
  InboxModel m;
  m.cap = t.cap;
  bool alive = true;
  for (int i = static_cast<int>(pick(rng, 1, 8)); i > 0 && alive; --i) {
    alive = push_step(rng, t, *link, owner, m, desc);
    set_case_line(desc);
    if (::testing::Test::HasFailure()) return;
    check_charged(t, before, m, desc);
  }
  // A good client of its own is served while the inbox holds all that.
  if (chance(rng, 0.3)) {
    GoodClient during(port, 0, rng() | 1);
    during.round();
  }
  // The owner takes some events: complete ones, and (the link gone) open or unknown ones.
  for (int i = static_cast<int>(pick(rng, 1, 3)); i > 0; --i) {
    std::optional<uint64_t> e = m.any_event(rng, true);
    if (!alive && chance(rng, 0.4)) e = chance(rng, 0.5) ? m.any_event(rng, false) : std::optional<uint64_t>(rng());
    if (e) owner_wait(owner, m, source, *e, alive, desc);
  }
  EXPECT_EQ(owner.c->get(owner.h, 0, kOwnerBytes), owner.bytes)
      << "[" << desc << "] the owner's buffer is not what the pushes it took wrote";
  check_charged(t, before, m, desc);
  if (alive) link->ping();
}

namespace {

// =====================================================================
// tls: what a TLS worker gets before (or instead of) a ClientHello
// =====================================================================

// What the worker sends until it closes, waiting at most within.
struct Drained {
  bool closed = false;
  Bytes got;
};
Drained drain(Stream& s, milliseconds within) {
  const auto deadline = Clock::now() + within;
  s.set_read_deadline(deadline);
  Drained d;
  try {
    for (;;) {
      uint8_t b = 0;
      s.read_exact(&b, 1);
      d.got.push_back(b);
    }
  } catch (const Error&) {
    d.closed = Clock::now() < deadline;
  }
  return d;
}

// Sent bytes that are not TLS (no handshake record first): the worker must
// answer ERROR unsupported "requires TLS" in plain, and close.
void expect_told_tls(std::unique_ptr<Stream> s, const Bytes& bytes, const std::string& desc) {
  Conn c(std::move(s));
  Frame f;
  try {
    c.raw(bytes.data(), bytes.size());
    f = c.recv();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] no ERROR for a plain client of a TLS worker: " << e.what();
    return;
  }
  ASSERT_TRUE(f.is_error()) << "[" << desc << "] got frame " << f.command;
  EXPECT_EQ(f.error_kind(), ErrorKind::unsupported) << desc;
  EXPECT_NE(f.error_message().find("requires TLS"), std::string::npos) << "[" << desc << "] " << f.error_message();
  EXPECT_TRUE(c.closed_by_peer()) << "[" << desc << "] the plain connection was kept";
}

// After bytes that open (or claim to open) a handshake: the worker ends the
// connection by its handshake deadline, having sent TLS records at most
// (an alert, its own handshake): never a weft frame, never plain.
void expect_closed_in_tls(Stream& s, bool sent_nothing, const std::string& desc) {
  const Drained d = drain(s, kTlsHandshakeTimeout + milliseconds(2000));
  EXPECT_TRUE(d.closed) << "[" << desc << "] the connection outlived the handshake timeout";
  if (sent_nothing) {
    EXPECT_TRUE(d.got.empty()) << "[" << desc << "] the worker sent " << d.got.size() << " bytes to a silent client";
  } else if (!d.got.empty()) {
    EXPECT_TRUE(d.got[0] == 21 || d.got[0] == 22) << "[" << desc << "] the worker answered in plain (first byte "
                                                   << int{d.got[0]} << ")";
  }
}

// One hostile connection. stalled: one left half-open while the real client
// is served (at most one a case).
void hostile_tls(Rng& rng, const LinkWorkers& w, std::unique_ptr<Stream>& stalled, std::string& desc) {
  ++g_stats.tls_hostile;
  auto s = tcp_to(w.tls->port());
  const Bytes& hello = w.client_hello;
  Bytes bytes;
  const int k = static_cast<int>(pick(rng, 0, 9));
  switch (k) {
    case 0: desc += " nothing"; break;
    case 1: {
      bytes = random_bytes(rng, static_cast<size_t>(pick(rng, 1, 2048)));
      if (bytes[0] == 22) bytes[0] = 23;
      desc += " " + std::to_string(bytes.size()) + " bytes of garbage";
      return expect_told_tls(std::move(s), bytes, desc);
    }
    case 2: {
      desc += " a weft HELLO";
      return expect_told_tls(std::move(s), [] {
        Bytes b(kFrameHeaderBytes);
        const Bytes payload = hello_payload();
        encode_header(FrameHeader{static_cast<uint32_t>(payload.size()), static_cast<uint16_t>(Cmd::hello), 0}, b.data());
        b.insert(b.end(), payload.begin(), payload.end());
        return b;
      }(), desc);
    }
    case 3:
      bytes = random_bytes(rng, static_cast<size_t>(pick(rng, 1, 600)));
      bytes[0] = 22;
      if (bytes.size() >= 3 && chance(rng, 0.6)) bytes[1] = 3, bytes[2] = 1;
      desc += " 0x16 and " + std::to_string(bytes.size() - 1) + " random bytes";
      break;
    case 4:
      bytes.assign(hello.begin(), hello.begin() + pick(rng, 1, static_cast<int64_t>(hello.size()) - 1));
      desc += " a ClientHello cut at " + std::to_string(bytes.size());
      break;
    case 5:
      bytes = hello;
      for (int i = static_cast<int>(pick(rng, 1, 4)); i > 0; --i)
        bytes[static_cast<size_t>(pick(rng, 1, static_cast<int64_t>(bytes.size()) - 1))] = static_cast<uint8_t>(rng());
      desc += " a corrupted ClientHello";
      break;
    case 6: {
      bytes = hello;
      const Bytes tail = random_bytes(rng, static_cast<size_t>(pick(rng, 0, 300)));
      bytes.insert(bytes.end(), tail.begin(), tail.end());
      desc += " a ClientHello and " + std::to_string(tail.size()) + " bytes";
      break;
    }
    case 7: {  // a real handshake, then nothing or half a frame
      desc += " a handshake, then half a HELLO";
      std::string presented;
      auto t = tls_connect(std::move(s), Clock::now() + std::chrono::seconds(5), &presented);
      const Bytes h = hello_payload();
      uint8_t head[kFrameHeaderBytes];
      encode_header(FrameHeader{static_cast<uint32_t>(h.size()), static_cast<uint16_t>(Cmd::hello), 0}, head);
      t->write_all(head, static_cast<size_t>(pick(rng, 0, kFrameHeaderBytes)));
      return;
    }
    default:
      bytes.assign(hello.begin(), hello.begin() + pick(rng, 1, static_cast<int64_t>(hello.size()) - 1));
      if (!stalled) {
        desc += " a ClientHello cut at " + std::to_string(bytes.size()) + ", left open";
        s->write_all(bytes.data(), bytes.size());
        stalled = std::move(s);
        return;
      }
      desc += " a ClientHello cut at " + std::to_string(bytes.size());
  }
  set_case_line(desc);
  try {
    if (!bytes.empty()) s->write_all(bytes.data(), bytes.size());
  } catch (const Error&) {  // the worker may have refused it already
  }
  // Mostly gone at once; now and then kept, to see the worker end it.
  if (chance(rng, 0.25)) {
    desc += " (waited)";
    expect_closed_in_tls(*s, bytes.empty(), desc);
  }
}

}  // namespace

void run_tls(Rng& rng, std::string& desc) {
  const LinkWorkers& w = links();
  desc += "TLS worker sent:";
  std::unique_ptr<Stream> stalled;
  for (int i = static_cast<int>(pick(rng, 1, 3)); i > 0; --i) {
    hostile_tls(rng, w, stalled, desc);
    set_case_line(desc);
  }
  // A real client after them (beside the one left half-open): the pinned
  // certificate, and a graph computed right.
  GoodClient good(Conn(tls_stream(w)), 0, rng() | 1);
  good.round();
}

void check_link_workers(const std::string& desc) {
  if (!g_links || !g_links->used) return;
  LinkWorkers& w = *g_links;
  w.used = false;
  w.peer_good->round();
  if (!eventually([&] { return w.peer->active_sessions() == 1; })) {
    ADD_FAILURE() << "[" << desc << "] the peer worker has " << w.peer->active_sessions() << " sessions, want 1";
  }
  if (!eventually([&] { return w.peer->memory_in_use() == w.peer_baseline; })) {
    ADD_FAILURE() << "[" << desc << "] the peer worker holds " << w.peer->memory_in_use() << " bytes, "
                  << w.peer_baseline << " before";
  }
  if (!eventually([&] { return w.tls->active_sessions() == 0 && w.tls->memory_in_use() == 0; })) {
    ADD_FAILURE() << "[" << desc << "] the TLS worker has " << w.tls->active_sessions() << " sessions and "
                  << w.tls->memory_in_use() << " bytes after the case";
  }
}

void stop_link_workers() { g_links.reset(); }

}  // namespace weft::rpc::fuzz
