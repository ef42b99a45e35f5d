// Telling a dead worker from a slow one without a user-set timeout
// (protocol 1.10 HEARTBEAT frames, docs/recovery.md "Detection"): a
// compute longer than the silence bound completes because the busy worker
// sends heartbeats; a stopped worker process (SIGSTOP) is found within the
// bound; a client that does not ask for heartbeats gets none.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "client/connection.h"
#include "child_worker.h"
#include "rpc_client_fixture.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace weft::rpc_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The state letter of /proc/PID/stat ('T': stopped), or '?'.
char process_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');  // the name may hold spaces
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

// A worker whose only device sleeps before each compute: longer than the
// 2 s silence bound, so only heartbeats keep the connection alive.
LocalWorker slow_worker(int delay_ms) {
  AsyncOptions ao;
  ao.delay_ms = delay_ms;
  return LocalWorker(make_async_device(ao));
}

TEST(RpcHeartbeat, AComputeLongerThanTheSilenceBoundCompletes) {
  LocalWorker w = slow_worker(2600);
  // Held here, so that the devices use this one (detect_hangs by default, no reply_timeout).
  auto connection = rpc::get_connection(w.endpoint, RpcOptions{});
  auto devices = make_rpc_devices(w.endpoint);
  ASSERT_TRUE(connection);
  ASSERT_TRUE(connection->has(rpc::kCapHeartbeat));
  EXPECT_EQ(connection->silence_bound(), rpc::Connection::kMinSilence);
  auto backend = devices.at(0)->create_backend();
  SiluMatmul graph(64, 32, 2);
  auto buf = graph.allocate(devices[0]->default_buffer_type());
  const auto t0 = Clock::now();
  backend->compute(graph.g);
  backend->synchronize();
  EXPECT_GT(Clock::now() - t0, rpc::Connection::kMinSilence);  // the wait was longer than the bound
  EXPECT_TRUE(graph.correct());
  const RpcStats s = rpc_stats(w.endpoint);
  // One heartbeat every 250 ms of the 2.6 s: at least 6 even on a loaded machine.
  EXPECT_GE(s.heartbeats, 6u);
  EXPECT_EQ(s.hangs_detected, 0u);
  // The silences measured were about a heartbeat's period: the bound stays at its floor.
  EXPECT_EQ(connection->silence_bound(), rpc::Connection::kMinSilence);
}

TEST(RpcHeartbeat, AClientThatDoesNotAskGetsNone) {
  LocalWorker w = slow_worker(600);
  RpcOptions options;
  options.detect_hangs = false;  // as a client older than 1.10
  auto connection = rpc::get_connection(w.endpoint, options);
  auto devices = make_rpc_devices(w.endpoint, options);
  ASSERT_TRUE(connection);
  EXPECT_FALSE(connection->has(rpc::kCapHeartbeat));
  EXPECT_EQ(connection->silence_bound().count(), 0);
  auto backend = devices.at(0)->create_backend();
  SiluMatmul graph(64, 32, 2);
  auto buf = graph.allocate(devices[0]->default_buffer_type());
  backend->compute(graph.g);
  backend->synchronize();  // a heartbeat in the stream would be a protocol error here
  EXPECT_TRUE(graph.correct());
  EXPECT_EQ(rpc_stats(w.endpoint).heartbeats, 0u);
}

// A `weft worker` process stopped by SIGSTOP keeps its socket open: TCP
// sees it alive. The silence bound finds it: the call fails, disconnected,
// after about 2 s, saying why; a new connection's handshake to it fails
// after the connect timeout.
TEST(RpcHeartbeat, AStoppedWorkerProcessIsFoundWithinTheBound) {
  const std::string weft = weft_binary();
  if (weft.empty()) GTEST_SKIP() << "needs the weft binary of this build tree (tools/weft/weft)";
  ChildWorker child;
  ASSERT_TRUE(child.start({weft, "worker", "--port", "0", "--threads", "1"}, "")) << "the worker did not start";
  auto connection = rpc::get_connection(child.endpoint(), RpcOptions{});
  ASSERT_TRUE(connection);
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  // SIGSTOP takes effect asynchronously: wait until the process shows as stopped.
  for (int i = 0; i < 500 && process_state(child.pid()) != 'T'; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(process_state(child.pid()), 'T') << "the worker did not stop";
  const auto t0 = Clock::now();
  // On a thread, so that a missing bound fails the test instead of hanging it.
  auto outcome = std::async(std::launch::async, [&]() -> std::string {
    try {
      connection->get_devices();
      return "returned";
    } catch (const Error& e) {
      return std::string(e.kind() == ErrorKind::disconnected ? "disconnected: " : "other: ") + e.what();
    }
  });
  const bool done = outcome.wait_for(15s) == std::future_status::ready;
  const auto waited = Clock::now() - t0;
  // Still stopped, its listening socket still accepts (the kernel does): a
  // new connection's HELLO goes unanswered, and fails after the connect
  // timeout (5 s) instead of waiting for ever.
  std::string reconnect = "not tried";
  Clock::duration reconnect_took{};
  if (done) {
    auto again = std::async(std::launch::async, [&]() -> std::string {
      try {
        rpc::get_connection(child.endpoint(), RpcOptions{});
        return "connected";
      } catch (const Error& e) {
        return std::string(e.kind() == ErrorKind::disconnected ? "disconnected: " : "other: ") + e.what();
      }
    });
    const auto t1 = Clock::now();
    if (again.wait_for(15s) == std::future_status::ready) {
      reconnect = again.get();
      reconnect_took = Clock::now() - t1;
    } else {
      reconnect = "still waiting after 15 s";
      ::kill(child.pid(), SIGCONT);
      child.kill();
      again.wait();
    }
  }
  ::kill(child.pid(), SIGCONT);
  if (!done) {
    child.kill();  // its socket closes: the blocked read ends
    outcome.wait();
    FAIL() << "a stopped worker was not found in 15 s";
  }
  const std::string what = outcome.get();
  EXPECT_EQ(what.rfind("disconnected: ", 0), 0u) << what;
  EXPECT_NE(what.find(child.endpoint()), std::string::npos) << what;
  EXPECT_NE(what.find("no reply and no heartbeat"), std::string::npos) << what;
  EXPECT_GE(waited, rpc::Connection::kMinSilence - 50ms);
  EXPECT_LT(waited, rpc::Connection::kMinSilence + 1500ms);
  EXPECT_TRUE(connection->broken());
  EXPECT_EQ(rpc_stats(child.endpoint()).hangs_detected, 1u);
  EXPECT_FALSE(rpc_alive(child.endpoint()));
  EXPECT_EQ(reconnect.rfind("disconnected: ", 0), 0u) << reconnect;
  EXPECT_NE(reconnect.find("HELLO"), std::string::npos) << reconnect;
  EXPECT_LT(reconnect_took, 8s);
}

// The host waits on worker B, alive and busy (heartbeats), which waits for
// a push from worker A, stopped. A is found by the probe (a PING after 1 s
// without frames, then the silence bound); B's wait is then given up at its
// next heartbeat, and B counts as alive (the wait was not its fault).
TEST(RpcHeartbeat, AWaitOnALiveWorkerIsGivenUpWhenItsPeerHangs) {
  const std::string weft = weft_binary();
  if (weft.empty()) GTEST_SKIP() << "needs the weft binary of this build tree (tools/weft/weft)";
  ChildWorker a, b;
  ASSERT_TRUE(a.start({weft, "worker", "--port", "0", "--threads", "1"}, "")) << "worker A did not start";
  ASSERT_TRUE(b.start({weft, "worker", "--port", "0", "--threads", "1"}, "")) << "worker B did not start";
  auto ca = rpc::get_connection(a.endpoint(), RpcOptions{});
  auto cb = rpc::get_connection(b.endpoint(), RpcOptions{});
  const rpc::Connection::PeerRoute route = ca->peer_route(*cb);
  ASSERT_NE(route.link, 0u) << route.failure;
  ASSERT_EQ(::kill(a.pid(), SIGSTOP), 0);
  for (int i = 0; i < 500 && process_state(a.pid()) != 'T'; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(process_state(a.pid()), 'T') << "worker A did not stop";
  const auto t0 = Clock::now();
  cb->send(rpc::PeerWaitRequest{route.source, cb->next_peer_event()});  // for a push A never sends
  auto outcome = std::async(std::launch::async, [&]() -> std::string {
    try {
      cb->call(rpc::PingRequest{});  // answered only after the wait
      return "answered";
    } catch (const Error& e) {
      return std::string(e.kind() == ErrorKind::disconnected ? "disconnected: " : "other: ") + e.what();
    }
  });
  const bool done = outcome.wait_for(12s) == std::future_status::ready;
  const auto waited = Clock::now() - t0;
  ::kill(a.pid(), SIGCONT);
  if (!done) {
    b.kill();  // its socket closes: the blocked read ends
    outcome.wait();
    FAIL() << "the wait on B was not given up in 12 s";
  }
  const std::string what = outcome.get();
  EXPECT_EQ(what.rfind("disconnected: ", 0), 0u) << what;
  EXPECT_NE(what.find("gave up waiting: " + a.endpoint()), std::string::npos) << what;
  // The probe's second, the 2 s bound, a heartbeat: about 3.3 s.
  EXPECT_LT(waited, 7s);
  EXPECT_TRUE(ca->broken());
  EXPECT_TRUE(cb->abandoned());
  EXPECT_EQ(ca->stats().hangs_detected, 1u);
  EXPECT_GT(cb->stats().heartbeats, 0u);
  EXPECT_FALSE(rpc_alive(a.endpoint()));
  EXPECT_TRUE(rpc_alive(b.endpoint()));  // alive: a new connection reaches it
  auto again = rpc::get_connection(b.endpoint(), RpcOptions{});
  EXPECT_NE(again, cb);
  EXPECT_NO_THROW(again->call(rpc::PingRequest{}));
}

}  // namespace
}  // namespace weft::rpc_test
