// Peer links (protocol 1.5, kCapPeerLinks): workers push activations to each
// other over links the host sets up (PEER_TICKET, PEER_CONNECT, PEER_ATTACH,
// PUSH_TO_PEER, PEER_PUSH, PEER_WAIT).
//
// PeerLinkWire drives in-process workers frame by frame (worker_wire.h): the
// whole flow by hand, hostile frames on every side of a link, a pushing worker
// that dies while the receiver waits. PeerLinkClient runs a graph split over
// two workers through the scheduler and checks that the activation goes from
// worker to worker without passing through the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rpc_client_fixture.h"
#include "server/worker_testing.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/context.h"
#include "weft/core/ops.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

// An in-process worker with one CPU device on 127.0.0.1, a free port.
struct PeerWorker {
  explicit PeerWorker(std::optional<std::string> secret = {}) : cpu(make_cpu_device(1)) {
    WorkerOptions o;
    o.log = std::getenv("WEFT_WORKER_TEST_LOG") != nullptr;
    o.auth_secret = std::move(secret);
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu.get()}, o);
    worker->start();
  }
  ~PeerWorker() { worker->stop(); }
  uint16_t port() const { return worker->port(); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(worker->port()); }

  std::unique_ptr<Device> cpu;
  std::unique_ptr<Worker> worker;
};

// HELLO offering peer links (and AUTH when asked); the reply must grant them.
void peer_handshake(Conn& c, const std::optional<std::string>& secret = {}) {
  c.send(Cmd::hello, hello_payload("WEFT", kMajor, kMinor, kPeerCaps));
  const HelloReply reply = parse<HelloReply>(c.expect_reply(Cmd::hello));
  EXPECT_NE(reply.capabilities & kCapPeerLinks, 0u) << "the worker does not grant peer links";
  if (reply.auth_required) {
    ASSERT_TRUE(secret.has_value());
    c.call(AuthRequest{auth_mac(*secret, reply.challenge.data())});
  }
}

std::unique_ptr<Conn> session(const PeerWorker& w, const std::optional<std::string>& secret = {}) {
  auto c = std::make_unique<Conn>(w.port());
  peer_handshake(*c, secret);
  return c;
}

Ticket ticket_of(Conn& c) { return c.call(PeerTicketRequest{}).ticket; }

// A raw connection to w playing a worker's link: handshake, then PEER_ATTACH.
std::unique_ptr<Conn> attached_link(const PeerWorker& w, const Ticket& ticket, uint32_t source) {
  auto c = session(w);
  c->call(PeerAttachRequest{ticket, source, "raw link"});
  return c;
}

Bytes push_payload(uint64_t event, uint64_t handle, uint64_t offset, const Bytes& data, uint8_t flags) {
  Writer w;
  PeerPushRequest{event, handle, offset, data.size(), flags, {}}.encode_head(w);
  w.bytes(data.data(), data.size());
  return w.data();
}

void send_push(Conn& c, uint64_t event, uint64_t handle, uint64_t offset, const Bytes& data,
               uint8_t flags = kPushLast) {
  c.send(Cmd::peer_push, push_payload(event, handle, offset, data, flags));
}

Bytes byte_pattern(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return b;
}

// The next frame must be an ERROR containing `part` (and of kind `kind`).
void expect_error(Conn& c, ErrorKind kind, const std::string& part) {
  Frame f = c.recv();
  ASSERT_TRUE(f.is_error()) << "got command " << f.command << " instead of ERROR (wanted: " << part << ")";
  EXPECT_EQ(f.error_kind(), kind) << f.error_message();
  EXPECT_NE(f.error_message().find(part), std::string::npos) << f.error_message();
}

// 1. The whole flow by hand: H1 on B hands out a ticket, H2 on A links to
// B with it and pushes its bytes, H1 waits for them and finds them in its
// buffer (at an offset, with bytes around them untouched).
TEST(PeerLinkWire, HappyPathByHand) {
  PeerWorker a, b;
  auto h1 = session(b);
  const uint64_t dst = h1->alloc(0, 4096);
  const Bytes before = byte_pattern(4096, 3);
  h1->set(dst, 0, before.data(), before.size());
  const Ticket ticket = ticket_of(*h1);
  EXPECT_EQ(ticket_of(*h1), ticket) << "one session hands out one ticket";

  auto h2 = session(a);
  const uint64_t src = h2->alloc(0, 4096);
  const Bytes bytes = byte_pattern(3000, 101);
  h2->set(src, 100, bytes.data(), bytes.size());
  h2->call(PeerConnectRequest{1, 7, b.endpoint(), ticket, "worker A"});
  EXPECT_TRUE(eventually([&] { return b.worker->active_sessions() == 2; })) << "no link session on B";

  h2->send(PushToPeerRequest{1, src, 100, 3000, dst, 512, 42});
  h1->send(PeerWaitRequest{7, 42});
  const Bytes got = h1->get(dst, 0, 4096);
  ASSERT_EQ(got.size(), 4096u);
  Bytes want = before;
  std::memcpy(want.data() + 512, bytes.data(), bytes.size());
  EXPECT_TRUE(got == want) << "B's buffer is not A's bytes at 512 with the rest untouched";
  h1->ping();  // no deferred error on either side
  h2->ping();

  // A second event over the same link.
  const Bytes again = byte_pattern(256, 9);
  h2->set(src, 0, again.data(), again.size());
  h2->send(PushToPeerRequest{1, src, 0, 256, dst, 0, 43});
  h1->send(PeerWaitRequest{7, 43});
  const Bytes got2 = h1->get(dst, 0, 256);
  EXPECT_TRUE(got2 == again);
  h2->ping();
}

// 2. Hostile frames.

TEST(PeerLinkWire, AttachWithAWrongTicketIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const Ticket real = ticket_of(*h1);
  Ticket wrong{};
  std::mt19937 rng(12345);
  for (auto& x : wrong) x = static_cast<uint8_t>(rng());
  ASSERT_NE(wrong, real);
  auto link = session(b);
  link->send(PeerAttachRequest{wrong, 1, "liar"});
  expect_fatal(*link);
  h1->ping();  // the ticket's owner is unaffected
}

TEST(PeerLinkWire, PeerPushOnANormalSessionIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const uint64_t dst = h1->alloc(0, 64);
  ticket_of(*h1);
  send_push(*h1, 1, dst, 0, byte_pattern(16, 1));
  expect_fatal(*h1);
}

TEST(PeerLinkWire, ALinkOnlyPushes) {
  PeerWorker b;
  auto h1 = session(b);
  const Ticket ticket = ticket_of(*h1);
  {
    auto link = attached_link(b, ticket, 1);
    link->ping();  // PING is allowed on a link
    link->send(GetDevicesRequest{});
    expect_fatal(*link);
  }
  {
    auto link = attached_link(b, ticket, 2);
    link->send(AllocBufferRequest{0, 64});
    expect_fatal(*link);
  }
  {
    auto link = attached_link(b, ticket, 3);
    link->send(PeerTicketRequest{});
    expect_fatal(*link);
  }
  EXPECT_TRUE(eventually([&] { return b.worker->active_sessions() == 1; }));
  h1->ping();
}

TEST(PeerLinkWire, PushIntoAnotherSessionsBufferIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const uint64_t mine = h1->alloc(0, 256);
  const Bytes mine_before = byte_pattern(256, 5);
  h1->set(mine, 0, mine_before.data(), mine_before.size());
  const Ticket ticket = ticket_of(*h1);

  auto h3 = session(b);  // a third session: its buffer must stay out of reach
  const uint64_t theirs = h3->alloc(0, 256);
  const Bytes theirs_before = byte_pattern(256, 77);
  h3->set(theirs, 0, theirs_before.data(), theirs_before.size());
  h3->ping();

  auto link = attached_link(b, ticket, 9);
  const Bytes evil = byte_pattern(128, 200);
  // Event 1: one part, into the other session's buffer.
  send_push(*link, 1, theirs, 0, evil);
  h1->send(PeerWaitRequest{9, 1});
  h1->send(PingRequest{});
  expect_error(*h1, ErrorKind::internal, "not memory of this session");
  EXPECT_TRUE(h3->get(theirs, 0, 256) == theirs_before) << "a push wrote another session's buffer";
  EXPECT_TRUE(h1->get(mine, 0, 256) == mine_before);

  // Event 2: a part into H1's own buffer, then one into the other
  // session's: nothing of the event is written, not even the good part.
  send_push(*link, 2, mine, 0, evil, 0);
  send_push(*link, 2, theirs, 128, evil, kPushLast);
  h1->send(PeerWaitRequest{9, 2});
  h1->send(SynchronizeRequest{0});
  expect_error(*h1, ErrorKind::internal, "not memory of this session");
  EXPECT_TRUE(h1->get(mine, 0, 256) == mine_before) << "part of a refused event was written";
  EXPECT_TRUE(h3->get(theirs, 0, 256) == theirs_before);

  // Event 3: a range past the end of H1's own buffer.
  send_push(*link, 3, mine, 200, evil);
  h1->send(PeerWaitRequest{9, 3});
  h1->send(PingRequest{});
  expect_error(*h1, ErrorKind::internal, "not memory of this session");
  EXPECT_TRUE(h1->get(mine, 0, 256) == mine_before);

  // H1 and the link stay usable: a good push lands.
  h1->ping();
  send_push(*link, 4, mine, 64, evil);
  h1->send(PeerWaitRequest{9, 4});
  Bytes want = mine_before;
  std::memcpy(want.data() + 64, evil.data(), evil.size());
  EXPECT_TRUE(h1->get(mine, 0, 256) == want);
  h1->ping();
  link->ping();
  EXPECT_EQ(b.worker->active_sessions(), 3);
}

TEST(PeerLinkWire, UnknownPushFlagsAreRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const uint64_t dst = h1->alloc(0, 64);
  const Ticket ticket = ticket_of(*h1);
  auto link = attached_link(b, ticket, 1);
  send_push(*link, 1, dst, 0, byte_pattern(16, 1), 4);
  expect_fatal(*link);
  h1->ping();
}

TEST(PeerLinkWire, ASecondAttachOfOneSourceIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const Ticket ticket = ticket_of(*h1);
  auto first = attached_link(b, ticket, 5);
  auto second = session(b);
  second->send(PeerAttachRequest{ticket, 5, "impostor"});
  expect_fatal(*second);
  first->ping();  // the first link is untouched
  auto other = attached_link(b, ticket, 6);  // another source is fine
  other->ping();
}

TEST(PeerLinkWire, AttachToASessionThatHoldsBuffersIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  const Ticket ticket = ticket_of(*h1);
  auto c = session(b);
  c->alloc(0, 64);
  c->send(PeerAttachRequest{ticket, 1, "busy"});
  expect_fatal(*c);
}

TEST(PeerLinkWire, PushToPeerOnAnUnknownLinkIsRefused) {
  PeerWorker a;
  auto h2 = session(a);
  const uint64_t src = h2->alloc(0, 64);
  h2->send(PushToPeerRequest{3, src, 0, 64, 1, 0, 1});
  expect_fatal(*h2);
}

TEST(PeerLinkWire, PeerWaitBeforeATicketIsRefused) {
  PeerWorker b;
  auto h1 = session(b);
  h1->send(PeerWaitRequest{1, 1});
  expect_fatal(*h1);
}

TEST(PeerLinkWire, PeerConnectWithAnotherSecretFailsButKeepsTheSession) {
  PeerWorker b(std::string("secret of B"));
  PeerWorker a(std::string("secret of A"));
  auto h1 = session(b, std::string("secret of B"));
  const Ticket ticket = ticket_of(*h1);
  auto h2 = session(a, std::string("secret of A"));
  h2->send(PeerConnectRequest{1, 1, b.endpoint(), ticket, "worker A"});
  Frame f = h2->recv();
  ASSERT_TRUE(f.is_error()) << "PEER_CONNECT with the wrong secret succeeded";
  EXPECT_NE(f.error_kind(), ErrorKind::invalid_input) << f.error_message();
  EXPECT_NE(f.error_message().find("peer link 1 to " + b.endpoint()), std::string::npos) << f.error_message();
  h2->ping();  // the host's session on A stays open
  // The failed attempt did not take link id 1 (a taken id would be
  // invalid_input and close the session): the retry fails the same way.
  h2->send(PeerConnectRequest{1, 2, b.endpoint(), ticket, "worker A"});
  f = h2->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_NE(f.error_kind(), ErrorKind::invalid_input) << f.error_message();
  h2->ping();
  h1->ping();
  EXPECT_TRUE(eventually([&] { return b.worker->active_sessions() == 1; }));
}

TEST(PeerLinkWire, PeerConnectToNobodyFailsButKeepsTheSession) {
  PeerWorker a;
  std::string dead;
  {
    PeerWorker gone;
    dead = gone.endpoint();
  }
  auto h2 = session(a);
  h2->send(PeerConnectRequest{4, 1, dead, Ticket{}, "worker A"});
  Frame f = h2->recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::disconnected) << f.error_message();
  EXPECT_NE(f.error_message().find("peer link 4 to " + dead), std::string::npos) << f.error_message();
  h2->ping();
}

// 3. The pushing worker dies while the receiver waits: the wait ends, the
// host hears why at its next reply, and B's link session goes. A is stopped
// only once B's session is seen inside the wait (WorkerTestAccess::
// busy_sessions), so the link ends under a blocked wait on every run. The
// error's text shows what ended it: the link ("ended before"), not the wait's
// deadline (B's idle timeout, 600 s: "did not arrive in time", and the
// host's read would time out first) nor a cancel ("cancelled while waiting").
TEST(PeerLinkWire, AWaitEndsWhenThePushingWorkerStops) {
  PeerWorker b;
  auto a = std::make_unique<PeerWorker>();
  auto h1 = session(b);
  const uint64_t dst = h1->alloc(0, 256);
  const Ticket ticket = ticket_of(*h1);
  auto h2 = session(*a);
  h2->alloc(0, 256);
  h2->call(PeerConnectRequest{1, 3, b.endpoint(), ticket, "worker A"});
  ASSERT_TRUE(eventually([&] { return b.worker->active_sessions() == 2; })) << b.worker->active_sessions();

  h1->send(PeerWaitRequest{3, 99});
  ASSERT_TRUE(eventually([&] { return WorkerTestAccess::busy_sessions(*b.worker) == 1; }))
      << "B's session never entered the wait";
  a->worker->stop();
  h1->send(PingRequest{});
  expect_error(*h1, ErrorKind::disconnected, "ended before event 99");
  EXPECT_TRUE(eventually([&] { return b.worker->active_sessions() == 1; }))
      << b.worker->active_sessions() << " sessions on B: the link's is still there";
  h1->ping();  // the host's session on B is still usable
  const Bytes zero(256, 0);
  h1->send(ClearBufferRequest{dst, 0});
  EXPECT_TRUE(h1->get(dst, 0, 256) == zero);
  a.reset();
}

// A link that ends after its event arrived still delivers it.
TEST(PeerLinkWire, WhatArrivedBeforeTheLinkEndedIsDelivered) {
  PeerWorker b;
  auto h1 = session(b);
  const uint64_t dst = h1->alloc(0, 64);
  const Ticket ticket = ticket_of(*h1);
  const Bytes bytes = byte_pattern(64, 33);
  {
    auto link = attached_link(b, ticket, 2);
    send_push(*link, 5, dst, 0, bytes);
    link->ping();  // the push was posted before the close
  }
  EXPECT_TRUE(eventually([&] { return b.worker->active_sessions() == 1; }));
  h1->send(PeerWaitRequest{2, 5});
  EXPECT_TRUE(h1->get(dst, 0, 64) == bytes);
  h1->send(PeerWaitRequest{2, 6});  // never pushed, and the link is gone
  h1->send(PingRequest{});
  expect_error(*h1, ErrorKind::disconnected, "ended before event 6");
}

}  // namespace
}  // namespace weft::rpc::wtest

// 4. Through the client library: x -> mul_mat on worker A -> add, scale on
// worker B -> read on the host.
namespace weft {
namespace {

using rpc_test::LocalWorker;
using rpc_test::pattern;

struct TwoWorkerRun {
  std::vector<std::vector<float>> results;  // y of every compute
  std::vector<SplitInfo> splits;
  int backend_of_h = -1, backend_of_y = -1;
  uint64_t a_received_steady = 0;  // bytes the host got from A over the steady computes
  uint64_t activation_bytes = 0;
  int steady_computes = 0;
};

constexpr int64_t kK = 64, kM = 128, kLinkN = 32;

std::vector<float> input_for(int i) {
  return pattern(static_cast<size_t>(kK * kLinkN), 0.13f, 0.7f * static_cast<float>(i));
}

// x -> h = mul_mat(W, x) on A -> y = scale(add(h, bias), 0.5) on B; the
// weights live on their workers, x is uploaded per compute, y read back.
struct TwoStage {
  TwoStage(Device& a, Device& b)
      : local(make_cpu_device(1)), ba(a.create_backend()), bb(b.create_backend()), bc(local->create_backend()) {
    w = wctx.new_tensor(DType::f32, {kK, kM});
    bias = wctx.new_tensor(DType::f32, {kM, 1});
    w->flags |= kFlagWeight;
    bias->flags |= kFlagWeight;
    Tensor* ws[] = {w};
    Tensor* bs[] = {bias};
    w_buf = allocate_tensors(a.default_buffer_type(), ws);
    bias_buf = allocate_tensors(b.default_buffer_type(), bs);
    tensor_set(*w, w_data.data(), 0, w->nbytes());
    tensor_set(*bias, bias_data.data(), 0, bias->nbytes());

    x = ctx.new_tensor(DType::f32, {kK, kLinkN});
    x->flags |= kFlagInput;
    h = ops::mul_mat(ctx, w, x);
    sum = ops::add(ctx, h, bias);
    y = ops::scale(ctx, sum, 0.5f);
    y->flags |= kFlagOutput;
    g.expand(y);

    sched = std::make_unique<Scheduler>(std::vector<Backend*>{ba.get(), bb.get(), bc.get()});
    sched->set_backend(*h, *ba);
    sched->set_backend(*sum, *bb);
    sched->set_backend(*y, *bb);
    sched->allocate(g);
  }
  ~TwoStage() { sched.reset(); }
  std::vector<float> compute(int i) {
    const std::vector<float> xv = input_for(i);
    tensor_set(*x, xv.data(), 0, x->nbytes());
    sched->compute(g);
    std::vector<float> out(static_cast<size_t>(y->nelements()));
    tensor_get(*y, out.data(), 0, y->nbytes());
    return out;
  }

  const std::vector<float> w_data = pattern(static_cast<size_t>(kK * kM), 0.37f, 0.5f);
  const std::vector<float> bias_data = pattern(static_cast<size_t>(kM), 0.91f, 2.0f);
  std::unique_ptr<Device> local;
  std::unique_ptr<Backend> ba, bb, bc;
  Context wctx, ctx;
  Tensor *w = nullptr, *bias = nullptr, *x = nullptr, *h = nullptr, *sum = nullptr, *y = nullptr;
  std::unique_ptr<Buffer> w_buf, bias_buf;
  Graph g;
  std::unique_ptr<Scheduler> sched;
};

TwoWorkerRun run_two_workers(bool peer_links, int computes) {
  LocalWorker wa, wb;  // declared first: they outlive every client object below
  RpcOptions options;
  options.peer_links = peer_links;
  auto da = make_rpc_devices(wa.endpoint, options);
  auto db = make_rpc_devices(wb.endpoint, options);
  TwoStage t(*da[0], *db[0]);

  TwoWorkerRun run;
  run.activation_bytes = t.h->nbytes();
  run.splits = t.sched->splits();
  run.backend_of_h = t.sched->backend_of(*t.h);
  run.backend_of_y = t.sched->backend_of(*t.y);
  RpcStats warm{};
  for (int i = 0; i < computes; ++i) {
    run.results.push_back(t.compute(i));
    if (i == 0) warm = rpc_stats(wa.endpoint);  // the links are set up by now
  }
  run.a_received_steady = rpc_stats(wa.endpoint).bytes_received - warm.bytes_received;
  run.steady_computes = computes - 1;
  return run;
}

void expect_reference(const std::vector<float>& got, int i) {
  const std::vector<float> w_data = pattern(static_cast<size_t>(kK * kM), 0.37f, 0.5f);
  const std::vector<float> bias_data = pattern(static_cast<size_t>(kM), 0.91f, 2.0f);
  const std::vector<float> xv = input_for(i);
  ASSERT_EQ(got.size(), static_cast<size_t>(kM * kLinkN));
  for (int64_t j = 0; j < kLinkN; ++j) {
    for (int64_t r = 0; r < kM; ++r) {
      double s = 0;
      for (int64_t l = 0; l < kK; ++l) {
        s += static_cast<double>(w_data[static_cast<size_t>(r * kK + l)]) * xv[static_cast<size_t>(j * kK + l)];
      }
      const double want = 0.5 * (s + bias_data[static_cast<size_t>(r)]);
      ASSERT_NEAR(got[static_cast<size_t>(j * kM + r)], want, 1e-4 * (1.0 + std::fabs(want)))
          << "compute " << i << " at (" << r << ", " << j << ")";
    }
  }
}

TEST(PeerLinkClient, ActivationsGoFromWorkerToWorker) {
  constexpr int kComputes = 21;
  const TwoWorkerRun on = run_two_workers(true, kComputes);
  const TwoWorkerRun off = run_two_workers(false, kComputes);

  for (const TwoWorkerRun* r : {&on, &off}) {
    SCOPED_TRACE(r == &on ? "peer links on" : "peer links off");
    EXPECT_EQ(r->backend_of_h, 0);
    EXPECT_EQ(r->backend_of_y, 1);
    ASSERT_GE(r->splits.size(), 2u);
    EXPECT_EQ(r->splits.front().backend, 0);
    EXPECT_EQ(r->splits.back().backend, 1);
    EXPECT_GE(r->splits.back().n_input_copies, 1) << "B's split does not copy A's activation in";
    ASSERT_EQ(r->results.size(), static_cast<size_t>(kComputes));
    for (int i = 0; i < kComputes; ++i) expect_reference(r->results[static_cast<size_t>(i)], i);
  }
  for (int i = 0; i < kComputes; ++i) {
    const auto& a = on.results[static_cast<size_t>(i)];
    const auto& b = off.results[static_cast<size_t>(i)];
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << "compute " << i << ": peer links and the host relay disagree";
  }

  const uint64_t act = on.activation_bytes;
  ASSERT_EQ(act, static_cast<uint64_t>(kM * kLinkN * 4));
  const uint64_t steady = static_cast<uint64_t>(on.steady_computes);
  std::printf("bytes from A over %llu computes: %llu with peer links, %llu without (activation: %llu bytes)\n",
              static_cast<unsigned long long>(steady), static_cast<unsigned long long>(on.a_received_steady),
              static_cast<unsigned long long>(off.a_received_steady), static_cast<unsigned long long>(act));
  EXPECT_LT(on.a_received_steady, steady * act / 8)
      << "with peer links the host still receives activation-sized traffic from A";
  EXPECT_GE(off.a_received_steady, steady * act) << "the host relay should read every activation from A";
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// Workers that cannot link (B refuses A's secret): whatever the compute does
// (an error naming the peer link, or a result), the host's own sessions on A
// and B stay usable: the failed PEER_CONNECT is A's reply, not A's end.
TEST(PeerLinkClient, WorkersThatCannotLinkCopyThroughTheHost) {
  rpc::WorkerOptions oa, ob;
  oa.auth_secret = "secret of A";
  ob.auth_secret = "secret of B";
  LocalWorker wa(oa), wb(ob);
  RpcOptions ra, rb;
  ra.auth_secret = oa.auth_secret;
  rb.auth_secret = ob.auth_secret;
  auto da = make_rpc_devices(wa.endpoint, ra);
  auto db = make_rpc_devices(wb.endpoint, rb);
  TwoStage t(*da[0], *db[0]);
  // A cannot authenticate to B: the pair's copies go through the host, and
  // the results are still right.
  for (int i = 0; i < 3; ++i) expect_reference(t.compute(i), i);
  const std::string why = rpc_stats(wa.endpoint).peer_link_failure;
  EXPECT_NE(why.find("peer link " + wa.endpoint + " -> " + wb.endpoint), std::string::npos) << why;
  // What answered stays in A's log: the host hears one text for every failure.
  EXPECT_NE(why.find("no weft worker took the link"), std::string::npos) << why;
  EXPECT_EQ(why.find("authentication"), std::string::npos) << why;
  std::vector<float> w_back(t.w_data.size());
  try {
    tensor_get(*t.w, w_back.data(), 0, t.w->nbytes());  // A
  } catch (const Error& e) {
    FAIL() << "the host's connection to A did not survive the failed peer link: " << e.what();
  }
  EXPECT_EQ(w_back, t.w_data);
  std::vector<float> bias_back(t.bias_data.size());
  tensor_get(*t.bias, bias_back.data(), 0, t.bias->nbytes());  // B
  EXPECT_EQ(bias_back, t.bias_data);
}

}  // namespace
}  // namespace weft
