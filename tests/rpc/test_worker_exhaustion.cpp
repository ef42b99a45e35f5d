// Resource exhaustion against a real `weft worker` process with a 64 MiB
// budget: kernel scratch, stored graphs, buffers from many sessions, idle and
// slow connections, and a flood of huge computes whose clients leave. A valid
// client must be served after every attack, and the worker's peak resident
// memory must stay within its budget plus a fixed allowance (checked in
// builds without sanitizers, whose shadow memory and quarantine would count).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_worker.h"
#include "protocol/graph_codec.h"
#include "sanitized.h"
#include "weft/core/ops.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

using namespace std::chrono_literals;

using test::kSanitized;

constexpr size_t kBudget = size_t{64} << 20;
constexpr size_t kAllowance = size_t{96} << 20;  // threads, tables, allocator slack, the binary itself

// A field of /proc/PID/status in bytes (VmRSS, VmHWM).
size_t status_bytes(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string k;
  size_t kib = 0;
  std::string unit;
  while (in >> k) {
    if (k == key + ":") {
      in >> kib >> unit;
      return kib * 1024;
    }
    std::getline(in, unit);
  }
  return 0;
}

uint16_t port_of(const std::string& endpoint) {
  return static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

// Sends g on a fresh session (allocating its buffer first) and returns the
// session; nullptr when the worker's budget refused the buffer (sessions
// that just ended may still be freeing theirs).
std::unique_ptr<Conn> send_graph(uint16_t port, const Graph& g, uint64_t id) {
  auto c = std::make_unique<Conn>(port);
  c->handshake();
  const Placement placed(g);
  Writer w;
  w.u32(0);
  w.u64(placed.bytes);
  c->send(Cmd::alloc_buffer, w);
  const Frame f = c->recv();
  if (f.is_error()) {
    EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
    return nullptr;
  }
  Reader r(f.payload, "ALLOC_BUFFER reply");
  const Bytes encoded = placed.encode(g, r.u64());
  c->compute(0, id, &encoded);
  return c;
}

TEST(WorkerExhaustion, PeakMemoryStaysInsideTheBudgetAndAValidClientIsServed) {
  const std::string weft = rpc_test::weft_binary();
  // weft_tests depends on the weft target (tests/CMakeLists.txt): a missing
  // binary is a broken tree, not a reason to skip.
  ASSERT_FALSE(weft.empty()) << "no executable weft at tools/weft/weft in this build tree";
  rpc_test::ChildWorker child;
  ASSERT_TRUE(child.start({weft, "worker", "--port", "0", "--threads", "1", "--mem", std::to_string(kBudget),
                           "--handshake-timeout", "1", "--max-clients", "16"},
                          ""));
  const uint16_t port = port_of(child.endpoint());
  std::this_thread::sleep_for(100ms);
  const size_t baseline = status_bytes(child.pid(), "VmRSS");
  uint64_t seed = 100;
  auto served = [&] {
    GoodClient good(port, 0, ++seed);
    good.round();
  };
  served();

  {  // kernel scratch: top_k over 2^26 aliased elements wants 512 MiB
    Context ctx;
    Tensor* one = ctx.new_tensor(DType::f32, {16});
    const int64_t ne[] = {int64_t{1} << 26};
    const size_t nb[] = {0};
    Graph g;
    g.expand(ops::top_k(ctx, ops::view(ctx, one, ne, nb, 0), 1));
    auto c = send_graph(port, g, 1);
    ASSERT_NE(c, nullptr);
    c->send(Cmd::ping, Bytes{});
    const Frame f = c->recv();
    ASSERT_TRUE(f.is_error());
    EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
  }
  served();

  {  // stored graphs: sessions storing graphs of 20,000 tensors until refused
    Context ctx;
    Tensor* t = ctx.new_tensor(DType::f32, {0});
    for (int i = 0; i < 20000; ++i) t = ops::scale(ctx, t, 1.0f);
    Graph g;
    g.expand(t);
    std::vector<std::unique_ptr<Conn>> held;
    for (int s = 0; s < 4; ++s) {
      held.push_back(std::make_unique<Conn>(port));
      Conn& c = *held.back();
      c.handshake();
      const uint64_t h = c.alloc(0, 0);
      Writer w;
      encode_graph(w, g, [&](const Tensor&) { return RemoteLocation{h, 0}; });
      for (uint64_t id = 1; id <= 16; ++id) c.compute(0, id, &w.data());
      c.send(Cmd::ping, Bytes{});
      (void)c.recv();  // a reply or the deferred out_of_memory
    }
    served();  // while they are held
  }
  served();

  {  // buffers: sessions allocating until the budget is gone
    std::vector<std::unique_ptr<Conn>> held;
    for (int s = 0; s < 4; ++s) {
      held.push_back(std::make_unique<Conn>(port));
      held.back()->handshake();
      for (int i = 0; i < 8; ++i) {
        Writer w;
        w.u32(0);
        w.u64(size_t{8} << 20);
        held.back()->send(Cmd::alloc_buffer, w);
        (void)held.back()->recv();
      }
    }
  }  // all freed on disconnect
  served();

  {  // 70 connections that never finish a handshake, half of them dribbling
    std::vector<std::unique_ptr<Conn>> idle;
    for (int i = 0; i < 70; ++i) idle.push_back(std::make_unique<Conn>(port));
    const uint8_t byte = 0x01;
    for (int i = 0; i < 70; i += 2) {
      try {
        idle[static_cast<size_t>(i)]->raw(&byte, 1);
      } catch (const Error&) {
      }
    }
    served();
  }

  for (int i = 0; i < 8; ++i) {  // huge computes (7e10 multiply-adds each) whose clients leave at once
    Context ctx;
    Tensor* row = ctx.new_tensor(DType::f32, {65536});
    const int64_t ne[] = {65536, 1 << 20};
    const size_t nb[] = {4, 0};
    Graph g;
    g.expand(ops::mul_mat(ctx, ops::view(ctx, row, ne, nb, 0), ctx.new_tensor(DType::f32, {65536, 1})));
    send_graph(port, g, 1);
    std::this_thread::sleep_for(20ms);
  }
  served();

  const size_t peak = status_bytes(child.pid(), "VmHWM");
  std::printf("worker RSS: baseline %zu MiB, peak %zu MiB (budget %zu MiB)\n", baseline >> 20, peak >> 20,
              kBudget >> 20);
  if (!kSanitized) {
    EXPECT_LE(peak, baseline + kBudget + kAllowance) << "the worker held more than its budget";
  }
}

}  // namespace
}  // namespace weft::rpc::wtest
