// Resource exhaustion against a real `weft worker` process with a 64 MiB
// budget: kernel scratch, stored graphs, buffers from many sessions, idle and
// slow connections, and a flood of huge computes whose clients leave. A valid
// client must be served after every attack. Buffers the clients fill must
// not raise the worker's resident memory past its budget (judged against the
// measured cost of a filled byte: every build); over the other attacks the
// peak resident memory must stay within the budget plus a fixed allowance
// (builds without sanitizers, whose shadow memory and quarantine would count).
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

constexpr size_t kExhaustionBudget = size_t{64} << 20;
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

// The buffer phase: four sessions each ask for eight 8 MiB buffers, fill
// every one they are granted (SET_TENSOR straight into the buffer) and read
// bytes of it back. Resident growth is judged against the cost of a filled
// byte measured in the same run on a first 16 MiB buffer (held with the
// rest): sanitizers' shadow memory makes it 1.1-5x, so the check holds in
// every build, sanitized ones included.
constexpr size_t kFillBuffer = size_t{8} << 20;
constexpr size_t kCalibration = size_t{16} << 20;
constexpr size_t kRssSlack = size_t{24} << 20;  // session tables, socket buffers, allocator rounding

struct BufferPhase {
  size_t granted_bytes = 0, refused = 0;
  double rss_per_byte = 0;
  size_t growth = 0;  // VmRSS while every granted buffer is held and filled, less VmRSS before
};

// Fills [handle] with bytes of value `tag` and checks the first and last come back.
void fill_and_check(Conn& c, uint64_t handle, size_t n, uint8_t tag) {
  const std::vector<uint8_t> bytes(n, tag);
  c.set(handle, 0, bytes.data(), n);
  EXPECT_EQ(c.get(handle, 0, 1), Bytes{tag});
  EXPECT_EQ(c.get(handle, n - 1, 1), Bytes{tag});
}

BufferPhase fill_buffers_until_refused(pid_t pid, uint16_t port) {
  BufferPhase phase;
  const size_t before = status_bytes(pid, "VmRSS");
  std::vector<std::unique_ptr<Conn>> held;
  for (int s = 0; s < 4; ++s) {
    held.push_back(std::make_unique<Conn>(port));
    Conn& c = *held.back();
    c.handshake();
    if (s == 0) {  // the calibration, held with the rest
      fill_and_check(c, c.alloc(0, kCalibration), kCalibration, 0x5a);
      phase.granted_bytes += kCalibration;
      const size_t after = status_bytes(pid, "VmRSS");
      phase.rss_per_byte = after > before ? static_cast<double>(after - before) / static_cast<double>(kCalibration) : 0;
      EXPECT_GE(phase.rss_per_byte, 0.75) << "a filled 16 MiB buffer did not raise the worker's resident memory";
      EXPECT_LE(phase.rss_per_byte, 8.0);
    }
    for (int i = 0; i < 8; ++i) {
      c.send(AllocBufferRequest{0, kFillBuffer});
      const Frame f = c.recv();
      if (f.is_error()) {
        ++phase.refused;
        EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
        // The worker's budget or the session's limit (the same by default), naming the request.
        EXPECT_NE(f.error_message().find("a buffer of " + std::to_string(kFillBuffer) + " bytes"), std::string::npos)
            << f.error_message();
        continue;
      }
      phase.granted_bytes += kFillBuffer;
      fill_and_check(c, parse<AllocBufferReply>(f.payload).handle, kFillBuffer, static_cast<uint8_t>(s * 8 + i));
    }
  }
  const size_t during = status_bytes(pid, "VmRSS");
  phase.growth = during > before ? during - before : 0;
  return phase;
}

// A `weft worker` with the 64 MiB budget; false when it did not start.
bool start_budget_worker(rpc_test::ChildWorker& child) {
  const std::string weft = rpc_test::weft_binary();
  // weft_tests depends on the weft target (tests/CMakeLists.txt): a missing
  // binary is a broken tree, not a reason to skip.
  EXPECT_FALSE(weft.empty()) << "no executable weft at tools/weft/weft in this build tree";
  return !weft.empty() &&
         child.start({weft, "worker", "--port", "0", "--threads", "1", "--mem", std::to_string(kExhaustionBudget),
                      "--handshake-timeout", "1", "--max-clients", "16"},
                     "");
}

// A fresh worker, so that no earlier attack's freed memory is reused by
// these buffers and hides their cost.
TEST(WorkerExhaustion, FilledBuffersStayInsideTheBudget) {
  rpc_test::ChildWorker child;
  ASSERT_TRUE(start_budget_worker(child));
  const uint16_t port = port_of(child.endpoint());
  {
    const BufferPhase phase = fill_buffers_until_refused(child.pid(), port);
    std::printf("buffers: %zu MiB granted, %zu refused; resident growth %zu MiB at %.2f bytes per filled byte\n",
                phase.granted_bytes >> 20, phase.refused, phase.growth >> 20, phase.rss_per_byte);
    EXPECT_GT(phase.granted_bytes, kCalibration);
    EXPECT_GT(phase.refused, 0u) << "16 MiB and 32 buffers of 8 MiB all fit a 64 MiB budget";
    EXPECT_LE(phase.granted_bytes, kExhaustionBudget) << "the worker granted more buffer bytes than its budget";
    EXPECT_LE(phase.growth,
              phase.rss_per_byte * static_cast<double>(kExhaustionBudget) + static_cast<double>(kRssSlack))
        << "the worker's resident memory grew by " << (phase.growth >> 20) << " MiB while its clients held "
        << (phase.granted_bytes >> 20) << " MiB of buffers (budget " << (kExhaustionBudget >> 20)
        << " MiB; a filled byte costs " << phase.rss_per_byte << " resident bytes in this build)";
  }  // all freed on disconnect
  GoodClient good(port, 0, 99);
  good.round();
}

TEST(WorkerExhaustion, PeakMemoryStaysInsideTheBudgetAndAValidClientIsServed) {
  rpc_test::ChildWorker child;
  ASSERT_TRUE(start_budget_worker(child));
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
              kExhaustionBudget >> 20);
  if (!kSanitized) {
    EXPECT_LE(peak, baseline + kExhaustionBudget + kAllowance) << "the worker held more than its budget";
  }
}

}  // namespace
}  // namespace weft::rpc::wtest
