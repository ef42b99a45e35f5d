// The peer inbox's limits, on the class itself (issue 35 item 11): at most
// kMaxPeerSources links attach to one session, at most 4,096 events of a
// link wait, a push that finds no room before its deadline cuts its link
// (the inbox's cap or the worker's budget), and everything waiting is
// charged to the worker's budget and given back. And a session's own memory
// limit (`weft worker --session-mem`) over the wire: per session, refused
// with a reply that keeps the session.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/peer_inbox.h"
#include "server/session.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

using Clock = std::chrono::steady_clock;

// A complete event of n bytes (an empty one costs only its bookkeeping).
std::string post(PeerInbox& inbox, uint32_t source, uint64_t event, size_t n,
                 std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
  static const std::vector<uint8_t> bytes(size_t{4} << 20, 7);
  PeerPushRequest push;
  push.event_id = event;
  push.dst_handle = 1;
  push.size = n;
  push.flags = kPushLast;
  push.data = std::span<const uint8_t>(bytes.data(), n);
  return inbox.post(source, push, Clock::now() + wait);
}

std::vector<PeerInbox::Part> take(PeerInbox& inbox, uint32_t source, uint64_t event) {
  const std::atomic<bool> cancel{false};
  return inbox.take(source, event, Clock::now() + std::chrono::seconds(5), cancel);
}

TEST(PeerInbox, AtMostTheCapOfLinksAttach) {
  WorkerShared shared;
  PeerInbox inbox(shared, size_t{1} << 20);
  for (uint32_t s = 0; s < kMaxPeerSources; ++s) EXPECT_EQ(inbox.attach(s, "link " + std::to_string(s)), "") << s;
  const std::string why = inbox.attach(kMaxPeerSources, "one too many");
  EXPECT_NE(why.find(std::to_string(kMaxPeerSources) + " peer links attached"), std::string::npos) << why;
}

TEST(PeerInbox, AtMost4096EventsOfALinkWait) {
  WorkerShared shared;
  PeerInbox inbox(shared, size_t{4} << 20);
  ASSERT_EQ(inbox.attach(0, "a"), "");
  for (uint64_t e = 0; e < 4096; ++e) ASSERT_EQ(post(inbox, 0, e, 0), "") << "event " << e;
  const size_t charged = shared.memory_in_use.load();
  EXPECT_EQ(charged, 4096 * (PeerInbox::kPartOverhead + PeerInbox::kEventOverhead));
  const std::string why = post(inbox, 0, 4096, 0);
  EXPECT_NE(why.find("4096 events of this link are waiting already"), std::string::npos) << why;
  EXPECT_EQ(shared.memory_in_use.load(), charged) << "a refused push kept its charge";
  take(inbox, 0, 17);  // one taken: room for one more
  EXPECT_EQ(post(inbox, 0, 4096, 0), "");
}

TEST(PeerInbox, APushThatFindsNoRoomInTimeEndsItsLink) {
  WorkerShared shared;
  PeerInbox inbox(shared, size_t{1} << 20);
  ASSERT_EQ(inbox.attach(0, "a"), "");
  ASSERT_EQ(post(inbox, 0, 1, 900 << 10), "");
  const auto t0 = Clock::now();
  const std::string why = post(inbox, 0, 2, 200 << 10, std::chrono::milliseconds(100));
  EXPECT_NE(why.find("no room for"), std::string::npos) << why;
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(100)) << "it did not wait for room until its deadline";
  // Over the inbox's cap however long it waits: refused at once.
  const std::string huge = post(inbox, 0, 3, (size_t{1} << 20) + 1);
  EXPECT_NE(huge.find("over the inbox's"), std::string::npos) << huge;
  // The owner takes what waits: room again.
  EXPECT_EQ(take(inbox, 0, 1).at(0).bytes.size(), size_t{900} << 10);
  EXPECT_EQ(post(inbox, 0, 2, 200 << 10), "");
}

TEST(PeerInbox, TheWorkersBudgetBoundsWhatWaitsAndComesBack) {
  WorkerShared shared;
  shared.memory_budget = size_t{256} << 10;  // less than the inbox's own cap
  {
    PeerInbox inbox(shared, size_t{1} << 20);
    ASSERT_EQ(inbox.attach(0, "a"), "");
    ASSERT_EQ(post(inbox, 0, 1, 200 << 10), "");
    const std::string why = post(inbox, 0, 2, 100 << 10, std::chrono::milliseconds(50));
    EXPECT_NE(why.find("no room for"), std::string::npos) << why;
    EXPECT_GE(shared.memory_in_use.load(), size_t{200} << 10);
    inbox.close();
    EXPECT_NE(post(inbox, 0, 3, 0).find("has ended"), std::string::npos);
  }  // never taken: given back
  EXPECT_EQ(shared.memory_in_use.load(), 0u);
}

// --session-mem: each session's buffers (and everything else it holds)
// within its own limit, whatever the worker's budget; over it, an ERROR
// naming the limit, and the session goes on.
TEST(SessionMemory, EachSessionHoldsAtMostItsLimit) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o;
  o.log = false;
  o.limits.session_memory = size_t{2} << 20;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn a(worker.port()), b(worker.port());
  a.handshake();
  b.handshake();
  const uint64_t h = a.alloc(0, size_t{1} << 20);
  Writer w;
  w.u32(0);
  w.u64(size_t{1} << 20);
  a.send(Cmd::alloc_buffer, w);
  const Frame f = a.recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory);
  EXPECT_NE(f.error_message().find("would pass the session's limit"), std::string::npos) << f.error_message();
  EXPECT_NE(f.error_message().find(std::to_string(size_t{2} << 20)), std::string::npos) << f.error_message();
  a.ping();  // the session stays
  b.alloc(0, size_t{1} << 20);  // the limit is per session
  a.free_buffer(h);
  a.alloc(0, size_t{1} << 20);  // freed bytes count no more
}

}  // namespace
}  // namespace weft::rpc::wtest
